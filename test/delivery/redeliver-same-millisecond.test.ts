import { expect } from 'chai';
import { requestRedelivery } from '../../src/delivery/redeliver.js';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { DeliveryHarness, stoppedAfterEach, until } from './harness.js';

// The worker holds a lead it has just settled for a minute, so the lagging copy of its row (still
// "pending" for a few ms) does not take a slot again; a row due no earlier than the settling
// attempt started is a redelivery, taken at once. It used to compare with the time the outcome
// came back: a redelivery requested within that same millisecond (a script right after the
// failure, a busy machine) looked like the lagging copy, and the lead waited out the minute.

describe('delivery: a redelivery requested in the millisecond its delivery failed for good', function () {
  this.timeout(60_000);
  const stopAfter = stoppedAfterEach();

  it('is sent at once, not after the minute a settled lead is held', async () => {
    const fixed = new Set<number>();
    const endpoint = stopAfter(await BuyerEndpoint.start((request) => (fixed.has(request.body.lead_id as number) ? 200 : 401), { keepIdleConnections: true }));
    const h = stopAfter(await DeliveryHarness.start(endpoint));
    const { leadId } = await h.sell();
    // The worker's clock stands still an hour ahead: the sale is due by it, and the failure, its
    // hold and the redelivery below all fall in one millisecond.
    const frozen = new Date(Date.now() + 3_600_000);
    h.worker({ now: () => frozen });
    await until(async () => (await h.ofType(leadId, 'LeadDeliveryFailed')).length === 1, 10_000, () => 'the final 401');
    expect((await h.ofType<{ next_attempt_at: string | null }>(leadId, 'LeadDeliveryFailed'))[0]!.next_attempt_at, 'failed for good').to.equal(null);
    await h.rowWith(leadId, 'failed');

    fixed.add(leadId);
    await requestRedelivery(h.svc.service.store, leadId, {
      principal: { role: 'admin', name: 'ops', keyId: null },
      traceId: 'same-millisecond',
      now: frozen,
      reason: null,
      buyerKnown: () => true,
    });
    await until(async () => (await h.ofType(leadId, 'LeadDelivered')).length === 1, 10_000, () => 'the redelivery, well within the minute a settled lead is held');
    expect(endpoint.forLead(leadId), 'refused once, then taken').to.have.length(2);
  });
});

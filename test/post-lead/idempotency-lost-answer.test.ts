import { expect } from 'chai';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { overriding } from '../support/overriding.js';
import { TestService, validLead } from '../support/service.js';

// A process that dies after recording its lead and before storing the Idempotency-Key's answer
// leaves a claim with no answer, which goes stale after 30 s. The supplier's retry with the key
// then takes the claim over: it must get the lead that was recorded, not make a second lead that
// the first refuses as its duplicate. Here the answer's append is refused, as a crash would leave it.

describe('an Idempotency-Key whose answer was never stored', function () {
  this.timeout(30_000);
  let svc: TestService;
  let key: string;
  let clock = Date.now();
  /** The trace whose answer the store refuses to keep. */
  let lostTrace: string | undefined;

  before(async () => {
    svc = await TestService.start({
      now: () => new Date(clock),
      wrapStore: (store) =>
        overriding(store, {
          append: (stream, events, options) =>
            events.some((event) => event.type === 'IdempotentResponseRecorded' && (event.data as { trace_id: string }).trace_id === lostTrace)
              ? Promise.reject(new EventStoreUnavailableError('the process died before this'))
              : store.append(stream, events, options),
        }),
    });
    key = await svc.key('supplier', 'sup-1');
  });
  after(() => svc.stop());

  it('a retry once the claim is stale gets the lead recorded, replayed, and no second lead is made', async function () {
    const body = JSON.stringify(validLead());
    const traceparent = `00-${'ab'.repeat(16)}-${'cd'.repeat(8)}-01`;
    lostTrace = 'ab'.repeat(16);
    const first = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-lost', traceparent });
    expect([first.status, first.body.code, first.body.trace_id], first.text).to.deep.equal([201, 'SOLD', lostTrace]);

    // Within 30 s the key is in flight; after, the claim is stale and may be taken over.
    clock += 31_000;
    const retry = await svc.post(body, { 'x-api-key': key, 'idempotency-key': 'order-lost' });
    expect([retry.status, retry.body.code, retry.body.lead_id], retry.text).to.deep.equal([201, 'SOLD', first.body.lead_id]);
    expect(retry.headers['idempotency-replayed']).to.equal('true');
    expect(retry.body.trace_id, 'the answer of the post that recorded it').to.equal(lostTrace);
    // No other lead was recorded for the retry: the next one posted takes the next id but one at most.
    const next = await svc.post(validLead(), { 'x-api-key': key });
    const recorded = (await svc.service.store.readAll()).filter((event) => event.type === 'LeadReceived').map((event) => (event.data as { lead_id: number }).lead_id);
    expect(recorded).to.deep.equal([first.body.lead_id, next.body.lead_id]);

    // Another body under the key is told so, not given the lead.
    const other = await svc.post(validLead(), { 'x-api-key': key, 'idempotency-key': 'order-lost' });
    expect([other.status, other.body.code]).to.deep.equal([422, 'IDEMPOTENCY_CONFLICT']);
  });
});

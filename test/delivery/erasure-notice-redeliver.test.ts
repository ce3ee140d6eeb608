import { expect } from 'chai';
import { verifyDelivery } from '../../src/delivery/signature.js';
import { BuyerEndpoint, type ReceivedDelivery } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, SECRET_ENV, until } from './harness.js';

// A `lead.erased` notice that failed for good (the buyer was down longer than its max_attempts
// last) is sent again by the admin's redelivery route, through the real worker, to a local buyer
// endpoint that refuses notices with 503 until it is told to take them.

const SECRET = 'notice-again-secret-41d2';
type Json = Record<string, any>;

describe('erasure notice: sending a notice that failed for good again', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  /** While set, the buyer answers every notice 503: it is down. Leads are always taken. */
  let down = true;
  /** Notices still to be refused once the buyer is back (a last 503 of its outage). */
  let refuseAfterwards = 1;
  const notices = (leadId: number) => endpoint.forLead(leadId).filter((r: ReceivedDelivery) => r.body.type === 'lead.erased');

  before(async function () {
    process.env[SECRET_ENV] = SECRET;
    endpoint = await BuyerEndpoint.start((request) => {
      if (request.body.type !== 'lead.erased') return 200;
      if (down) return 503;
      return refuseAfterwards-- > 0 ? 503 : 200;
    });
    // max_attempts 3: the notice is given up after three 503s.
    harness = await DeliveryHarness.start(endpoint, { secret_env: SECRET_ENV, max_attempts: 3 });
    harness.worker();
  });

  after(async function () {
    await harness?.stop();
    await endpoint?.stop();
    delete process.env[SECRET_ENV];
  });

  const redeliver = (leadId: number, key: string, body?: Json) =>
    harness.svc.request('POST', `/functions/deliveries/${leadId}/redeliver`, { 'x-api-key': key, 'content-type': 'application/json' }, body && JSON.stringify(body));

  it('the admin re-opens it once the buyer is back; the buyer receives a valid signed notice, in a fresh round of max_attempts, recorded sent', async function () {
    const admin = await harness.svc.key('admin', 'ops');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);

    // Down longer than its three attempts last: the notice is given up.
    const givenUp = async () => (await harness.ofType<{ next_attempt_at: string | null }>(leadId, 'ErasureNoticeFailed')).some((f) => f.next_attempt_at === null);
    await until(givenUp, 15_000, () => 'the notice given up');
    await until(async () => (await harness.row(leadId))?.notice === 'failed', 10_000, () => 'the row: notice failed');
    expect(notices(leadId)).to.have.length(3);

    // The buyer is back (its first notice still refused, as a last 503 of the outage).
    down = false;
    const reply = await redeliver(leadId, admin, { reason: 'buyer_outage' });
    expect(reply.status, reply.text).to.equal(202);
    expect(reply.body).to.include({ ok: true, code: 'OK' });
    expect(reply.body.message).to.contain('`lead.erased` notice').and.contain('re-opened');
    // The delivery row as it now stands: the lead delivered, its notice pending again, due now.
    const row = reply.body.delivery as Json;
    expect(row).to.include({ lead_id: leadId, buyer: HOOK_BUYER, status: 'delivered', erased: true, notice: 'pending' });
    expect(Math.abs(Date.parse(row.notice_next_at) - Date.now())).to.be.below(10_000);

    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 15_000, () => `the notice sent (${notices(leadId).length} POSTs)`);
    // Attempts go on from 3; the 503 of attempt 4 is retried (the round has its own budget), 5 is taken.
    const failed = await harness.ofType<{ attempt: number; next_attempt_at: string | null }>(leadId, 'ErasureNoticeFailed');
    expect(failed.map((f) => [f.attempt, f.next_attempt_at === null])).to.deep.equal([[1, false], [2, false], [3, true], [4, false]]);
    expect(await harness.ofType(leadId, 'ErasureNoticeSent')).to.have.length(1).and.to.have.nested.property('[0].attempt', 5);
    const [requested, ...twice] = await harness.ofType<Json>(leadId, 'ErasureNoticeRedeliveryRequested');
    expect(twice).to.have.length(0);
    expect(requested).to.deep.include({ lead_id: leadId, buyer: HOOK_BUYER, round: 2, attempts: 3, requested_by: { role: 'admin', name: 'ops' }, reason: 'buyer_outage' });

    const sent = notices(leadId);
    expect(sent).to.have.length(5);
    const taken = sent.at(-1)!;
    expect(JSON.parse(taken.text)).to.deep.equal({ type: 'lead.erased', lead_id: leadId, reason: 'consumer_request' });
    expect(taken.headers['idempotency-key']).to.equal(`lead-erased-${leadId}`);
    expect(verifyDelivery(SECRET, taken.headers['x-leadpost-timestamp'] as string, taken.text, taken.headers['x-leadpost-signature'] as string), 'a valid signature').to.equal(true);
    await until(async () => (await harness.row(leadId))?.notice === 'sent', 10_000, () => 'the row: notice sent');
    expect(await harness.row(leadId)).to.include({ status: 'delivered', erased: true, notice: 'sent', notice_next_at: null });
    // The lead itself is never sent again: one POST of it, then its notices.
    expect(endpoint.forLead(leadId).filter((r) => r.body.type !== 'lead.erased')).to.have.length(1);
    // A buyer reading the lead's events sees that an admin asked, not which one.
    const buyer = await harness.svc.key('buyer', HOOK_BUYER);
    const asBuyer = (await harness.svc.request('GET', `/functions/leads/${leadId}/events`, { 'x-api-key': buyer })).body.items as Json[];
    expect(asBuyer.find((e) => e.type === 'ErasureNoticeRedeliveryRequested')!.data.requested_by).to.deep.equal({ role: 'admin' });
  });

  it('a notice already sent is refused: 409 NOT_FAILED, in words about the notice, and nothing recorded', async function () {
    const admin = await harness.svc.key('admin', 'ops-2');
    const { leadId, lead } = await harness.sell({ zip: '90210' });
    await harness.rowWith(leadId, 'delivered');
    const erased = await harness.svc.post({ email: lead.email }, { 'x-api-key': admin }, '/functions/erasures');
    expect(erased.status, erased.text).to.equal(201);
    await until(async () => (await harness.ofType(leadId, 'ErasureNoticeSent')).length === 1, 15_000, () => 'the notice sent');

    const reply = await redeliver(leadId, admin);
    expect([reply.status, reply.body.code], reply.text).to.deep.equal([409, 'NOT_FAILED']);
    expect(reply.body.message).to.contain('`lead.erased` notice has not failed for good');
    expect(await harness.ofType(leadId, 'ErasureNoticeRedeliveryRequested')).to.deep.equal([]);
    expect(notices(leadId)).to.have.length(1);
  });
});

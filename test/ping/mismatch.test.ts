import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { TestService, validLead } from '../support/service.js';

// A post names its ping by ping_id; the ping was bid on for a zip, an accident_state, a sid and a
// test flag, so a lead that differs from its ping in any of them is refused (422 PING_MISMATCH),
// naming each field, and the ping stays unposted for the lead that matches it. A real lead posted
// with a test ping would be sold at a bid the reports count as test, and a test lead posted with a
// real ping would spend a real bid. (An answer says `"test": true` only of a test ping or lead.)

const routing = {
  currency: 'USD',
  // Bids on a ping from any state, and would take the lead from any state: nothing but the ping's
  // own check stands between a differing lead and a sale.
  buyers: [{ id: 'anywhere', price: 40, ping: { kind: 'static' } }],
  buckets: [{ id: 'unsold', default: true }],
};

describe("ping/post: a lead that differs from its ping", function () {
  this.timeout(30_000);
  let svc: TestService;
  let supplier: string;

  before(async function () {
    svc = await TestService.start({ routing });
    supplier = await svc.key('supplier', 'sup-1');
  });
  after(async () => svc?.stop());

  const ping = (body: unknown) => svc.post(body, { 'x-api-key': supplier }, '/functions/pings');
  const post = (body: unknown) => svc.post(body, { 'x-api-key': supplier });
  const TEST_MISMATCH = [{ field: 'test', code: 'ping_mismatch', message: "test differs from the ping's" }];

  it('in accident_state alone (zip and sid match) is rejected 422 PING_MISMATCH naming exactly accident_state, and the ping stays unposted', async function () {
    const pinged = await ping({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `state-${Date.now()}` });
    expect(pinged.status, pinged.text).to.equal(201);
    expect(pinged.body).to.include({ code: 'BID', bid: 40 });
    const pingId = pinged.body.ping_id as string;

    const mismatch = await post(validLead({ ping_id: pingId, zip: '90210', sid: 'src-1', accident_state: 'NY' }));
    expect(mismatch.status, mismatch.text).to.equal(422);
    expect(mismatch.body).to.include({ code: 'PING_MISMATCH', lead_status: 'rejected', acceptance: 'rejected', sold: false });
    expect(mismatch.body.errors).to.deep.equal([{ field: 'accident_state', code: 'ping_mismatch', message: "accident_state differs from the ping's" }]);

    // Nothing was posted on the ping: the lead that matches it is still sold at its bid.
    const events = await svc.service.store.readStream(`ping-${pingId}`);
    expect(events.map((e) => e.type)).to.deep.equal(['LeadPinged', 'PingBidsCollected']);
    const matching = await post(validLead({ ping_id: pingId, zip: '90210', sid: 'src-1', accident_state: 'CA' }));
    expect(matching.status, matching.text).to.equal(201);
    expect(matching.body).to.include({ code: 'SOLD', revenue: 40 });
  });

  for (const [pingTest, leadTest] of [[true, false], [false, true]] as const) {
    it(`a ${leadTest ? 'test' : 'real'} lead posted with a ${pingTest ? 'test' : 'real'} ping is rejected 422 PING_MISMATCH naming test, and the ping is still the matching lead's`, async function () {
      const pinged = await ping({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `test-flag-${pingTest}-${Date.now()}`, test: pingTest });
      expect([pinged.status, pinged.body.code, pinged.body.bid, pinged.body.test ?? false], pinged.text).to.deep.equal([201, 'BID', 40, pingTest]);
      const pingId = pinged.body.ping_id as string;

      const mismatch = await post(validLead({ ping_id: pingId, test: leadTest }));
      expect(mismatch.status, mismatch.text).to.equal(422);
      expect(mismatch.body).to.include({ code: 'PING_MISMATCH', lead_status: 'rejected', sold: false });
      expect(mismatch.body.errors).to.deep.equal(TEST_MISMATCH);
      // The message names every field a lead is held to, test included: it may be the only one that differs.
      expect(mismatch.body.message).to.equal("Lead rejected: its zip, accident_state, sid or test differ from its ping's; errors names each.");
      const events = await svc.service.store.readStream(`ping-${pingId}`);
      expect(events.map((e) => e.type)).to.deep.equal(['LeadPinged', 'PingBidsCollected']);

      const matching = await post(validLead({ ping_id: pingId, test: pingTest }));
      expect([matching.status, matching.body.code, matching.body.revenue, matching.body.test ?? false], matching.text).to.deep.equal([201, 'SOLD', 40, pingTest]);
    });
  }

  it('takes a ping_id in capitals or with blanks around it for the same ping, and a null ping_id for none', async function () {
    const pinged = await ping({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `case-${Date.now()}` });
    const pingId = pinged.body.ping_id as string;
    const sold = await post(validLead({ ping_id: ` ${pingId.toUpperCase()} ` }));
    expect([sold.status, sold.body.code, sold.body.revenue], sold.text).to.deep.equal([201, 'SOLD', 40]);
    const events = await svc.service.store.readStream(`ping-${pingId}`);
    expect(events.map((e) => e.type)).to.deep.equal(['LeadPinged', 'PingBidsCollected', 'PingPosted']);
    // As docs/events.md says: the ping's own events carry the ping's trace, its PingPosted the post's, as the lead's events do.
    const traces = events.map((e) => [e.metadata?.trace_id, e.metadata?.correlation_id]);
    expect(traces).to.deep.equal([...Array(2).fill([pinged.body.trace_id, pinged.body.trace_id]), [sold.body.trace_id, sold.body.trace_id]]);
    expect((await svc.service.store.readStream(`lead-${sold.body.lead_id}`))[0]!.metadata?.correlation_id).to.equal(sold.body.trace_id);
    const again = await post(validLead({ ping_id: pingId }));
    expect([again.status, again.body.code], again.text).to.deep.equal([409, 'PING_CONSUMED']);

    // A serializer that writes every optional field writes "ping_id": null for a plain post.
    const plain = await post(validLead({ ping_id: null }));
    expect([plain.status, plain.body.code, plain.body.revenue], plain.text).to.deep.equal([201, 'SOLD', 40]);
    const received = await svc.service.store.readStream(`lead-${plain.body.lead_id as number}`);
    expect(received.map((e) => e.type)).to.not.include('LeadPingMatched');
  });

  it('names test beside every other field that differs', async function () {
    const pinged = await ping({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `test-flag-all-${Date.now()}`, test: true });
    const mismatch = await post(validLead({ ping_id: pinged.body.ping_id, zip: '10001', accident_state: 'NY', sid: 'src-2', test: false }));
    expect(mismatch.status, mismatch.text).to.equal(422);
    expect((mismatch.body.errors as Array<{ field: string }>).map((e) => e.field)).to.deep.equal(['zip', 'accident_state', 'sid', 'test']);
  });
});

describe('ping/post: the routing file changed its currency since the bids', function () {
  this.timeout(30_000);
  let svc: TestService;

  before(async function () {
    svc = await TestService.start({ routing });
  });
  after(async () => svc?.stop());

  it('a post with a ping bid in the old currency is routed as a plain post in the new one, never sold at the old amount under the new currency', async function () {
    const supplier = await svc.key('supplier', 'sup-1');
    const pinged = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1' }, { 'x-api-key': supplier }, '/functions/pings');
    expect(pinged.body, pinged.text).to.include({ code: 'BID', bid: 40, currency: 'USD' });
    writeFileSync(join(svc.dataDir, 'routing.json'), JSON.stringify({ ...routing, currency: 'EUR', buyers: [{ ...routing.buyers[0], price: 30 }] }));
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    const posted = await svc.post(validLead({ ping_id: pinged.body.ping_id, zip: '90210', accident_state: 'CA', sid: 'src-1' }), { 'x-api-key': supplier });
    expect(posted.status, posted.text).to.equal(201);
    expect(posted.body).to.include({ code: 'SOLD', revenue: 30, currency: 'EUR' });
    const routed = (await svc.service.store.readStream(`lead-${posted.body.lead_id as number}`)).find((e) => e.type === 'LeadRouted')!;
    expect(routed.data).to.include({ price: 30, currency: 'EUR' });
    expect((routed.data as { strategy: string }).strategy).to.not.equal('ping');
  });
});

import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

// A post names its ping by ping_id; the ping was bid on for a zip, an accident_state and a sid, so a
// lead whose accident_state differs from its ping's is refused (422 PING_MISMATCH), naming the
// field, whatever the other fields: here the zip and the sid match, only the state differs.

const routing = {
  currency: 'USD',
  buyers: [
    // Bids on a ping from any state, and would take the lead from any state: nothing but the
    // ping's own check stands between the NY lead and a sale.
    { id: 'anywhere', price: 40, ping: { kind: 'static' } },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

describe('ping/post: a lead whose accident_state differs from its ping\'s', function () {
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

  it('is rejected with 422 PING_MISMATCH naming exactly accident_state, and the ping stays unposted', async function () {
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
});

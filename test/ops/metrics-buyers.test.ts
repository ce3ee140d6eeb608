import { expect } from 'chai';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { sample } from '../support/metrics.js';
import { TestService, validLead } from '../support/service.js';

// What /metrics tells an on-call engineer about the buyers and the checks, through a real service
// whose delivery worker runs on its background thread: bids by result, lead checks by result, and
// requests sent once more because a buyer closed the kept connection they went out on (a buyer
// that keeps doing so shows here before its requests start to fail).


describe('metrics of buyers and checks', function () {
  this.timeout(30_000);
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  let key: string;

  before(async function () {
    // Deliveries and bids both come to this buyer; it closes every connection it has answered on
    // as the next request comes on it, as a server does whose keep-alive time has just run out.
    endpoint = await BuyerEndpoint.start((request) => {
      if (request.reused) return 'close';
      return request.path.endsWith('/bid') ? { status: 200, body: '{"bid": 33}' } : 200;
    }, { keepIdleConnections: true });
    svc = await TestService.start({
      buyerCa: endpoint.cert,
      routing: {
        currency: 'USD',
        buyers: [
          { id: 'hook', price: 30, states: ['CA'], delivery: { kind: 'webhook', url: endpoint.url, timeout_ms: 5000 }, ping: { kind: 'webhook', url: `${endpoint.url}/bid`, timeout_ms: 5000 } },
          { id: 'flat', price: 10, states: ['TX'], ping: { kind: 'static' } },
        ],
        buckets: [{ id: 'unsold', default: true }],
      },
    });
    key = await svc.key('supplier', 'metrics-buyers');
  });
  after(async function () {
    await svc?.stop();
    await endpoint?.stop();
  });

  const metrics = async () => (await svc.request('GET', '/metrics')).text;
  async function until(series: string, value: number): Promise<string> {
    const deadline = Date.now() + 10_000;
    let text = await metrics();
    while (sample(text, series) !== value && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      text = await metrics();
    }
    return text;
  }

  it('counts a delivery sent once more on a new connection, from the background thread', async function () {
    for (const n of [1, 2]) {
      const reply = await svc.post(validLead({ zip: `9021${n}`, accident_state: 'CA' }), { 'x-api-key': key });
      expect(reply.body.code).to.equal('SOLD');
      const leadId = reply.body.lead_id as number;
      const deadline = Date.now() + 10_000;
      while (!endpoint.received.some((r) => r.body?.lead_id === leadId && !r.reused) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    // The second delivery went out on the first one's connection, met the close, and was sent again.
    expect(endpoint.received.filter((r) => !r.path.endsWith('/bid')).map((r) => r.reused)).to.deep.equal([false, true, false]);
    // The thread reports what it counted a few times a second; the attempt is counted once recorded, after the POST.
    expect(sample(await until('leadpost_delivery_attempts_total{outcome="delivered"}', 2), 'leadpost_delivery_attempts_total{outcome="delivered"}')).to.equal(2);
    expect(sample(await until('leadpost_buyer_requests_resent_total{kind="delivery"}', 1), 'leadpost_buyer_requests_resent_total{kind="delivery"}')).to.equal(1);
  });

  it("counts bids by bidder kind and result, and a bid asked again on a new connection", async function () {
    const ping = (zip: string, state: string) => svc.post({ zip, accident_state: state, sid: 'metrics-buyers' }, { 'x-api-key': key }, '/functions/pings');
    expect((await ping('90210', 'CA')).body.code).to.equal('BID');
    expect((await ping('90211', 'CA')).body.code).to.equal('BID');
    expect((await ping('73301', 'TX')).body.code).to.equal('BID');
    const text = await metrics();
    expect(sample(text, 'leadpost_ping_bids_total{kind="webhook",result="bid"}')).to.equal(2);
    expect(sample(text, 'leadpost_ping_bids_total{kind="webhook",result="ineligible"}')).to.equal(1);
    expect(sample(text, 'leadpost_ping_bids_total{kind="static",result="bid"}')).to.equal(1);
    expect(sample(text, 'leadpost_ping_bids_total{kind="static",result="ineligible"}')).to.equal(2);
    expect(sample(text, 'leadpost_buyer_requests_resent_total{kind="bid"}')).to.equal(1);
  });

  it('counts the checks of every posted lead by result', async function () {
    const text = await metrics();
    // The two leads above: a valid US mobile, an e-mail whose domain the test resolver knows, a certificate the rules accept.
    expect(sample(text, 'leadpost_lead_checks_total{check="phone",result="pass"}')).to.equal(2);
    expect(sample(text, 'leadpost_lead_checks_total{check="email",result="pass"}')).to.equal(2);
    expect(sample(text, 'leadpost_lead_checks_total{check="consent",result="pass"}')).to.equal(2);
  });
});

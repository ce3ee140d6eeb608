import { expect } from 'chai';
import type { PingBid, PingBidsCollected } from '../../src/events/ping-events.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { TestService } from '../support/service.js';

// A webhook bidder that keeps failing is rested instead of asked by every ping: while its endpoint
// hung, every supplier's ping waited for it until its timeout, for a bid that never came. After five
// failures in a row it is passed by (ineligible, bidder_resting) for 10 s; then one ping asks it
// again, and another failure rests it twice as long; any answer ends the rest.

describe('ping/post: a failing webhook bidder is rested', function () {
  this.timeout(60_000);
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  let supplier: string;
  let offsetMs = 0;
  let down = true;

  before(async function () {
    endpoint = await BuyerEndpoint.start((request) => (request.path === '/flaky' ? (down ? 'hang' : { status: 200, body: '{"bid": 50}' }) : { status: 200, body: '{"bid": 37.5}' }), {
      keepIdleConnections: true,
    });
    const base = endpoint.url.replace(/\/leads$/, '');
    svc = await TestService.start({
      routing: {
        currency: 'USD',
        buyers: [
          { id: 'steady', price: 10, ping: { kind: 'webhook', url: `${base}/steady`, timeout_ms: 5000 } },
          { id: 'flaky', price: 10, ping: { kind: 'webhook', url: `${base}/flaky`, timeout_ms: 200 } },
        ],
      },
      env: { PING_DEADLINE_MS: '5000' },
      now: () => new Date(Date.now() + offsetMs),
      buyerCa: endpoint.cert,
    });
    supplier = await svc.key('supplier', 'sup-1');
  });

  after(async function () {
    await svc?.stop();
    await endpoint?.stop();
  });

  let n = 0;
  /** Pings (never a repeat of an earlier one) and returns what the flaky bidder did in it. */
  async function ping(): Promise<PingBid> {
    n += 1;
    const reply = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `rest-${n}` }, { 'x-api-key': supplier }, '/functions/pings');
    expect(reply.body, reply.text).to.include({ code: 'BID' });
    const events = await svc.service.store.readStream(`ping-${reply.body.ping_id as string}`);
    const collected = events.find((e) => e.type === 'PingBidsCollected')!.data as PingBidsCollected['data'];
    return collected.bids.find((bid) => bid.buyer === 'flaky')!;
  }
  const asked = () => endpoint.received.filter((request) => request.path === '/flaky').length;

  it('is asked until it has failed five times in a row, then passed by; after its rest one ping tries it; an answer ends the rest', async function () {
    for (let i = 1; i <= 5; i++) {
      expect(await ping()).to.include({ result: 'timeout' });
      expect(asked()).to.equal(i);
    }
    // Rested: the pings answer without it, and it is not asked.
    for (let i = 0; i < 2; i++) expect(await ping()).to.deep.include({ result: 'ineligible', detail: 'bidder_resting', latency_ms: null });
    expect(asked()).to.equal(5);

    // Its 10 s over: one ping asks it; it fails again and rests 20 s.
    offsetMs += 10_001;
    expect(await ping()).to.include({ result: 'timeout' });
    expect(asked()).to.equal(6);
    expect(await ping()).to.include({ result: 'ineligible', detail: 'bidder_resting' });
    offsetMs += 10_001;
    expect(await ping()).to.include({ result: 'ineligible', detail: 'bidder_resting' });
    expect(asked()).to.equal(6);

    // Its 20 s over, three pings at once: one of them tries it, the others pass it by meanwhile.
    offsetMs += 10_001;
    const together = await Promise.all([ping(), ping(), ping()]);
    expect(together.map((bid) => bid.result).sort()).to.deep.equal(['ineligible', 'ineligible', 'timeout']);
    expect(asked()).to.equal(7);

    // Back up: once its rest (40 s now) is over, the ping that tries it gets its bid, and every ping asks it again.
    down = false;
    offsetMs += 40_001;
    expect(await ping()).to.include({ result: 'bid', amount: 50 });
    expect(await ping()).to.include({ result: 'bid', amount: 50 });
    expect(asked()).to.equal(9);
  });
});

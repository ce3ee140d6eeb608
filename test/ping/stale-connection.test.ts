import { expect } from 'chai';
import { collectBids } from '../../src/commands/ping/bidding.js';
import { buyerAgent } from '../../src/delivery/buyer-agent.js';
import { parseRoutingConfig } from '../../src/routing/load-config.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { NO_CAPS, NOW, PING } from './bidding-fixtures.js';

// A bidder asked over a kept-alive connection that it has just closed for idling (its keep-alive
// time ran out as the ping came): the bid must not be lost. The ping is sent once more on a new
// connection, once. A real local HTTPS bidder; the agent the service asks bidders with.

describe('ping bidding: a kept connection the bidder has closed', function () {
  this.timeout(30_000);
  let endpoint: BuyerEndpoint;
  /** What the bidder does with a ping that comes on a connection an earlier one came on. */
  let onReused: 'close' | 200 = 'close';
  let onNew: 'close' | 200 = 200;
  before(async function () {
    endpoint = await BuyerEndpoint.start((request) => {
      const answer = request.reused ? onReused : onNew;
      return answer === 200 ? { status: 200, body: '{"bid": 41.5}' } : answer;
    }, { keepIdleConnections: true });
  });
  after(async () => endpoint?.stop());

  const config = () =>
    parseRoutingConfig({ buyers: [{ id: 'hook', price: 1, ping: { kind: 'webhook', url: endpoint.url } }], buckets: [{ id: 'unsold', default: true }] }, 'stale-connection');
  const ping = (agent: ReturnType<typeof buyerAgent>, n: number) => collectBids(config(), `00000000-0000-7000-8000-00000000000${n}`, PING, NOW, 5_000, { caps: NO_CAPS, env: {}, agent });

  it('is asked once more on a new connection, and its bid stands', async function () {
    const agent = buyerAgent({ ca: endpoint.cert });
    try {
      expect((await ping(agent, 1)).winner).to.deep.equal({ buyer: 'hook', amount: 41.5 });
      const again = await ping(agent, 2);
      expect(again.bids.map((b) => [b.result, b.amount, b.detail ?? null])).to.deep.equal([['bid', 41.5, null]]);
      expect(endpoint.received.map((r) => [r.body.ping_id, r.reused])).to.deep.equal([
        ['00000000-0000-7000-8000-000000000001', false],
        ['00000000-0000-7000-8000-000000000002', true],
        ['00000000-0000-7000-8000-000000000002', false],
      ]);
    } finally {
      agent.destroy();
      endpoint.received.length = 0;
    }
  });

  it('once only: a bidder that closes the new connection too is an error, and a new connection closed is not tried again', async function () {
    const agent = buyerAgent({ ca: endpoint.cert });
    try {
      await ping(agent, 3);
      onNew = 'close';
      const lost = await ping(agent, 4);
      expect(lost.bids.map((b) => [b.result, b.detail])).to.deep.equal([['error', 'ECONNRESET']]);
      expect(endpoint.received.map((r) => r.reused)).to.deep.equal([false, true, false]);
    } finally {
      agent.destroy();
      onNew = 200;
      endpoint.received.length = 0;
    }
  });
});

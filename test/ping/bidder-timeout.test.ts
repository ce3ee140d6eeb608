import { expect } from 'chai';
import { Agent } from 'node:https';
import { collectBids } from '../../src/commands/ping/bidding.js';
import { type LoadedRoutingConfig, parseRoutingConfig } from '../../src/routing/load-config.js';
import { NO_CAPS, NOW, PING } from './bidding-fixtures.js';

// A bidder's timeout_ms that Node's timers cannot take. The routing file refuses one over a minute,
// but a value that reached the bidding some other way must fail that bidder alone, never the round.

/** A valid file, then one bidder's timeout set past what AbortSignal.timeout takes (2^32-1 ms). */
function withHugeTimeout(): LoadedRoutingConfig {
  const valid = parseRoutingConfig({
    buyers: [
      { id: 'typo', price: 1, ping: { kind: 'webhook', url: 'https://127.0.0.1:9/bids' } },
      { id: 'static', price: 20, ping: { kind: 'static' } },
    ],
  }, 'bidder-timeout');
  const buyers = valid.buyers.map((b) => (b.ping?.kind === 'webhook' ? { ...b, ping: { ...b.ping, timeout_ms: 5_000_000_000 } } : b));
  return { ...valid, buyers };
}

describe('ping bidding: a bidder timeout Node cannot time', function () {
  it('given a webhook bidder with a 5,000,000,000 ms timeout, when a ping is bid on, then that bidder is recorded as an error and the other bids still win', async function () {
    const agent = new Agent();
    try {
      const { bids, winner } = await collectBids(withHugeTimeout(), '00000000-0000-7000-8000-000000000009', PING, NOW, 2000, { caps: NO_CAPS, env: {}, agent });
      expect(bids.map((b) => [b.buyer, b.result, b.detail ?? null])).to.deep.equal([['typo', 'error', 'bad_timeout_ms'], ['static', 'bid', null]]);
      expect(winner).to.deep.equal({ buyer: 'static', amount: 20 });
    } finally {
      agent.destroy();
    }
  });
});

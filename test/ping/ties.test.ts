import { expect } from 'chai';
import { Agent } from 'node:https';
import { type CollectedBids, collectBids, standingBids } from '../../src/commands/ping/bidding.js';
import type { PingBid } from '../../src/events/ping-events.js';
import { parseRoutingConfig } from '../../src/routing/load-config.js';
import { NO_CAPS, NOW, PING } from './bidding-fixtures.js';

// Who wins a ping, decided by the bidding alone (no service, no network: static bidders bid their
// price). Given the buyers of a routing file, when a ping is bid on, then the highest standing bid
// wins; an equal bid goes to the buyer with the lower `priority` number, whichever is listed first;
// and the same order is the one a post tries the bids in (standingBids).

type BuyerEntry = { id: string; price: number; priority: number };

function given(...buyers: BuyerEntry[]) {
  const config = parseRoutingConfig({ buyers: buyers.map((b) => ({ ...b, ping: { kind: 'static' } })), buckets: [{ id: 'unsold', default: true }] }, 'ties');
  return {
    whenPinged: async (): Promise<CollectedBids> => {
      const agent = new Agent();
      try {
        return await collectBids(config, '00000000-0000-7000-8000-000000000001', PING, NOW, 1000, { caps: NO_CAPS, env: {}, agent });
      } finally {
        agent.destroy();
      }
    },
    /** The bids as a post ranks them, from bids in the given order. */
    ranked: (bids: readonly PingBid[]) => standingBids(config, bids).map((b) => b.buyer),
  };
}

const bid = (buyer: string, amount: number): PingBid => ({ buyer, kind: 'static', result: 'bid', amount, latency_ms: 0 });

describe('ping bidding: who wins', function () {
  describe('equal bids go to the lower priority number', function () {
    const first = { id: 'first', price: 30, priority: 1 };
    const second = { id: 'second', price: 30, priority: 9 };

    it('when the lower priority number is listed first', async function () {
      const collected = await given(first, second).whenPinged();
      expect(collected.bids.map((b) => [b.buyer, b.result, b.amount])).to.deep.equal([['first', 'bid', 30], ['second', 'bid', 30]]);
      expect(collected.winner).to.deep.equal({ buyer: 'first', amount: 30 });
    });

    it('when the lower priority number is listed last (not the first listed)', async function () {
      const collected = await given(second, first).whenPinged();
      expect(collected.bids.map((b) => [b.buyer, b.result, b.amount])).to.deep.equal([['second', 'bid', 30], ['first', 'bid', 30]]);
      expect(collected.winner).to.deep.equal({ buyer: 'first', amount: 30 });
    });

    it('a post tries them in that order, whatever order the bids and the buyers come in', function () {
      for (const buyers of [[first, second], [second, first]]) {
        const spec = given(...buyers);
        expect(spec.ranked([bid('first', 30), bid('second', 30)]), buyers.map((b) => b.id).join()).to.deep.equal(['first', 'second']);
        expect(spec.ranked([bid('second', 30), bid('first', 30)]), buyers.map((b) => b.id).join()).to.deep.equal(['first', 'second']);
      }
    });
  });

  describe('a higher bid wins whatever the priorities', function () {
    const cheapFirst = { id: 'cheap-first', price: 30, priority: 1 };
    const dearLast = { id: 'dear-last', price: 30.01, priority: 99 };

    it('in either order of the buyers', async function () {
      expect((await given(cheapFirst, dearLast).whenPinged()).winner).to.deep.equal({ buyer: 'dear-last', amount: 30.01 });
      expect((await given(dearLast, cheapFirst).whenPinged()).winner).to.deep.equal({ buyer: 'dear-last', amount: 30.01 });
    });

    it('and a post tries the higher bid first', function () {
      for (const buyers of [[cheapFirst, dearLast], [dearLast, cheapFirst]]) {
        const spec = given(...buyers);
        expect(spec.ranked([bid('cheap-first', 30), bid('dear-last', 30.01)])).to.deep.equal(['dear-last', 'cheap-first']);
        expect(spec.ranked([bid('dear-last', 30.01), bid('cheap-first', 30)])).to.deep.equal(['dear-last', 'cheap-first']);
      }
    });
  });
});

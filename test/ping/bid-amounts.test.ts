import { expect } from 'chai';
import { Agent } from 'node:https';
import { collectBids } from '../../src/commands/ping/bidding.js';
import type { PingBid } from '../../src/events/ping-events.js';
import { parseRoutingConfig } from '../../src/routing/load-config.js';
import { NO_CAPS, NOW, PING } from './bidding-fixtures.js';
import { BuyerEndpoint, type ReceivedDelivery } from '../delivery/buyer-endpoint.js';
import { TestService, validLead } from '../support/service.js';

// What a bid is worth, as the bidding judges it. A price is a number of the routing file's currency
// with at most two decimals: 19.99 is one although 19.99 * 100 is 1998.9999999999998 in binary
// floating point, and so is a bidder's 0.30000000000000004 (its own 0.1 + 0.2) or a value a
// billionth off a cent; a third decimal is not. A webhook bid is capped (the buyer's `max_bid`,
// else 10,000) and must be in the currency the ping was sent with, when the answer names one.
// Static bidders bid their price; webhook bidders are one real local HTTPS endpoint, a path each.

/** Webhook answers by path: the body is sent as written, so a bidder's exact digits reach the service. */
const ANSWERS: Record<string, string> = {
  '/19.99': '{"bid": 19.99}',
  '/4.35': '{"bid": 4.35}',
  '/0.07': '{"bid": 0.07}',
  '/sum': '{"bid": 0.30000000000000004}',
  '/a-billionth-over': '{"bid": 19.990000001}',
  '/a-billionth-under': '{"bid": 4.349999999}',
  '/three-decimals': '{"bid": 4.351}',
  '/half-a-cent': '{"bid": 0.005}',
  '/huge': '{"bid": 1e20}',
  '/ceiling': '{"bid": 10000}',
  '/over-ceiling': '{"bid": 10000.01}',
  '/60': '{"bid": 60}',
  '/50': '{"bid": 50}',
  '/eur': '{"bid": 40, "currency": "EUR"}',
  '/usd': '{"bid": 40, "currency": "USD"}',
  '/usd-lower-case': '{"bid": 40, "currency": "usd"}',
  '/eur-lower-case': '{"bid": 40, "currency": "eur"}',
  '/no-currency': '{"bid": 40}',
  '/currency-not-a-code': '{"bid": 40, "currency": 978}',
  '/eur-no-bid': '{"bid": null, "currency": "EUR"}',
};

describe('ping bidding: what a bid is worth', function () {
  this.timeout(30_000);
  let endpoint: BuyerEndpoint;
  let agent: Agent;

  before(async function () {
    endpoint = await BuyerEndpoint.start((request: ReceivedDelivery) => {
      const body = ANSWERS[request.path];
      return body === undefined ? 404 : { status: 200, body };
    });
    agent = new Agent({ ca: endpoint.cert });
  });
  after(async function () {
    agent?.destroy();
    await endpoint?.stop();
  });

  const base = () => endpoint.url.replace(/\/leads$/, '');
  const webhook = (path: string, fields: object = {}) => ({ id: `hook${path.replace(/[^a-z0-9]+/g, '-')}`, price: 1, ping: { kind: 'webhook', url: `${base()}${path}`, ...fields } });

  async function bidsOf(file: object): Promise<Record<string, PingBid>> {
    const config = parseRoutingConfig({ buckets: [{ id: 'unsold', default: true }], ...file }, 'bid-amounts');
    const { bids } = await collectBids(config, '00000000-0000-7000-8000-000000000002', PING, NOW, 2000, { caps: NO_CAPS, env: {}, agent });
    return Object.fromEntries(bids.map((b) => [b.buyer, b]));
  }
  const judged = (bid: PingBid | undefined) => bid && [bid.result, bid.amount, bid.detail ?? null];

  describe('a price with at most two decimals', function () {
    it('a static bidder priced 19.99, 4.35 or 0.07 bids exactly its price', async function () {
      const bids = await bidsOf({ buyers: [19.99, 4.35, 0.07].map((price, i) => ({ id: `static-${i}`, price, ping: { kind: 'static' } })) });
      expect(Object.values(bids).map(judged)).to.deep.equal([['bid', 19.99, null], ['bid', 4.35, null], ['bid', 0.07, null]]);
    });

    it('a webhook bid of 19.99, 4.35 or 0.07 stands at that amount', async function () {
      const bids = await bidsOf({ buyers: ['/19.99', '/4.35', '/0.07'].map((path) => webhook(path)) });
      expect(Object.values(bids).map(judged)).to.deep.equal([['bid', 19.99, null], ['bid', 4.35, null], ['bid', 0.07, null]]);
    });

    it('a webhook bid off a cent by floating-point noise or a billionth stands at the cent it means', async function () {
      const bids = await bidsOf({ buyers: ['/sum', '/a-billionth-over', '/a-billionth-under'].map((path) => webhook(path)) });
      expect([bids['hook-sum'], bids['hook-a-billionth-over'], bids['hook-a-billionth-under']].map(judged)).to.deep.equal([
        ['bid', 0.3, null],
        ['bid', 19.99, null],
        ['bid', 4.35, null],
      ]);
    });

    it('a webhook bid with a third decimal, or half a cent, is still no price', async function () {
      const bids = await bidsOf({ buyers: ['/three-decimals', '/half-a-cent'].map((path) => webhook(path)) });
      expect([bids['hook-three-decimals'], bids['hook-half-a-cent']].map(judged)).to.deep.equal([
        ['invalid', 4.351, 'not_a_price'],
        ['invalid', 0.005, 'not_a_price'],
      ]);
    });

    it('the highest of such bids wins at its amount', async function () {
      const config = parseRoutingConfig({ buyers: [webhook('/4.35'), webhook('/19.99'), { id: 'static', price: 19.98, ping: { kind: 'static' } }] }, 'bid-amounts');
      const { winner } = await collectBids(config, '00000000-0000-7000-8000-000000000003', PING, NOW, 2000, { caps: NO_CAPS, env: {}, agent });
      expect(winner).to.deep.equal({ buyer: 'hook-19-99', amount: 19.99 });
    });
  });

  describe('a ceiling on webhook bids', function () {
    it('a bid over 10,000 from a buyer that sets no max_bid is recorded above_max_bid and never wins; 10,000 itself stands', async function () {
      const config = parseRoutingConfig({ buyers: [webhook('/huge'), webhook('/over-ceiling'), webhook('/ceiling'), { id: 'static', price: 30, ping: { kind: 'static' } }] }, 'bid-amounts');
      const { bids, winner } = await collectBids(config, '00000000-0000-7000-8000-000000000004', PING, NOW, 2000, { caps: NO_CAPS, env: {}, agent });
      expect(bids.map(judged)).to.deep.equal([
        ['above_max_bid', 1e20, 'max_bid 10000'],
        ['above_max_bid', 10000.01, 'max_bid 10000'],
        ['bid', 10000, null],
        ['bid', 30, null],
      ]);
      expect(winner).to.deep.equal({ buyer: 'hook-ceiling', amount: 10000 });
    });

    it("a buyer's own max_bid caps its bids: over it is above_max_bid, at it stands", async function () {
      const bids = await bidsOf({ buyers: [webhook('/60', { max_bid: 50 }), webhook('/50', { max_bid: 50 })] });
      expect([bids['hook-60'], bids['hook-50']].map(judged)).to.deep.equal([['above_max_bid', 60, 'max_bid 50'], ['bid', 50, null]]);
    });

    it("a buyer's max_bid may be over 10,000: its bid of 1e20 is still over it", async function () {
      const bids = await bidsOf({ buyers: [webhook('/huge', { max_bid: 25000 }), webhook('/over-ceiling', { max_bid: 25000 })] });
      expect([bids['hook-huge'], bids['hook-over-ceiling']].map(judged)).to.deep.equal([['above_max_bid', 1e20, 'max_bid 25000'], ['bid', 10000.01, null]]);
    });
  });

  describe('the currency of a bid answer', function () {
    it('an answer naming another currency than the ping was sent with is invalid; the same currency, or none, is a bid', async function () {
      const bids = await bidsOf({ currency: 'USD', buyers: ['/eur', '/usd', '/no-currency', '/currency-not-a-code', '/eur-no-bid'].map((path) => webhook(path)) });
      expect([bids['hook-eur'], bids['hook-usd'], bids['hook-no-currency'], bids['hook-currency-not-a-code'], bids['hook-eur-no-bid']].map(judged)).to.deep.equal([
        ['invalid', null, 'currency_mismatch'],
        ['bid', 40, null],
        ['bid', 40, null],
        ['invalid', null, 'currency_mismatch'],
        ['no_bid', null, null],
      ]);
      // Every bidder was told the currency it is asked to bid in.
      for (const request of endpoint.received.filter((r) => r.path === '/eur')) expect(request.body.currency).to.equal('USD');
    });

    it('a currency code in lower case names the same currency: "usd" bids in a USD file, "eur" is still another currency', async function () {
      const bids = await bidsOf({ currency: 'USD', buyers: ['/usd-lower-case', '/eur-lower-case'].map((path) => webhook(path)) });
      expect([bids['hook-usd-lower-case'], bids['hook-eur-lower-case']].map(judged)).to.deep.equal([['bid', 40, null], ['invalid', null, 'currency_mismatch']]);
    });

    it("a file in EUR takes a bid answered in EUR and refuses one in USD", async function () {
      const bids = await bidsOf({ currency: 'EUR', buyers: ['/eur', '/usd'].map((path) => webhook(path)) });
      expect([bids['hook-eur'], bids['hook-usd']].map(judged)).to.deep.equal([['bid', 40, null], ['invalid', null, 'currency_mismatch']]);
    });
  });
});

describe('ping/post: bids through the service', function () {
  this.timeout(30_000);
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  let supplier: string;

  before(async function () {
    endpoint = await BuyerEndpoint.start((request) => ({ '/huge': { status: 200, body: '{"bid": 1e20}' }, '/eur': { status: 200, body: '{"bid": 40, "currency": "EUR"}' } })[request.path] ?? 404);
    const base = endpoint.url.replace(/\/leads$/, '');
    svc = await TestService.start({
      routing: {
        currency: 'USD',
        buyers: [
          { id: 'hook-huge', price: 1, ping: { kind: 'webhook', url: `${base}/huge` } },
          { id: 'hook-eur', price: 1, ping: { kind: 'webhook', url: `${base}/eur` } },
          { id: 'cents', price: 19.99, ping: { kind: 'static' } },
        ],
        buckets: [{ id: 'unsold', default: true }],
      },
      buyerCa: endpoint.cert,
    });
    supplier = await svc.key('supplier', 'sup-1');
  });
  after(async function () {
    await svc?.stop();
    await endpoint?.stop();
  });

  it('a ping bid on at 1e20 and at 40 EUR answers the 19.99 bid, and its lead sells at 19.99', async function () {
    const pinged = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1' }, { 'x-api-key': supplier }, '/functions/pings');
    expect([pinged.status, pinged.body.code, pinged.body.bid], pinged.text).to.deep.equal([201, 'BID', 19.99]);
    const events = await svc.service.store.readStream(`ping-${String(pinged.body.ping_id)}`);
    const collected = events.find((e) => e.type === 'PingBidsCollected')!.data as { bids: PingBid[] };
    expect(collected.bids.map((b) => [b.buyer, b.result, b.detail ?? null])).to.deep.equal([
      ['hook-huge', 'above_max_bid', 'max_bid 10000'],
      ['hook-eur', 'invalid', 'currency_mismatch'],
      ['cents', 'bid', null],
    ]);
    const sold = await svc.post(validLead({ ping_id: pinged.body.ping_id }), { 'x-api-key': supplier });
    expect([sold.status, sold.body.code, sold.body.revenue], sold.text).to.deep.equal([201, 'SOLD', 19.99]);
  });
});

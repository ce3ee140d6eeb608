import { expect } from 'chai';
import type { PingBidsCollected } from '../../src/events/ping-events.js';
import { loadServiceConfig } from '../../src/config.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { TestService } from '../support/service.js';

// The ping's two settings when the operator sets neither: a ping answers with the bids it has after
// PING_DEADLINE_MS (1000 ms), and its answer stands for PING_TTL_SECONDS (300 s). Read from an
// empty environment, then seen in a service started without them: the expiry it answers (under a
// stubbed clock, so to the millisecond) and when it stops waiting for a bidder that never answers.

const DEFAULT_DEADLINE_MS = 1000;
const DEFAULT_TTL_SECONDS = 300;
/** The hanging bidder's own timeout: longer than the default deadline, so the deadline ends its wait. */
const HANG_TIMEOUT_MS = 1500;

describe('ping defaults', function () {
  it('an empty environment gives a 1000 ms deadline and a 300 s expiry', function () {
    const config = loadServiceConfig({});
    expect(config.pingDeadlineMs).to.equal(DEFAULT_DEADLINE_MS);
    expect(config.pingTtlSeconds).to.equal(DEFAULT_TTL_SECONDS);
    // Set empty is unset.
    expect(loadServiceConfig({ PING_DEADLINE_MS: '', PING_TTL_SECONDS: '' })).to.include({ pingDeadlineMs: DEFAULT_DEADLINE_MS, pingTtlSeconds: DEFAULT_TTL_SECONDS });
  });

  describe('a service started without PING_DEADLINE_MS or PING_TTL_SECONDS', function () {
    this.timeout(30_000);
    const NOW = new Date('2026-03-02T15:00:00.000Z');
    let endpoint: BuyerEndpoint;
    let svc: TestService;
    let supplier: string;

    before(async function () {
      endpoint = await BuyerEndpoint.start(() => 'hang');
      svc = await TestService.start({
        routing: {
          buyers: [
            { id: 'static', price: 20, ping: { kind: 'static' } },
            { id: 'silent', price: 10, ping: { kind: 'webhook', url: endpoint.url, timeout_ms: HANG_TIMEOUT_MS } },
          ],
          buckets: [{ id: 'unsold', default: true }],
        },
        // No env: TestService builds the config from its own variables only, none of them PING_*.
        now: () => NOW,
        buyerCa: endpoint.cert,
      });
      supplier = await svc.key('supplier', 'sup-1');
    });
    after(async function () {
      await svc?.stop();
      await endpoint?.stop();
    });

    it('answers a ping expiring 300 s after it was made, and stops waiting for a silent bidder at the 1000 ms deadline', async function () {
      // The connection is open before the ping: its handshake is not the ping's.
      await svc.request('GET', '/healthz');
      const reply = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1' }, { 'x-api-key': supplier }, '/functions/pings');
      expect(reply.status, reply.text).to.equal(201);
      expect(reply.body).to.include({ code: 'BID', bid: 20, expires_at: new Date(NOW.getTime() + DEFAULT_TTL_SECONDS * 1000).toISOString() });

      const events = await svc.service.store.readStream(`ping-${reply.body.ping_id as string}`);
      const { bids } = events.find((e) => e.type === 'PingBidsCollected')!.data as PingBidsCollected['data'];
      const silent = bids.find((b) => b.buyer === 'silent')!;
      // Ended by the round's deadline, not by its own 1.5 s: the deadline is shorter than that (a
      // 2000 ms default would leave 'timeout_ms' here). The round closes a tenth of the deadline
      // early and never before half of it, so the silent bidder was waited for 500 to 900 ms (a
      // shorter default, say 500 ms, closes by 450 ms). No upper bound on the wait: a busy machine
      // may run the round's timer late, and the detail already says which timer ended it.
      expect(silent).to.include({ result: 'timeout', detail: 'deadline' });
      expect(silent.latency_ms).to.be.at.least(DEFAULT_DEADLINE_MS / 2 - 10);
      expect(endpoint.received).to.have.length(1);
    });
  });
});

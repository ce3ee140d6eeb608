import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadRoutingConfig } from '../../src/routing/load-config.js';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { DeliveryHarness, HOOK_BUYER, stoppedAfterEach, until } from './harness.js';

// One buyer's outage must not hold up every other buyer's leads. A buyer whose endpoint hangs
// keeps each attempt for its whole time box; while it went on being sold leads, its backlog took
// every slot the delivery worker had, and the leads of healthy buyers waited behind it.

const FAST_BUYER = 'fast-buyer';

describe('delivery: each buyer has a share of the attempts in flight', function () {
  this.timeout(60_000);
  const stopAfter = stoppedAfterEach();

  it("a buyer whose endpoint hangs holds no more than its share; another buyer's leads are delivered meanwhile", async () => {
    const endpoint = stopAfter(await BuyerEndpoint.start((request) => (request.path === '/slow' ? 'hang' : 200)));
    const h = stopAfter(await DeliveryHarness.start(endpoint));
    // The hanging buyer (ZIPs 90…) answers nothing within its time box; the other (ZIPs 10…) at once.
    const routingFile = join(h.svc.dataDir, 'routing.json');
    writeFileSync(
      routingFile,
      JSON.stringify({
        currency: 'USD',
        buyers: [
          { id: HOOK_BUYER, price: 31.25, zip_prefixes: ['90'], delivery: { kind: 'webhook', url: endpoint.url.replace('/leads', '/slow'), timeout_ms: 30_000, max_attempts: 5 } },
          { id: FAST_BUYER, price: 20, zip_prefixes: ['10'], delivery: { kind: 'webhook', url: endpoint.url.replace('/leads', '/fast'), timeout_ms: 2000, max_attempts: 5 } },
        ],
      }),
    );
    expect((await h.svc.service.reload()).routing).to.include({ changed: true });
    const routing = loadRoutingConfig(routingFile);

    const slow: number[] = [];
    for (let i = 0; i < 12; i++) slow.push((await h.sell()).leadId);
    const fast: number[] = [];
    for (let i = 0; i < 3; i++) fast.push((await h.sell({ zip: '10001' })).leadId);
    // Every row in the read model first, the hanging buyer's the oldest due.
    await until(async () => (await h.row(fast.at(-1)!))?.status === 'pending', 10_000, () => 'the last sale in the deliveries read model');

    h.worker({ routing: () => routing, pollMs: 3_600_000, concurrency: 6, perBuyer: 4 });
    await until(() => fast.every((leadId) => endpoint.forLead(leadId).length === 1), 10_000, () => `the healthy buyer's ${fast.length} leads, ${endpoint.received.filter((r) => r.path === '/fast').length} so far`);
    // Sent while every attempt to the hanging buyer was still waiting for its answer: its share, no more.
    expect(endpoint.received.filter((r) => r.path === '/slow')).to.have.length(4);
    expect(fast.every((leadId) => endpoint.forLead(leadId)[0]!.path === '/fast')).to.equal(true);
  });
});

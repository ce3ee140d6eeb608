import { expect } from 'chai';
import { Writable } from 'node:stream';
import { DeliveryWorker } from '../../src/delivery/webhook-worker.js';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { DeliveryHarness } from '../delivery/harness.js';
import { createLogger } from '../../src/http/logger.js';
import { ReadModelUnavailableError } from '../../src/read-models/port.js';
import { LeaseKeeper } from '../../src/roles/lease-keeper.js';
import { overriding } from '../support/overriding.js';
import { TestService } from '../support/service.js';
import { until } from '../support/until.js';

// The background roles poll and renew over and over: the delivery worker reads its due rows five
// times a second, a lease keeper renews every second. A read-model store that is down failed each
// of them with a warning of its own; like a request's 503, it is now one line for the outage.

function capture() {
  const lines: Array<{ msg: string; failed_polls?: number; failed_renewals?: number; lease?: string; err?: { message: string } }> = [];
  const logger = createLogger({
    level: 'info',
    destination: new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString('utf8')));
        done();
      },
    }),
  });
  return { lines, logger };
}

const down = () => new ReadModelUnavailableError('the read-model store failed: disk I/O error');

describe('the background roles log a store outage once, not each failed poll or renewal', function () {
  this.timeout(30_000);

  it('the delivery worker: twenty failed polls of its due rows, one warning', async function () {
    const svc = await TestService.start({ deliveryWorker: false });
    const { lines, logger } = capture();
    let reads = 0;
    const readModels = overriding(svc.service.readModels, {
      find: () => {
        reads++;
        return Promise.reject(down());
      },
    });
    const worker = new DeliveryWorker({
      events: svc.service.store,
      personalData: svc.service.personalData,
      readModels,
      deliveries: () => svc.service.projections.collection('deliveries'),
      // One webhook buyer: with none, the worker has no rows to read.
      routing: () => ({ buyers: [{ id: 'hooked', delivery: { kind: 'webhook', url: 'https://127.0.0.1:1/leads' } }], buckets: [] }) as never,
      logger,
      pollMs: 5,
    });
    try {
      worker.start();
      await until('twenty failed polls', () => reads >= 20);
      const polls = lines.filter((line) => line.msg.startsWith('delivery poll failed'));
      expect(polls.map((line) => line.msg)).to.deep.equal(['delivery poll failed']);
      expect(polls[0]!.err!.message).to.equal('the read-model store failed: disk I/O error');
    } finally {
      await worker.stop();
      await svc.stop();
    }
  });

  it('the delivery worker: attempts that cannot run (the event store down), every due lead at every poll, one warning', async function () {
    const endpoint = await BuyerEndpoint.start(() => 200);
    const harness = await DeliveryHarness.start(endpoint);
    let reads = 0;
    try {
      for (let i = 0; i < 3; i++) await harness.sell();
      const events = overriding(harness.svc.service.store, {
        readStream: () => {
          reads++;
          return Promise.reject(new EventStoreUnavailableError('the event store failed: disk I/O error'));
        },
      });
      harness.worker({ events });
      await until('twenty attempts failed to run', () => reads >= 20);
      const runs = harness.logs.map((line) => JSON.parse(line) as { msg: string; lead_id?: number }).filter((line) => line.msg.startsWith('delivery attempt failed to run'));
      expect(runs.map((line) => line.msg)).to.deep.equal(['delivery attempt failed to run']);
      expect(runs[0]!.lead_id).to.be.a('number');
      expect(endpoint.received).to.have.length(0);
    } finally {
      await harness.stop();
      await endpoint.stop();
    }
  });

  it('a lease keeper: ten failed renewals, one warning naming the lease', async function () {
    const { lines, logger } = capture();
    let asked = 0;
    const leases = {
      acquireLease: () => {
        asked++;
        return Promise.reject(down());
      },
      releaseLease: async () => {},
    };
    const keeper = new LeaseKeeper({ leases, name: 'delivery', holder: 'me:1:a', work: { start: async () => {}, stop: async () => {} }, ttlMs: 200, heartbeatMs: 10, logger });
    try {
      await keeper.start();
      await until('ten failed renewals', () => asked >= 10);
      const renewals = lines.filter((line) => line.msg.includes('lease renewal failed'));
      expect(renewals.map((line) => [line.msg, line.lease])).to.deep.equal([['delivery lease renewal failed', 'delivery']]);
    } finally {
      await keeper.stop();
    }
  });
});

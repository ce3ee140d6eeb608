import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadServiceConfig } from '../../src/config.js';
import { createLogger } from '../../src/http/logger.js';
import { ServiceMetrics } from '../../src/ops/metrics.js';
import { BackgroundThread } from '../../src/roles/background-thread.js';
import { PROJECTION_LEASES } from '../../src/roles/projector-leases.js';
import { loadRoutingConfig } from '../../src/routing/load-config.js';
import { openReadModelStore } from '../../src/read-models/index.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { deliveryRouting, until } from '../delivery/harness.js';
import { ALWAYS_OPEN_ROUTING, TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { leaseOfProjection } from '../../src/roles/projector-leases.js';

// A process with every role runs the projector and the delivery worker on a background thread:
// the thread keeps their leases, builds the read models from what the API appends, POSTs sales
// to webhook buyers, and tells the main thread what /readyz, /metrics and the log show. A thread
// that dies is started again; one that is stopped gives its leases up.

describe('an all-roles process with its background roles on a thread', function () {
  this.timeout(60_000);
  const dir = tempDir('background-thread');
  let endpoint: BuyerEndpoint;
  let svc: TestService;
  let key: string;
  let stopped = false;

  before(async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    svc = await TestService.start({ dataDir: dir.path, routing: deliveryRouting(endpoint.url), buyerCa: endpoint.cert });
    key = await svc.key();
  });
  after(async function () {
    if (!stopped) await svc?.stop();
    await endpoint?.stop();
    dir.remove();
  });

  const sell = async () => {
    const posted = await svc.post(validLead({ zip: '90210' }), { 'x-api-key': key });
    expect(posted.status).to.equal(201);
    expect(posted.body).to.include({ code: 'SOLD', sold: true });
    return posted.body.lead_id as number;
  };

  it('keeps the projector and delivery leases on the thread, and /readyz and /metrics say this process holds them', async function () {
    expect(svc.service.backgroundThread?.running).to.equal(true);
    // The main thread only follows the builds; the thread runs them.
    expect(svc.service.projections.active).to.equal(false);
    const leases = svc.service.leases();
    expect(leases.map((lease) => [lease.lease, lease.held])).to.deep.equal([
      [leaseOfProjection('leads'), true],
      [leaseOfProjection('deliveries'), true],
      [leaseOfProjection('feedback'), true],
      [leaseOfProjection('reports'), true],
      ['delivery', true],
    ]);
    // Named after this process, with the thread's own nonce, in the leases and in the start-up line.
    const holder = svc.service.backgroundThread!.holder;
    expect(holder).to.include(`:${process.pid}:`);
    for (const lease of leases) expect(lease.holder).to.equal(holder);
    const listening = svc.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry.msg === 'leadpost listening');
    expect(listening).to.include({ lease_holder: holder });
    const ready = await svc.request('GET', '/readyz');
    const checks = ready.body.checks as Record<string, { ok: boolean; detail: string }>;
    expect(checks.roles!.detail).to.equal('api, projector (holds leads, deliveries, feedback, reports), delivery (holds the lease)');
    expect(checks.projections!.detail).to.match(/^running, within/);
    const metrics = (await svc.request('GET', '/metrics')).text;
    expect(metrics).to.match(/^leadpost_lease_held\{lease="projector-leads-v\d+"\} 1$/m);
    expect(metrics).to.match(/^leadpost_lease_held\{lease="projector-reports-v\d+"\} 1$/m);
    expect(metrics).to.match(/^leadpost_lease_held\{lease="delivery"\} 1$/m);
  });

  it('projects what the API appends and POSTs a sale to its webhook buyer, counted in /metrics', async function () {
    const leadId = await sell();
    await until(() => endpoint.forLead(leadId).length === 1, 15_000, () => 'the buyer received the lead');
    // The main thread waits on the checkpoints the thread commits.
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const view = await svc.service.readModels.get(svc.service.projections.collection('leads'), String(leadId));
    expect(view).to.include({ lead_id: leadId });
    const delivered = /^leadpost_delivery_attempts_total\{outcome="delivered"\} 1$/m;
    await until(async () => delivered.test((await svc.request('GET', '/metrics')).text), 15_000, () => 'the attempt counted');
  });

  it('starts a thread that died again: its log says so, the leases come back and sales are delivered', async function () {
    const thread = svc.service.backgroundThread!;
    const deadHolder = thread.holder;
    await thread.crashForTest();
    expect(svc.service.leases().every((lease) => !lease.held)).to.equal(true);
    await until(() => svc.logs.some((line) => line.includes('the background thread stopped unexpectedly')), 15_000, () => 'the death logged');
    // The dead thread never gave its leases up: the new one takes them when they run out (3 s).
    await until(() => svc.service.leases().every((lease) => lease.held), 15_000, () => 'the leases held again');
    expect(thread.restarts).to.equal(1);
    // A new name: the restarted thread took the leases over once the dead one's ran out, never renewed them.
    expect(thread.holder).to.not.equal(deadHolder);
    for (const lease of svc.service.leases()) expect(lease.holder).to.equal(thread.holder);
    const leadId = await sell();
    await until(() => endpoint.forLead(leadId).length === 1, 15_000, () => 'the buyer received the lead');
    // The thread's own log lines reach the process's log, marked as the thread's.
    const taken = svc.logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.msg === 'lease taken: this instance runs the work');
    expect(taken.length).to.be.greaterThan(0);
    expect(taken[0]).to.include({ thread: 'background', service: 'leadpost' });
  });

  it('gives its leases up when the service stops, so another process takes them at once', async function () {
    stopped = true;
    await svc.stop();
    const readModels = await openReadModelStore({ dataDir: dir.path, mongoUrl: undefined });
    try {
      for (const name of [...PROJECTION_LEASES, 'delivery']) {
        const lease = await readModels.acquireLease(name, 'next-process', 3000);
        expect(lease.holder, name).to.equal('next-process');
      }
    } finally {
      await readModels.close();
    }
  });
});

describe('an all-roles process stopped while its background thread starts again', function () {
  this.timeout(30_000);

  it('stops the thread still starting too, rather than leaving it running after the service closed', async function () {
    const svc = await TestService.start();
    const thread = svc.service.backgroundThread!;
    await thread.crashForTest();
    // The restart comes 1 s after the death: stop as it begins, before the thread has said it started.
    await until(() => thread.restarts === 1 && thread.alive, 15_000, () => 'the restart begun');
    expect(thread.running).to.equal(false);
    await thread.stop();
    expect(thread.alive).to.equal(false);
    expect(thread.running).to.equal(false);
    await svc.stop();
  });
});

describe('an all-roles process with LEADPOST_BACKGROUND_THREAD=0', function () {
  this.timeout(30_000);
  let svc: TestService;

  before(async function () {
    svc = await TestService.start({ env: { LEADPOST_BACKGROUND_THREAD: '0' } });
  });
  after(async function () {
    await svc?.stop();
  });

  it('runs the projections and keeps the leases on its main thread', async function () {
    expect(svc.service.backgroundThread).to.equal(null);
    expect(svc.service.projections.active).to.equal(true);
    expect(svc.service.leases().map((lease) => [lease.lease, lease.held])).to.deep.equal([
      [leaseOfProjection('leads'), true],
      [leaseOfProjection('deliveries'), true],
      [leaseOfProjection('feedback'), true],
      [leaseOfProjection('reports'), true],
      ['delivery', true],
    ]);
  });
});

describe('the background thread on its own, as the service drives it', function () {
  this.timeout(30_000);
  const dir = tempDir('background-thread-alone');
  const logs: string[] = [];
  let thread: BackgroundThread;

  before(async function () {
    const routingFile = join(dir.path, 'routing.json');
    writeFileSync(routingFile, JSON.stringify(ALWAYS_OPEN_ROUTING));
    const config = loadServiceConfig({ LEADPOST_DATA_DIR: dir.path, LEADPOST_ROUTING_FILE: routingFile, LEADPOST_ROLES: 'projector,delivery' });
    const logger = createLogger({ level: 'info', destination: new Writable({ write: (chunk: Buffer, _encoding, done) => (logs.push(chunk.toString('utf8')), done()) }) });
    const metrics = new ServiceMetrics({ runtime: false });
    thread = await BackgroundThread.start({
      data: { config, routing: loadRoutingConfig(routingFile) },
      logger,
      countAppends: metrics.countAppend,
      countDeliveries: metrics.countDeliveryOutcome,
      countSentAgain: metrics.countSentAgain,
    });
  });
  after(async function () {
    await thread?.stop();
    dir.remove();
  });

  const held = () => Object.fromEntries(thread.leases().map((lease) => [lease.lease, lease.held]));
  /** Every projection's lease, held. */
  const projecting = Object.fromEntries(PROJECTION_LEASES.map((name) => [name, true]));

  it('projects once started, and delivers only once told to (after the listeners are up)', async function () {
    expect(held()).to.deep.equal({ ...projecting, delivery: false });
    await thread.deliver();
    expect(held()).to.deep.equal({ ...projecting, delivery: true });
  });

  it('drains delivery while requests finish, the projector running on until the stop', async function () {
    await thread.drain();
    expect(held()).to.deep.equal({ ...projecting, delivery: false });
  });

  it('stops once however often it is asked, closing each store once, and is gone when the stop resolves', async function () {
    await Promise.all([thread.stop(), thread.stop()]);
    expect(thread.alive).to.equal(false);
    expect(logs.filter((line) => line.includes('closing a store of the background thread failed'))).to.deep.equal([]);
    // The thread's own lines came through this logger, marked as the thread's.
    const released = logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((entry) => entry.msg === 'lease given up: this instance stops the work');
    expect(released.map((entry) => [entry.lease, entry.thread])).to.have.deep.members([['delivery', 'background'], ...PROJECTION_LEASES.map((name) => [name, 'background'])]);
  });
});

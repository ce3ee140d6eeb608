import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { DeliveryWorker } from '../src/delivery/webhook-worker.js';
import { loadRoutingConfig } from '../src/routing/load-config.js';
import { TestService, validLead } from '../test/support/service.js';
import { BuyerEndpoint } from '../test/delivery/buyer-endpoint.js';
import { deliveryRouting, until } from '../test/delivery/harness.js';
import { deliveriesProjection } from '../src/projections/projections.js';
import { versionBuild } from '../src/projections/index.js';
import { collectionName } from '../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../src/read-models/embedded.js';
import { tempDir } from '../test/support/tmp.js';
import { type LoadCounter, cpuSeconds, posts, sellableLead, startBenchService } from './post-lead.js';
import { percentile, round } from './stats.js';

// Delivery latency as a buyer feels it: from the sale (the supplier's 201 arriving) to the lead
// arriving at a healthy buyer endpoint. In one process: service, supplier, worker (production
// settings: 200 ms poll, 16 in flight) and buyer, all over real HTTPS on loopback.

export interface DrainBenchResult {
  readonly leads: number;
  readonly deliveriesPerSecond: number;
  /** CPU of the delivery process (every thread) per delivery, from its first delivery to its last. */
  readonly deliveryProcessCpuUsPerDelivery: number;
}

/**
 * Throughput of the delivery worker draining a backlog, as deployed by roles: `serve --roles api`
 * takes `leads` sales (50 connections), `--roles projector` records them in the deliveries read
 * model, and only then `--roles delivery` starts, in a process where no projection tells the
 * worker of anything. Timed from the buyer's first request to its last.
 */
export async function benchDeliveryDrain(leads: number, postLead: PostLeadModule = { startBenchService, posts, sellableLead }): Promise<DrainBenchResult> {
  let first: { at: number; cpu: number } | undefined;
  let deliveryPid = 0;
  const endpoint = await BuyerEndpoint.start(() => {
    first ??= { at: performance.now(), cpu: deliveryPid === 0 ? 0 : cpuSeconds(deliveryPid).all };
    return 200;
  });
  const caDir = tempDir('bench-drain-ca');
  const caFile = join(caDir.path, 'buyer-ca.pem');
  writeFileSync(caFile, endpoint.cert);
  const service = await postLead.startBenchService({ roles: 'api', routing: deliveryRouting(endpoint.url, { timeout_ms: 5000, max_attempts: 8 }), env: { NODE_EXTRA_CA_CERTS: caFile } });
  const readModels = EmbeddedReadModelStore.open(service.dataDir);
  try {
    await service.sibling('projector');
    const sold: number[] = [];
    const counter: LoadCounter = { n: 0, measuring: true, onAccepted: (body: string) => sold.push(JSON.parse(body).lead_id as number) };
    await postLead.posts(service.url, { 'x-api-key': service.apiKey }, postLead.sellableLead, counter, { amount: leads });
    if (sold.length !== leads) throw new Error(`${leads - sold.length} posts failed: ${String(counter.sample)}`);
    const deliveries = collectionName('deliveries', versionBuild(deliveriesProjection));
    const last = String(Math.max(...sold));
    await until(async () => (await readModels.get(deliveries, last)) !== null, 120_000, () => 'the backlog in the deliveries read model');
    deliveryPid = (await service.sibling('delivery')).pid;
    await until(() => endpoint.received.length >= leads, 600_000, () => `${leads} deliveries, ${endpoint.received.length} so far`);
    const seconds = (performance.now() - first!.at) / 1000;
    const cpu = cpuSeconds(deliveryPid).all - first!.cpu;
    return { leads, deliveriesPerSecond: Math.round((leads - 1) / seconds), deliveryProcessCpuUsPerDelivery: Math.round((cpu * 1e6) / (leads - 1)) };
  } finally {
    await readModels.close();
    await service.stop();
    await endpoint.stop();
    caDir.remove();
  }
}

/** What the drain needs of bench/post-lead.js, so that another build's can be measured beside this one. */
type PostLeadModule = Pick<typeof import('./post-lead.js'), 'startBenchService' | 'posts' | 'sellableLead'>;

export interface DeliveryBenchResult {
  readonly leads: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

const WARM_UP = 20;

/** `suppliers`: posts in flight at once; 20 keeps the in-process service busy. */
export async function benchDelivery(leads: number, suppliers = 20): Promise<DeliveryBenchResult> {
  const endpoint = await BuyerEndpoint.start(() => 200);
  const svc = await TestService.start({ deliveryWorker: false, routing: deliveryRouting(endpoint.url, { timeout_ms: 5000, max_attempts: 8 }) });
  const routing = loadRoutingConfig(join(svc.dataDir, 'routing.json'));
  const worker = new DeliveryWorker({
    events: svc.service.store,
    personalData: svc.service.personalData,
    readModels: svc.service.readModels,
    deliveries: () => svc.service.projections.collection('deliveries'),
    routing: () => routing,
    ca: endpoint.cert,
  });
  worker.start();
  // Woken by the deliveries projection, as leadpost serve wires it.
  svc.service.projections.onCommit((name) => name === 'deliveries' && worker.wake());
  try {
    const key = await svc.key();
    // The first deliveries open TLS connections to the buyer on a cold process: not what a
    // running service's latency looks like, so they are sent before measuring.
    await sell(svc, key, WARM_UP, Math.min(suppliers, WARM_UP));
    await until(() => endpoint.received.length >= WARM_UP, 60_000, () => `${WARM_UP} warm-up deliveries`);
    const soldAt = await sell(svc, key, leads, suppliers);
    await until(() => endpoint.received.length >= WARM_UP + leads, 60_000, () => `${WARM_UP + leads} deliveries`);
    const latencies: number[] = [];
    for (const request of endpoint.received) {
      const sold = soldAt.get(request.body.lead_id as number);
      if (sold !== undefined && soldAt.delete(request.body.lead_id as number)) latencies.push(request.at - sold);
    }
    if (soldAt.size > 0) throw new Error(`${soldAt.size} sold leads never reached the buyer`);
    return { leads, p50Ms: round(percentile(latencies, 50)), p99Ms: round(percentile(latencies, 99)) };
  } finally {
    await worker.stop();
    await svc.stop();
    await endpoint.stop();
  }
}

/** Posts `leads` sellable leads, `suppliers` at a time; when each sale's answer arrived, by lead id. */
async function sell(svc: TestService, key: string, leads: number, suppliers: number): Promise<Map<number, number>> {
  const soldAt = new Map<number, number>();
  let next = 0;
  await Promise.all(
    Array.from({ length: suppliers }, async () => {
      while (next++ < leads) {
        const reply = await svc.post(validLead(), { 'x-api-key': key });
        if (reply.body.sold !== true) throw new Error(`lead not sold: ${reply.text}`);
        soldAt.set(reply.body.lead_id as number, performance.now());
      }
    }),
  );
  return soldAt;
}

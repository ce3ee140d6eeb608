import { join } from 'node:path';
import { DeliveryWorker } from '../src/delivery/webhook-worker.js';
import { loadRoutingConfig } from '../src/routing/load-config.js';
import { TestService, validLead } from '../test/support/service.js';
import { BuyerEndpoint } from '../test/delivery/buyer-endpoint.js';
import { deliveryRouting, until } from '../test/delivery/harness.js';
import { percentile, round } from './stats.js';

// Delivery latency as a buyer feels it: from the sale (the supplier's 201 arriving) to the lead
// arriving at a healthy buyer endpoint. In one process: service, supplier, worker (production
// settings: 200 ms poll, 16 in flight) and buyer, all over real HTTPS on loopback.

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

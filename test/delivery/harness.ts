import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { RecordedEvent } from '../../src/event-store/port.js';
import { leadStream } from '../../src/events/lead-events.js';
import { DeliveryWorker, type DeliveryWorkerDeps } from '../../src/delivery/webhook-worker.js';
import { createLogger } from '../../src/http/logger.js';
import type { ReadDoc } from '../../src/read-models/port.js';
import { type LoadedRoutingConfig, loadRoutingConfig } from '../../src/routing/load-config.js';
import { TestService, type TestServiceOptions, validLead } from '../support/service.js';
import { sleep, until as pollUntil } from '../support/until.js';
import type { BuyerEndpoint } from './buyer-endpoint.js';

// The real service with a webhook buyer (ZIPs 90…) pointing at a local buyer endpoint and a pull
// buyer (ZIPs 10…), plus delivery workers wired as `leadpost serve` wires its own.

export const HOOK_BUYER = 'hook-buyer';
const PULL_BUYER = 'pull-buyer';
export const SECRET_ENV = 'X_SECRET';

export interface WebhookOptions {
  /** Instead of the endpoint's own URL. */
  readonly url?: string;
  readonly timeout_ms?: number;
  readonly max_attempts?: number;
  readonly secret_env?: string;
}

export function deliveryRouting(url: string, webhook: WebhookOptions = {}): unknown {
  return {
    currency: 'USD',
    buyers: [
      { id: HOOK_BUYER, price: 31.25, zip_prefixes: ['90'], delivery: { kind: 'webhook', url, timeout_ms: 2000, max_attempts: 5, ...webhook } },
      { id: PULL_BUYER, price: 20, zip_prefixes: ['10'], delivery: { kind: 'pull' } },
    ],
  };
}

export class DeliveryHarness {
  /** Every line the workers logged. */
  readonly logs: string[] = [];
  private readonly workers: DeliveryWorker[] = [];

  private constructor(
    readonly svc: TestService,
    readonly endpoint: BuyerEndpoint,
    readonly routing: LoadedRoutingConfig,
    private readonly apiKey: string,
  ) {}

  static async start(endpoint: BuyerEndpoint, webhook: WebhookOptions = {}, dataDir?: string, service: Pick<TestServiceOptions, 'wrapStore'> = {}): Promise<DeliveryHarness> {
    const svc = await TestService.start({ ...service, deliveryWorker: false, routing: deliveryRouting(endpoint.url, webhook), ...(dataDir ? { dataDir } : {}) });
    const routing = loadRoutingConfig(join(svc.dataDir, 'routing.json'));
    return new DeliveryHarness(svc, endpoint, routing, await svc.key());
  }

  /** A started worker on this service's stores; test speed: short polls and retries. */
  worker(overrides: Partial<DeliveryWorkerDeps> = {}): DeliveryWorker {
    const logger = createLogger({
      level: 'debug',
      destination: new Writable({
        write: (chunk: Buffer, _encoding, done) => {
          this.logs.push(chunk.toString('utf8'));
          done();
        },
      }),
    });
    const worker = new DeliveryWorker({
      events: this.svc.service.store,
      personalData: this.svc.service.personalData,
      readModels: this.svc.service.readModels,
      deliveries: () => this.svc.service.projections.collection('deliveries'),
      routing: () => this.routing,
      env: process.env,
      logger,
      pollMs: 25,
      ca: this.endpoint.cert,
      backoff: () => 100,
      ...overrides,
    });
    this.workers.push(worker);
    worker.start();
    return worker;
  }

  /** Posts a lead and returns its id; it must be sold. */
  async sell(overrides: Record<string, unknown> = {}): Promise<{ leadId: number; lead: Record<string, unknown>; soldAt: number }> {
    const lead = validLead(overrides);
    const reply = await this.post(lead);
    const soldAt = performance.now();
    if (reply.body.sold !== true || typeof reply.body.lead_id !== 'number') throw new Error(`lead not sold: ${reply.text}`);
    return { leadId: reply.body.lead_id, lead, soldAt };
  }

  post(lead: Record<string, unknown>): ReturnType<TestService['post']> {
    return this.svc.post(lead, { 'x-api-key': this.apiKey });
  }

  events(leadId: number): Promise<RecordedEvent[]> {
    return this.svc.service.store.readStream(leadStream(leadId));
  }

  async ofType<T = Record<string, unknown>>(leadId: number, type: string): Promise<T[]> {
    return (await this.events(leadId)).filter((e) => e.type === type).map((e) => e.data as T);
  }

  row(leadId: number): Promise<ReadDoc | null> {
    return this.svc.service.readModels.get(this.svc.service.projections.collection('deliveries'), String(leadId));
  }

  /** The deliveries row once it has `status`. */
  async rowWith(leadId: number, status: string, timeoutMs = 10_000): Promise<ReadDoc> {
    let last: ReadDoc | null = null;
    await until(async () => (last = await this.row(leadId))?.status === status, timeoutMs, () => `row of lead ${leadId}: ${JSON.stringify(last)}`);
    return last!;
  }

  /**
   * Sells a lead after the ones a test watches and waits until it reaches `status` and no worker
   * has an attempt in flight. A worker that would send one of the watched leads (again) has then
   * polled past them and finished sending: the positive control for a check that something is
   * never sent, instead of a fixed sleep.
   */
  async laterLeadSettled(status = 'delivered', overrides: Record<string, unknown> = {}): Promise<number> {
    const { leadId } = await this.sell(overrides);
    await this.rowWith(leadId, status);
    await until(() => this.workers.every((w) => w.signalsInFlight().length === 0), 10_000, () => 'no attempt in flight after a later lead settled');
    return leadId;
  }

  async stopWorkers(): Promise<void> {
    await Promise.all(this.workers.splice(0).map((w) => w.stop()));
  }

  async stop(): Promise<void> {
    await this.stopWorkers();
    await this.svc.stop();
  }
}

/**
 * For a suite whose tests each start their own buyer endpoint and harness: registers an afterEach
 * that stops what a test handed to the returned function, the last started first (the harness
 * before the endpoint its workers post to).
 */
export function stoppedAfterEach(): <T extends { stop(): Promise<void> }>(started: T) => T {
  const started: Array<{ stop(): Promise<void> }> = [];
  afterEach(async () => {
    for (let next = started.pop(); next; next = started.pop()) await next.stop();
  });
  return (thing) => {
    started.push(thing);
    return thing;
  };
}

/** The shared poller (test/support/until.ts), in the argument order the delivery tests use. */
export function until(check: () => boolean | Promise<boolean>, timeoutMs = 10_000, what: () => string = () => 'condition'): Promise<unknown> {
  return pollUntil(what, check, timeoutMs);
}

export { sleep };

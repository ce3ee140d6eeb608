import { Writable } from 'node:stream';
import { join } from 'node:path';
import { LeadIdAllocator } from '../../src/commands/lead-ids.js';
import { RetentionSweeper } from '../../src/commands/retention.js';
import { DeliveryWorker } from '../../src/delivery/webhook-worker.js';
import { openEventStore } from '../../src/event-store/index.js';
import type { RecordedEvent } from '../../src/event-store/port.js';
import { leadStream } from '../../src/events/lead-events.js';
import { createLogger } from '../../src/http/logger.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { newKeyMaterial, rotateKey } from '../../src/keys/api-keys.js';
import { loadRoutingConfig } from '../../src/routing/load-config.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { until } from '../delivery/harness.js';
import { FaultyEventStore } from '../reliability/support/faults.js';
import { type Reply, TestService, validLead } from '../support/service.js';

// Every flow of the service that appends events, run once against the real service (its HTTPS
// server, its embedded stores, a local HTTPS buyer): posts sold, routed to a bucket, rejected and
// duplicated; a ping and the post against it, once failing to record its lead; deliveries by
// webhook (taken, refused for good and sent again) and by pull (acknowledged, returned); an
// erasure that suppresses, notices that fail once, one refused for good and sent again, a pending
// delivery cancelled; keys issued, rotated, revoked; and the retention sweep. What they wrote is
// what the catalogue is held to.

const SECRET_ENV = 'EVENTS_CATALOGUE_SECRET';
const HOOK_BUYER = 'hook-buyer';
const PULL_BUYER = 'pull-buyer';
const BIDDER = 'bidder';

function flowRouting(url: string): unknown {
  return {
    currency: 'USD',
    buyers: [
      { id: HOOK_BUYER, price: 31.25, zip_prefixes: ['90'], delivery: { kind: 'webhook', url, timeout_ms: 2000, max_attempts: 2, secret_env: SECRET_ENV } },
      // Room enough under its cap for a block of slots, given back as the service stops.
      { id: PULL_BUYER, price: 20, zip_prefixes: ['10'], delivery: { kind: 'pull' }, caps: [{ period: 'month', max: 100_000 }] },
      { id: BIDDER, price: 5, zip_prefixes: ['33'], ping: { kind: 'static' }, caps: [{ period: 'day', max: 100 }] },
    ],
    buckets: [{ id: 'unsold', default: true }],
  };
}

export interface Flows {
  /** A lead delivered by webhook and then erased. */
  readonly erasedLead: number;
  /** A lead posted after the retention sweep: its personal data is still there. */
  readonly keptLead: number;
  /** Every consumer's personal value the flows posted: none may be in an event in clear. */
  readonly personalValues: string[];
  stop(): Promise<void>;
}

/**
 * Runs every flow on a service whose data dir is `dataDir` (kept: the caller reads it after). The
 * data dir is first made one an older release posted to (it reserved lead ids), so the service
 * records that older plain-hash names may exist, and `leadpost seal-clear-leads` renames them.
 */
export async function runEveryFlow(dataDir: string): Promise<Flows> {
  const older = await openEventStore({ dataDir });
  await new LeadIdAllocator(older, 1, 'older-release').nextId();
  await older.close();
  process.env[SECRET_ENV] = 'catalogue-secret-3c9d';
  /**
   * Leads posted with s1 `refused` the buyer refuses with a final 401 until they are in here; of its
   * notices, the first fails, and those of the leads in `refusesNotice` are refused with a final 401
   * until they are in `takes` too.
   */
  const takes = new Set<number>();
  const refusesNotice = new Set<number>();
  let failNotices = 1;
  const endpoint = await BuyerEndpoint.start(
    (request) => {
      const leadId = request.body.lead_id as number;
      if (request.body.type === 'lead.erased' && refusesNotice.has(leadId) && !takes.has(leadId)) return 401;
      if (request.body.type === 'lead.erased') return failNotices-- > 0 ? 503 : 200;
      return request.body.s1 === 'refused' && !takes.has(request.body.lead_id as number) ? 401 : 200;
    },
    { keepIdleConnections: true },
  );
  let faulty!: FaultyEventStore;
  const svc = await TestService.start({ dataDir, deliveryWorker: false, routing: flowRouting(endpoint.url), wrapStore: (store) => (faulty = new FaultyEventStore(store)) });
  const stop = async (): Promise<void> => {
    await svc.stop();
    await endpoint.stop();
    delete process.env[SECRET_ENV];
  };
  try {
    return { ...(await everyFlow(svc, endpoint, faulty, takes, refusesNotice)), stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

async function everyFlow(
  svc: TestService,
  endpoint: BuyerEndpoint,
  faulty: FaultyEventStore,
  takes: Set<number>,
  refusesNotice: Set<number>,
): Promise<Omit<Flows, 'stop'>> {
  const { service } = svc;
  const routing = loadRoutingConfig(join(svc.dataDir, 'routing.json'));
  const worker = (): DeliveryWorker => {
    const started = new DeliveryWorker({
      events: service.store,
      personalData: service.personalData,
      readModels: service.readModels,
      deliveries: () => service.projections.collection('deliveries'),
      routing: () => routing,
      env: process.env,
      logger: createLogger({ level: 'warn', destination: new Writable({ write: (_chunk, _encoding, done) => done() }) }),
      pollMs: 25,
      ca: endpoint.cert,
      backoff: () => 100,
    });
    started.start();
    return started;
  };
  const events = (leadId: number): Promise<RecordedEvent[]> => service.store.readStream(leadStream(leadId));
  const has = async (leadId: number, type: string) => (await events(leadId)).some((event) => event.type === type);

  // Keys: issued, one rotated, one revoked.
  const supplier = await svc.key('supplier', 'sup-1');
  const admin = await svc.key('admin', 'ops');
  const puller = await svc.key('buyer', PULL_BUYER);
  const spare = await svc.key('analyst', 'ann');
  await svc.revoke(await svc.key('supplier', 'sup-gone'));
  const { id: newId, secret: newSecret } = newKeyMaterial();
  await changeKeys(service.store, (state) => rotateKey(state, { id: spare.split('_')[1]!, now: Date.now(), graceSeconds: 60, newId, newSecret }));

  const as = (key: string) => ({ 'x-api-key': key });
  const expectStatus = (reply: Reply, status: number): Reply => {
    if (reply.status !== status) throw new Error(`expected ${status}: ${reply.status} ${reply.text}`);
    return reply;
  };
  const personalValues: string[] = [];
  const posted = (lead: Record<string, unknown>): Record<string, unknown> => {
    for (const field of ['first_name', 'last_name', 'email', 'mobile', 'certificate_url']) personalValues.push(String(lead[field]));
    return lead;
  };
  const sell = async (overrides: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const lead = posted(validLead(overrides));
    const reply = expectStatus(await svc.post(lead, { ...as(supplier), ...headers }), 201);
    return { leadId: reply.body.lead_id as number, lead };
  };

  // Posts: sold to the webhook buyer, to the pull buyer, to a bucket; rejected; a duplicate whose
  // free contact is claimed and given back; one with an Idempotency-Key.
  const delivered = await sell({ zip: '90210' });
  const noticeRefused = await sell({ zip: '90212' });
  const refused = await sell({ zip: '90210', s1: 'refused' });
  const pulled = await sell({ zip: '10001', accident_state: 'NY' });
  const pending = await sell({ zip: '10002', accident_state: 'NY' });
  await sell({ zip: '60601', accident_state: 'IL' });
  await sell({ zip: '90211' }, { 'idempotency-key': 'catalogue-once' });
  expectStatus(await svc.post(posted({ ...validLead(), email: 'not-an-email' }), as(supplier)), 422);
  expectStatus(await svc.post(posted(validLead({ email: pulled.lead.email })), as(supplier)), 409);

  // A ping and the post against it; the first try's lead append fails, so the ping, the cap slot
  // and the Idempotency-Key are given back, and the retry sells at the bid.
  const pinged = await svc.post({ zip: '33101', accident_state: 'FL', sid: 'src-1', s1: 'pinged' }, as(supplier), '/functions/pings');
  if (pinged.body.code !== 'BID') throw new Error(`the ping had no bid: ${pinged.text}`);
  const pingLead = posted(validLead({ zip: '33101', accident_state: 'FL', s1: 'pinged', ping_id: pinged.body.ping_id }));
  let failures = 1;
  Object.assign(faulty.fault, { failAppend: (stream: string) => /^lead-\d+$/.test(stream) && failures-- > 0 });
  expectStatus(await svc.post(pingLead, { ...as(supplier), 'idempotency-key': 'catalogue-ping' }), 503);
  faulty.heal();
  expectStatus(await svc.post(pingLead, { ...as(supplier), 'idempotency-key': 'catalogue-ping' }), 201);

  // Deliveries: one taken, one refused for good and sent again once the buyer takes it.
  const deliveries = worker();
  await until(() => has(delivered.leadId, 'LeadDelivered'), 20_000, () => 'the webhook delivery');
  await until(() => has(noticeRefused.leadId, 'LeadDelivered'), 20_000, () => 'the webhook delivery of the lead whose notice is refused');
  await until(() => has(refused.leadId, 'LeadDeliveryFailed'), 20_000, () => 'the refused delivery');
  takes.add(refused.leadId);
  expectStatus(await svc.request('POST', `/functions/deliveries/${refused.leadId}/redeliver`, as(admin)), 202);
  await until(() => has(refused.leadId, 'LeadDelivered'), 20_000, () => 'the redelivery');

  // Pull: acknowledged, feedback, returned.
  await service.projections.waitFor(await service.store.headPosition());
  expectStatus(await svc.request('POST', `/functions/deliveries/${pulled.leadId}/ack`, as(puller)), 200);
  expectStatus(await svc.post({ type: 'contacted' }, as(puller), `/functions/leads/${pulled.leadId}/feedback`), 201);
  expectStatus(await svc.post({ type: 'return', reason: 'bad_phone' }, as(puller), `/functions/leads/${pulled.leadId}/feedback`), 201);

  // Erasures: of a delivered lead, suppressing its contacts (its notice fails once, then is
  // taken); of a lead whose pull delivery is pending (cancelled).
  expectStatus(await svc.post({ email: delivered.lead.email, suppress: true }, as(admin), '/functions/erasures'), 201);
  expectStatus(await svc.post({ mobile: pending.lead.mobile }, as(admin), '/functions/erasures'), 201);
  await until(() => has(delivered.leadId, 'ErasureNoticeSent'), 20_000, () => 'the erasure notice');
  await until(() => has(pending.leadId, 'LeadDeliveryCancelled'), 20_000, () => 'the cancelled delivery');
  // A notice the buyer refuses for good (401), sent again by an admin once the buyer takes it.
  refusesNotice.add(noticeRefused.leadId);
  expectStatus(await svc.post({ email: noticeRefused.lead.email }, as(admin), '/functions/erasures'), 201);
  await until(() => has(noticeRefused.leadId, 'ErasureNoticeFailed'), 20_000, () => 'the notice refused for good');
  takes.add(noticeRefused.leadId);
  expectStatus(await svc.request('POST', `/functions/deliveries/${noticeRefused.leadId}/redeliver`, as(admin)), 202);
  await until(() => has(noticeRefused.leadId, 'ErasureNoticeSent'), 20_000, () => 'the notice sent again');
  const suppressed = await svc.post(posted(validLead({ email: delivered.lead.email })), as(supplier));
  if (suppressed.body.code !== 'SUPPRESSED') throw new Error(`a suppressed contact was taken: ${suppressed.text}`);
  await deliveries.stop();

  // Retention, 31 days on: every lead left expires.
  await service.projections.waitFor(await service.store.headPosition());
  const later = () => new Date(Date.now() + 31 * 86_400_000);
  await new RetentionSweeper({ store: service.store, keys: service.personalData, readModels: service.readModels, leads: () => service.projections.collection('leads'), days: 30, now: later }).sweep();

  const kept = await sell({ zip: '60602', accident_state: 'IL' });
  return { erasedLead: delivered.leadId, keptLead: kept.leadId, personalValues };
}

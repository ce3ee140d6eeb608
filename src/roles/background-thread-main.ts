import { parentPort, workerData } from 'node:worker_threads';
import type { BuyerRequestKind } from '../delivery/buyer-agent.js';
import { openEventStore } from '../event-store/index.js';
import { createLogger } from '../http/logger.js';
import { type AppendResultLabel, countingEventStore } from '../ops/counting-event-store.js';
import { deliveryOutcome } from '../ops/metrics.js';
import { openPersonalDataKeys } from '../personal-data/index.js';
import { Projections } from '../projections/index.js';
import { openReadModelStore } from '../read-models/index.js';
import { BackgroundRoles } from './background-roles.js';
import type { BackgroundThreadData, FromBackground, ToBackground } from './background-thread.js';

// The background thread of an API process (background-thread.ts): it opens the stores as a
// `projector,delivery` process would, keeps the leases of the roles the process was given besides
// `api`, and tells the main thread what it logs, holds and counts.

const port = parentPort!;
const { config, buyerCa, holder, logLevel, deliverAtOnce } = workerData as BackgroundThreadData;
let { routing } = workerData as BackgroundThreadData;
const post = (message: FromBackground) => port.postMessage(message);

// Log lines go to the main thread in batches, each written there by the process's own logger.
let lines: string[] = [];
const flushLogs = () => {
  if (lines.length === 0) return;
  post({ kind: 'logs', lines });
  lines = [];
};
const logger = createLogger({
  level: logLevel,
  destination: {
    write(line: string) {
      if (lines.length === 0) setImmediate(flushLogs);
      lines.push(line);
    },
  },
});

// What /metrics counts, summed here and sent with the leases a few times a second.
const appends = new Map<AppendResultLabel, [number, number]>();
const attempts = new Map<string, number>();
const sentAgain = new Map<BuyerRequestKind, number>();
const countAppend = (result: AppendResultLabel, events: number) => {
  const [count, total] = appends.get(result) ?? [0, 0];
  appends.set(result, [count + 1, total + events]);
};

let roles: BackgroundRoles | undefined;
const report = () => {
  post({
    kind: 'report',
    leases: roles?.leases() ?? [],
    appends: [...appends].map(([result, [count, events]]) => [result, count, events]),
    attempts: [...attempts],
    sentAgain: [...sentAgain],
  });
  appends.clear();
  attempts.clear();
  sentAgain.clear();
};

// What the main thread asks arrives from the start, while the stores open: a stop then waits for
// the start to finish (or the main thread cuts the thread off).
type Asked = Exclude<ToBackground, { kind: 'routing' }>;
let wanted: Asked['kind'] | null = null;
let act: (message: Asked) => void = (message) => {
  if (wanted !== 'stop') wanted = message.kind;
};
// A reloaded routing file applies at once, even while the stores open: the workers read it per use.
port.on('message', (message: ToBackground) => (message.kind === 'routing' ? (routing = message.routing) : act(message)));

const closers: Array<() => Promise<void>> = [];
const closeAll = async () => {
  for (const close of [...closers].reverse()) await close().catch((error: unknown) => logger.error({ err: error }, 'closing a store of the background thread failed'));
};

/** Delivery and retention starting and stopping, in the order asked; each happens once. */
let delivery: Promise<void> = Promise.resolve();
let delivered = deliverAtOnce;
let draining: Promise<void> | null = null;
try {
  const personalData = await openPersonalDataKeys(config);
  closers.push(() => personalData.close());
  const store = countingEventStore(await openEventStore(config, { logger, personalData }), countAppend);
  closers.push(() => store.close());
  // Commits on this thread, not on a commit thread of their own as a projector-only process
  // makes: that third thread is a V8 heap more (about 8 MB of the process's RSS) for a faster
  // catch-up after a takeover, and this thread answers no requests that a commit would hold up.
  const readModels = await openReadModelStore(config);
  closers.push(() => readModels.close());
  const projections = new Projections(store, readModels, logger);
  await projections.start();
  closers.push(() => projections.stop());
  roles = new BackgroundRoles({
    projector: config.roles.has('projector'),
    delivery: config.roles.has('delivery'),
    piiRetentionDays: config.piiRetentionDays,
    store,
    personalData,
    readModels,
    projections,
    routing: () => routing,
    now: () => new Date(),
    logger,
    holder,
    ...(buyerCa ? { buyerCa } : {}),
    onAttempt: (_leadId, attempt) => {
      const outcome = deliveryOutcome(attempt);
      if (outcome) attempts.set(outcome, (attempts.get(outcome) ?? 0) + 1);
    },
    countSentAgain: (kind) => sentAgain.set(kind, (sentAgain.get(kind) ?? 0) + 1),
  });
  const started = roles;
  closers.push(() => started.stopProjector());
  await started.startProjector();
  // Delivery and retention start when the process's listeners are up (a thread started again: at once).
  closers.push(() => (draining ??= started.stopDeliveryAndRetention()));
  if (deliverAtOnce) await started.startDeliveryAndRetention();
} catch (error) {
  await closeAll();
  flushLogs();
  post({ kind: 'failed', error: { name: (error as Error).name ?? 'Error', message: (error as Error).message ?? String(error) } });
  port.close();
  process.exit(1);
}

const reporting = setInterval(report, 250);
let stopping = false;
act = (message) => {
  if (stopping) return;
  const running = roles!;
  const logged = (error: unknown) => logger.error({ err: error }, 'starting or stopping delivery failed');
  if (message.kind === 'deliver') {
    const start = !delivered && !draining;
    delivered = true;
    delivery = delivery
      .then(() => (start ? running.startDeliveryAndRetention() : undefined))
      .catch(logged)
      .then(() => post({ kind: 'delivering', leases: running.leases() }));
  } else if (message.kind === 'drain') {
    delivery = delivery
      .then(() => (draining ??= running.stopDeliveryAndRetention()))
      .catch(logged)
      .then(() => post({ kind: 'drained', leases: running.leases() }));
  } else {
    stopping = true;
    clearInterval(reporting);
    void delivery
      .then(closeAll)
      .then(() => {
        report();
        flushLogs();
        port.close();
      });
  }
};
post({ kind: 'started', leases: roles!.leases() });
if (wanted) act({ kind: wanted });

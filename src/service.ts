import type { Logger } from 'pino';
import { CapLedger } from './commands/caps.js';
import { ContactRegistry } from './commands/contacts.js';
import { ConsumerEraser, consumerLeadIds } from './commands/erasure.js';
import type { RetentionSweeper } from './commands/retention.js';
import type { Position } from './event-store/port.js';
import { IdempotencyKeys } from './commands/idempotency.js';
import { LeadIdAllocator } from './commands/lead-ids.js';
import { createPostLead } from './commands/post-lead/post-lead.js';
import { BidderRest } from './commands/ping/bidder-rest.js';
import { createPing } from './commands/ping/ping.js';
import { SERVICE_ROLES, type ServiceConfig } from './config.js';
import { type MxResolver, NO_LOOKUPS } from './enrichment/email.js';
import { createDefaultEnricher } from './enrichment/enricher.js';
import { type EventStore, openEventStore } from './event-store/index.js';
import { type PersonalDataKeys, openPersonalDataKeys } from './personal-data/index.js';
import { ContactHashes, idempotencyNames } from './personal-data/contact-hashes.js';
import { createApp, createOpsApp } from './http/app.js';
import { createLogger } from './http/logger.js';
import { warnOfUnsetSecrets } from './routing/unset-secrets.js';
import { startServers } from './http/server.js';
import { loadOrCreateTls } from './http/tls.js';
import { buyerAgent } from './delivery/buyer-agent.js';
import { KeyRing } from './keys/key-ring.js';
import { Projections } from './projections/index.js';
import { releaseVersion } from './version.js';
import { ReadBack } from './read-models/read-back.js';
import { openReadModelStore } from './read-models/index.js';
import { type ReadModelStore, ReadModelUnavailableError } from './read-models/port.js';
import { createLeadValidator, createPingValidator } from './leads/validate.js';
import { loadRoutingConfig } from './routing/load-config.js';
import { FailureRun } from './ops/failure-run.js';
import { countingEventStore } from './ops/counting-event-store.js';
import { holdsClearLeads } from './personal-data/clear-leads.js';
import { ShutdownFlag } from './ops/shutdown-flag.js';
import { repeatedFailures } from './ops/outage-log.js';
import { Opened } from './ops/opened.js';
import { type ReloadResult, settingsReloader, watchRoutingFile } from './ops/reload.js';
import { ServiceMetrics } from './ops/metrics.js';
import { ReadinessProbe } from './ops/readiness.js';
import { INSTANCE_LEASE_PREFIX, LeaseKeeper, type LeaseStatus, leaseHolderId } from './roles/lease-keeper.js';
import { leaseOfProjection } from './roles/projector-leases.js';
import { refuseBesideOlderRelease } from './roles/older-release.js';
import { BackgroundRoles } from './roles/background-roles.js';
import { BackgroundThread } from './roles/background-thread.js';

/** What tests replace: things outside the service (clock, DNS) and where logs go. */
export interface ServiceOverrides {
  readonly now?: () => Date;
  readonly resolver?: MxResolver;
  readonly logger?: Logger;
  /** A store from openEventStore (so behind the event codec), perhaps wrapped. */
  readonly store?: EventStore;
  readonly readModels?: ReadModelStore;
  /** A CA trusted on top of the system ones when asking webhook bidders and posting to webhook buyers (a test's self-signed buyer). */
  readonly buyerCa?: string;
  /** false: no webhook delivery worker (tests that run their own, trusting a test CA). */
  readonly deliveryWorker?: boolean;
  /** How often the key ring reads the keys stream; default 250 ms. */
  readonly keyPollMs?: number;
  /** How long an erasure or access request waits for the read models (CATCH_UP_MS). */
  readonly catchUpMs?: number;
}

export interface RunningService {
  readonly httpsPort: number;
  readonly httpPort: number;
  readonly store: EventStore;
  /** The data keys that seal and open the consumers' personal data. */
  readonly personalData: PersonalDataKeys;
  /** The keyed names of the contact streams. */
  readonly contactHashes: ContactHashes;
  readonly keys: KeyRing;
  readonly readModels: ReadModelStore;
  readonly projections: Projections;
  /** The background shredding of personal data past PII_RETENTION_DAYS; null when it is unset, or when it runs on the background thread. */
  readonly retention: RetentionSweeper | null;
  readonly metrics: ServiceMetrics;
  /** The leases this process keeps (one per projection, delivery, retention), as it sees them now. */
  leases(): LeaseStatus[];
  /** The thread running the projector, delivery and retention beside the API; null when they run on the main thread (or not at all). */
  readonly backgroundThread: BackgroundThread | null;
  /** Reads the routing file and the TLS certificate again (SIGHUP); a file that does not load leaves what is in force. */
  reload(): Promise<ReloadResult>;
  /** Drains: stops accepting, lets requests in flight finish, stops the workers, closes the stores. */
  close(): Promise<void>;
}

/** Requests in flight at shutdown get this long; the rest of the 10 s budget is for the workers and stores. */
const IN_FLIGHT_GRACE_MS = 7_000;

/**
 * An instance's lease row is removed once it has run out this long ago: the instance stopped or
 * died (a live one renews every second), and any that is only paused takes a row anew when it renews.
 */
const GONE_INSTANCE_MS = 60_000;

/**
 * How long an erasure or an access request waits for the read models to reach the event store's
 * head. With no projector running anywhere (an API instance whose projector process is down) they
 * never would: the request then answers 503, instead of hanging for as long as the client waits
 * and acting after it has given up.
 */
const CATCH_UP_MS = 30_000;

function caughtUpWithin(projections: Projections, position: Position, withinMs: number): Promise<void> {
  const deadline = new AbortController();
  const timer = setTimeout(
    () => deadline.abort(new ReadModelUnavailableError(`the read models did not reach the event store's head within ${withinMs / 1000} s: is a projector running?`)),
    withinMs,
  );
  return projections.waitFor(position, deadline.signal).finally(() => clearTimeout(timer));
}


/**
 * Starts the whole service: stores, key ring, routing file, post-lead pipeline, HTTPS and plain
 * HTTP listeners. The routing file and TLS material are checked before anything listens, so a bad
 * file stops start-up with its message.
 */
export async function startService(config: ServiceConfig, overrides: ServiceOverrides = {}): Promise<RunningService> {
  const logger = overrides.logger ?? createLogger();
  const roles = config.roles;
  // Replaced by a reload (SIGHUP): every user reads it through a getter, once per lead, ping or attempt.
  let routing = loadRoutingConfig(config.routingFile);
  warnOfUnsetSecrets(routing, process.env, logger);
  const loadTls = () => loadOrCreateTls({ dataDir: config.dataDir, certFile: config.tlsCertFile, keyFile: config.tlsKeyFile });
  let tls = await loadTls();
  // One head read for every projection's status (a scrape or a readiness probe asks for all of them).
  const projectionStatuses = async () => projections.statuses(await store.headPosition());
  let background: BackgroundRoles | null = null;
  let thread: BackgroundThread | null = null;
  const leases = () => thread?.leases() ?? background?.leases() ?? [];
  const metrics = new ServiceMetrics({
    projections: projectionStatuses,
    roles: { all: SERVICE_ROLES, running: [...roles], leases },
    routingVersion: () => routing.version,
  });
  // The posts' own appends tell /readyz whether this instance takes writes (reads alone do not).
  const appendHealth = new FailureRun(config.readyAppendFailureSeconds * 1000);
  // Every append of the service goes through this decorator, so /metrics counts them all.
  // One set of data keys seals new leads and opens them for the readers allowed to see them.
  const opened = new Opened((error) => logger.error({ err: error }, 'closing the stores after a failed start failed'));
  // The service's own uses of the key store tell /readyz whether it still answers (its probe reads no key).
  const keyStoreHealth = new FailureRun(config.readyAppendFailureSeconds * 1000);
  const personalData = await opened.step(
    () => openPersonalDataKeys(config, (failure) => keyStoreHealth.record(failure === undefined ? 'ok' : 'error', failure)),
    (keys) => keys.close(),
  );
  const store = countingEventStore(
    await opened.step(async () => overrides.store ?? (await openEventStore(config, { logger, personalData })), (events) => (overrides.store ? undefined : events.close())),
    (result, events, error) => {
      metrics.countAppend(result, events);
      appendHealth.record(result, error);
    },
  );
  const contactHashes = await opened.step(() => ContactHashes.open(personalData, store, overrides.now));
  // The ring reads the keys stream four times a second: a store that is down failed each read, and
  // each was a warning of its own.
  const keyReads = repeatedFailures(logger, 'key ring refresh failed', 'failed_reads', { one: 'read', many: 'reads' });
  const keys = await opened.step(
    () => KeyRing.open(store, { ...(overrides.keyPollMs ? { pollMs: overrides.keyPollMs } : {}), onPollError: (error) => keyReads.failed(error) }),
    (ring) => ring.close(),
  );
  // A process that projects without serving the API stores its read-model commits on a thread of
  // their own (embedded store), so it catches up on two cores after a takeover. One that also
  // serves the API keeps them on its main thread: there the thread cost more CPU per post than it
  // gave in throughput (BENCH.md). Fenced commits are checked against the projection's lease either
  // way, and projectors of other processes write the same tables when they hold it. One that serves
  // the API runs its reports on a reader thread, so that a report never holds up the requests in flight.
  const readModelOptions = roles.has('api') ? { readerThread: true } : roles.has('projector') ? { commitThread: true, othersMayWrite: true, smallThreadHeap: true } : {};
  const readModels = await opened.step(
    async () => overrides.readModels ?? (await openReadModelStore(config, readModelOptions)),
    (models) => (overrides.readModels ? undefined : models.close()),
  );
  // A step: refused, the stores opened so far are closed and the process can exit.
  await opened.step(() => refuseBesideOlderRelease(readModels));
  // Every instance follows which build of each projection is served; only the one holding a
  // projection's lease runs it, its commits fenced by that lease.
  const projections = new Projections(store, readModels, logger);
  await opened.step(() => projections.start(), () => projections.stop());
  // The work besides the API runs on a thread of its own where it can (see background-thread.ts);
  // stores or a clock a test hands in cannot cross to a thread, so then it runs here.
  const threaded =
    config.backgroundThread &&
    roles.has('api') &&
    (roles.has('projector') || roles.has('delivery')) &&
    !overrides.store &&
    !overrides.readModels &&
    !overrides.now &&
    overrides.deliveryWorker !== false;
  const now = overrides.now ?? (() => new Date());
  background = threaded
    ? null
    : new BackgroundRoles({
        projector: roles.has('projector'),
        delivery: roles.has('delivery') && overrides.deliveryWorker !== false,
        piiRetentionDays: config.piiRetentionDays,
        store,
        personalData,
        readModels,
        projections,
        routing: () => routing,
        now,
        logger,
        holder: leaseHolderId(),
        onAttempt: metrics.countDeliveryAttempt,
        countSentAgain: metrics.countSentAgain,
        ...(overrides.buyerCa ? { buyerCa: overrides.buyerCa } : {}),
      });
  await opened.step(() => background?.startProjector(), () => background?.stopProjector());
  thread = threaded
    ? await opened.step(
        () =>
          BackgroundThread.start({
            data: {
              config: { ...config, roles: new Set([...roles].filter((role) => role !== 'api')) },
              routing,
              ...(overrides.buyerCa ? { buyerCa: overrides.buyerCa } : {}),
            },
            logger,
            countAppends: metrics.countAppend,
            countDeliveries: metrics.countDeliveryOutcome,
            countSentAgain: metrics.countSentAgain,
          }),
        (started) => started.stop(),
      )
    : null;
  const readBack = new ReadBack({
    events: store,
    personalData,
    readModels,
    collection: (base) => projections.collection(base),
    position: () => projections.position(),
    now,
    routing: () => routing,
  });
  const shutdown = new ShutdownFlag();
  const readiness = new ReadinessProbe({
    events: store,
    appends: appendHealth,
    readModels,
    keyStore: personalData,
    keyStoreUses: keyStoreHealth,
    projections: projectionStatuses,
    projectionsHere: (projection) => (thread ? leases().some((lease) => lease.lease === leaseOfProjection(projection) && lease.held) : projections.runs(projection)),
    roles: { running: [...roles], leases },
    maxLagSeconds: config.readyMaxLagSeconds,
    shuttingDown: () => shutdown.shuttingDown,
    logger,
  });
  const ops = { readiness, metrics, shutdown };

  const contacts = new ContactRegistry(store, contactHashes);
  const keyNames = await opened.step(() => idempotencyNames(contactHashes, store, overrides.now));
  const consumerLeads = { store, readModels, leads: () => projections.collection('leads'), caughtUp: (position: Position) => caughtUpWithin(projections, position, overrides.catchUpMs ?? CATCH_UP_MS) };
  const eraser = new ConsumerEraser({ ...consumerLeads, keys: personalData, hashes: contactHashes, contacts, now });
  // Its blocks of cap slots go back as the service stops (the closers run newest first, so before
  // the event store closes, and after the requests in flight, which may still take slots).
  const caps = await opened.step(
    () => new CapLedger(store, () => now().getTime()),
    (ledger) => ledger.returnUnused().catch((error: unknown) => logger.warn({ err: error }, 'cap slots in hand not given back: their periods sell that many fewer leads')),
  );
  // Bids are asked over keep-alive connections: a ping's deadline is too short for a TLS handshake per buyer.
  const bidAgent = await opened.step(
    () => buyerAgent({ ca: overrides.buyerCa, sentAgain: () => metrics.countSentAgain('bid') }),
    (agent) => agent.destroy(),
  );
  const ping = createPing({
    store,
    validate: createPingValidator(),
    routing: () => routing,
    caps,
    env: process.env,
    agent: bidAgent,
    countBids: metrics.countBids,
    rest: new BidderRest(() => now().getTime()),
    deadlineMs: config.pingDeadlineMs,
    ttlSeconds: config.pingTtlSeconds,
    now,
  });
  const app = roles.has('api')
    ? createApp({
        authenticate: (key) => keys.authenticateFresh(key),
        postLead: createPostLead({
          store,
          leadIds: new LeadIdAllocator(store, config.leadIdBlockSize, `pid-${process.pid}`),
          validate: createLeadValidator({ allowedCertificateHosts: config.certificateHosts, allowedPhoneRegions: config.phoneRegions }),
          enrich: createDefaultEnricher({
            resolver: overrides.resolver ?? (config.mxLookup ? undefined : NO_LOOKUPS),
            mxTimeoutMs: config.mxTimeoutMs,
            mxCanaryDomain: config.mxCanaryDomain,
            allowedCertificateHosts: config.certificateHosts,
            phoneProviderUrl: config.phoneVerifierUrl,
            emailProviderUrl: config.emailVerifierUrl,
            countChecks: metrics.countChecks,
          }),
          routing: () => routing,
          contacts,
          caps,
          idempotency: new IdempotencyKeys(store, () => now().getTime(), keyNames),
          now,
        }),
        logger,
        currency: () => routing.currency,
        limits: { bodyBytes: config.bodyLimitBytes },
        rateLimit: config.rateLimit,
        readRateLimit: config.readRateLimit,
        pingRateLimit: config.pingRateLimit,
        ping,
        readBack,
        afterSale: { events: store, routing: () => routing, now },
        erasure: { eraser, leadIdsOf: (consumer) => consumerLeadIds(consumerLeads, eraser.contactsOf(consumer)) },
        ops,
      })
    : createOpsApp({ logger, ops, currency: () => routing.currency });
  // A port in use is the usual failed start: what is open is closed, so the process can exit with it.
  const servers = await opened.step(() =>
    startServers({
      app,
      tls,
      port: config.port,
      httpPort: config.httpPort,
      host: config.host,
      trustProxy: config.trustProxy,
      logger,
      timeouts: { headersMs: config.headersTimeoutMs, requestMs: config.requestTimeoutMs },
      bodyLimitBytes: config.bodyLimitBytes,
      currency: () => routing.currency,
    }),
  );
  const reloadSettings = settingsReloader({
    routingFile: config.routingFile,
    routing: () => routing,
    applyRouting: (next) => {
      routing = next;
      thread?.setRouting(next);
      // A cap the new file lowers must count only the slots sold, not those this instance holds.
      caps.giveBack().catch((error: unknown) => logger.warn({ err: error }, 'cap slots in hand not given back after the reload: their periods may sell fewer leads'));
    },
    tls: () => tls,
    loadTls,
    applyTls: (next) => {
      tls = next;
      servers.setTls(next);
    },
    env: process.env,
    logger,
  });
  const reload = async (): Promise<ReloadResult> => {
    const result = await reloadSettings();
    metrics.countReload(result);
    return result;
  };
  const watchSeconds = config.routingWatchSeconds;
  if (watchSeconds !== null) await opened.step(() => watchRoutingFile(config.routingFile, watchSeconds, reload, logger, () => routing.version), (unwatch) => unwatch());
  // Kept for as long as this instance runs, whatever its roles, and given up when it stops (see
  // INSTANCE_LEASE_PREFIX): under the id its role leases are held by, so that one id names the
  // instance in `leadpost instances`, its listening line and its readiness (a background thread
  // started anew after a failure holds them under a new id, with the same HOST:PID).
  const instance = thread?.holder ?? background?.holder ?? leaseHolderId();
  const presence = new LeaseKeeper({ leases: readModels, name: `${INSTANCE_LEASE_PREFIX}${instance}`, holder: instance, work: { start: async () => {}, stop: async () => {} }, logger });
  await opened.step(() => presence.start(), () => presence.stop());
  // Each start names a lease of its own, and a stopped or dead instance's row stays behind: without
  // this, one row more per start or crash, for ever, for every look-up of the running ones to skip.
  await readModels
    .removeLeasesNamed(INSTANCE_LEASE_PREFIX, Date.now() - GONE_INSTANCE_MS)
    .catch((error: unknown) => logger.warn({ err: error }, 'could not remove the leases of instances gone'));
  // Started after the listeners, so that a failed start leaves no worker running.
  await background?.startDeliveryAndRetention();
  await thread?.deliver();
  logger.info(
    {
      version: releaseVersion(),
      https_port: servers.httpsPort,
      http_port: servers.httpPort,
      store: config.eventStoreUrl ? 'eventstoredb' : 'embedded',
      data_dir: config.dataDir,
      routing_version: routing.version,
      self_signed: tls.selfSigned,
      roles: [...roles],
      lease_holder: thread?.holder ?? background?.holder ?? null,
      leases: leases(),
    },
    'leadpost listening',
  );
  await warnOfClearLeads(store, config, logger);
  return {
    httpsPort: servers.httpsPort,
    httpPort: servers.httpPort,
    store,
    personalData,
    contactHashes,
    keys,
    readModels,
    projections,
    retention: background?.retention ?? null,
    metrics,
    leases,
    backgroundThread: thread,
    reload,
    close: async () => {
      const started = Date.now();
      shutdown.raise();
      // Appends of requests in flight and of delivery attempts land before the stores close.
      // The projector runs on until the stores close: a request in flight may wait for it (an erasure).
      const finishing = Promise.all([servers.close(IN_FLIGHT_GRACE_MS), background?.stopDeliveryAndRetention(), thread?.drain()]);
      logger.info({ grace_ms: IN_FLIGHT_GRACE_MS }, 'leadpost stopping: no new connections, finishing requests in flight');
      await finishing;
      await opened.closeAll();
      logger.info({ ms: Date.now() - started }, 'leadpost stopped');
    },
  };
}

/** Leads an older release wrote in clear cannot be erased until they are sealed: the operator is told at every start. */
async function warnOfClearLeads(store: EventStore, config: ServiceConfig, logger: Logger): Promise<void> {
  try {
    if (!(await holdsClearLeads(store))) return;
    logger.warn(
      config.eventStoreUrl
        ? 'this event store holds leads an older release wrote with their personal data in clear: an erasure cannot shred them, and EventStoreDB events cannot be sealed in place'
        : 'this event store holds leads an older release wrote with their personal data in clear: an erasure cannot find or shred them until `leadpost seal-clear-leads` has run (with the service stopped)',
    );
  } catch (error) {
    logger.warn({ err: error }, 'could not tell whether the event store holds leads written in clear');
  }
}


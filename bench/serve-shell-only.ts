import { loadServiceConfig } from '../src/config.js';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { createApp } from '../src/http/app.js';
import { createLogger } from '../src/http/logger.js';
import { startServers } from '../src/http/server.js';
import { loadOrCreateTls } from '../src/http/tls.js';
import { KeyRing } from '../src/keys/key-ring.js';
import type { LeadOutcome } from '../src/leads/outcome.js';
import { ServiceMetrics } from '../src/ops/metrics.js';
import type { ReadinessProbe } from '../src/ops/readiness.js';
import { ShutdownFlag } from '../src/ops/shutdown-flag.js';

// The service's HTTP shell with the post answered at once: the same app as `leadpost serve`
// (trace id, metrics, authentication by the key ring, role check, JSON body read and parsed, the
// envelope, security headers), but the post-lead command replaced by one that says SOLD without
// validating, checking, routing or recording anything. Only for measuring what the shell costs a
// post beside the bare endpoint and the whole service; never a way to run leadpost.

const config = loadServiceConfig();
const logger = createLogger();
const tls = await loadOrCreateTls({ dataDir: config.dataDir, certFile: config.tlsCertFile, keyFile: config.tlsKeyFile });
const store = await EmbeddedEventStore.open(config.dataDir);
const keys = await KeyRing.open(store);
const metrics = new ServiceMetrics({ projections: async () => [] });
let nextLead = 1;
const app = createApp({
  authenticate: (key) => keys.authenticate(key),
  postLead: async (request) => {
    const outcome: LeadOutcome = { lead_id: nextLead++, code: 'SOLD', lead_status: 'sold', sold: true, revenue: 25, currency: 'USD' };
    return { kind: 'recorded', outcome, traceId: request.traceId, replayed: false };
  },
  logger,
  currency: () => 'USD',
  limits: { bodyBytes: config.bodyLimitBytes },
  rateLimit: config.rateLimit,
  // /readyz is not asked here: only the per-request part of the operator's middleware is measured.
  ops: { readiness: {} as ReadinessProbe, metrics, shutdown: new ShutdownFlag() },
});
const servers = await startServers({ app, tls, port: config.port, httpPort: config.httpPort, host: config.host, trustProxy: config.trustProxy, logger, bodyLimitBytes: config.bodyLimitBytes, currency: () => 'USD' });
process.once('SIGTERM', () => {
  void servers
    .close(1000)
    .then(() => keys.close())
    .then(() => store.close())
    .then(() => process.exit(0));
});

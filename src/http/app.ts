// The Koa application: shell first, then the routes. No listener, no globals: everything it talks
// to comes in through AppDeps, so tests and the CLI build it the same way.

import Router from '@koa/router';
import Koa from 'koa';
import type { Logger } from 'pino';
import { authenticate, requireRole, type Authenticate } from './auth.js';
import { requireJson } from './body.js';
import { notFoundOrNotAllowed } from './fallback.js';
import { postLeadHandler } from './post-lead-route.js';
import { pingHandler } from './ping-route.js';
import type { Ping } from '../commands/ping/ping.js';
import { registerReadRoutes } from './read-routes.js';
import { type AfterSaleDeps, registerAfterSaleRoutes } from './after-sale-routes.js';
import { registerMeRoute } from './me-route.js';
import { registerRedeliverRoute } from './redeliver-route.js';
import { type ErasureRouteDeps, registerErasureRoutes } from './erasure-routes.js';
import type { ReadBack } from '../read-models/read-back.js';
import type { PostLead } from '../commands/post-lead/port.js';
import { DEFAULT_PING_RATE_LIMIT, DEFAULT_RATE_LIMIT, DEFAULT_READ_RATE_LIMIT, type RateLimitConfig } from '../limits.js';
import { rateLimit, TokenBuckets } from './rate-limit.js';
import { shell } from './shell.js';
import type { ShellState } from './state.js';
import { registerDocsRoutes } from '../docs/routes.js';
import { registerConsoleRoutes } from '../console/routes.js';
import { type OpsDeps, opsMiddleware, registerOpsRoutes } from '../ops/routes.js';

export interface AppDeps {
  authenticate: Authenticate;
  postLead: PostLead;
  logger: Logger;
  /** The routing file's currency in force: every envelope names it, and a report's money is in it. */
  currency: () => string;
  limits?: { bodyBytes?: number };
  /** Lead posts per API key. Omitted: DEFAULT_RATE_LIMIT; null: no limit. */
  rateLimit?: RateLimitConfig | null;
  /** Read-back requests per API key, in buckets of their own. Omitted: DEFAULT_READ_RATE_LIMIT; null: no limit. */
  readRateLimit?: RateLimitConfig | null;
  /** Pings per API key, in buckets of their own. Omitted: DEFAULT_PING_RATE_LIMIT; null: no limit. */
  pingRateLimit?: RateLimitConfig | null;
  /** POST /functions/pings; omitted: not served. */
  ping?: Ping;
  /** Milliseconds on a clock that does not step back; only its differences are used. */
  now?: () => number;
  /** The read-back routes; omitted: only posting. */
  readBack?: ReadBack;
  /** Acknowledging pulled leads and buyer feedback; omitted: not served. */
  afterSale?: Omit<AfterSaleDeps, 'bodyBytes'>;
  /** A consumer's erasure and access requests (admin); omitted, or without readBack: not served. */
  erasure?: Omit<ErasureRouteDeps, 'bodyBytes' | 'readBack'>;
  /** /readyz, /metrics and shutdown draining; omitted: not served. */
  ops?: OpsDeps;
}

const DEFAULT_BODY_BYTES = 64 * 1024;

export function createApp(deps: AppDeps): Koa<ShellState> {
  const bodyBytes = deps.limits?.bodyBytes ?? DEFAULT_BODY_BYTES;
  if (!(Number.isInteger(bodyBytes) && bodyBytes > 0)) throw new RangeError('limits.bodyBytes must be a positive integer');
  const now = deps.now ?? (() => performance.now());
  const limitConfig = deps.rateLimit === undefined ? DEFAULT_RATE_LIMIT : deps.rateLimit;
  const buckets = limitConfig ? new TokenBuckets(limitConfig, now) : null;
  const readLimitConfig = deps.readRateLimit === undefined ? DEFAULT_READ_RATE_LIMIT : deps.readRateLimit;
  const readBuckets = readLimitConfig ? new TokenBuckets(readLimitConfig, now) : null;
  const pingLimitConfig = deps.pingRateLimit === undefined ? DEFAULT_PING_RATE_LIMIT : deps.pingRateLimit;
  const pingBuckets = pingLimitConfig ? new TokenBuckets(pingLimitConfig, now) : null;

  const router = healthRouter();
  // The order is the contract's: who, may they, how often, then what they sent. An admin may do
  // everything, posting too: the lead's supplier is then the admin key's name, as it is a supplier
  // key's (so an operator testing by hand names the admin key like the supplier it stands for).
  router.post(
    '/functions/leads',
    authenticate(deps.authenticate),
    requireRole('supplier', 'admin'),
    rateLimit(buckets),
    requireJson(),
    postLeadHandler(deps.postLead, bodyBytes),
  );
  // A ping asks every bidding buyer: its own buckets, so pinging never starves posting.
  if (deps.ping) {
    router.post('/functions/pings', authenticate(deps.authenticate), requireRole('supplier', 'admin'), rateLimit(pingBuckets), requireJson(), pingHandler(deps.ping, bodyBytes));
  }

  // Every other keyed route is limited per key too: the writes (a buyer's acks and feedback, an
  // admin's erasures and redeliveries) in the posts' buckets, the rest in the reads'.
  const limits = { write: rateLimit(buckets), read: rateLimit(readBuckets) };
  if (deps.readBack) registerReadRoutes(router, deps.authenticate, deps.readBack, limits.read, deps.currency);
  if (deps.afterSale) registerAfterSaleRoutes(router, deps.authenticate, { ...deps.afterSale, bodyBytes }, limits.write);
  if (deps.erasure && deps.readBack) registerErasureRoutes(router, deps.authenticate, { ...deps.erasure, readBack: deps.readBack, bodyBytes }, limits);
  if (deps.afterSale && deps.readBack) {
    registerRedeliverRoute(router, deps.authenticate, { events: deps.afterSale.events, now: deps.afterSale.now, routing: deps.afterSale.routing, readBack: deps.readBack, bodyBytes }, limits.write);
  }
  if (deps.afterSale) registerMeRoute(router, deps.authenticate, deps.afterSale.routing, limits.read);
  registerDocsRoutes(router);
  registerConsoleRoutes(router);
  return assemble(router, deps.logger, deps.ops, deps.currency);
}

/**
 * The application of a process that does not serve the API (`serve --roles projector,delivery`):
 * only /healthz, /readyz and /metrics, so that an operator can see what it runs and whether it
 * holds a lease; every other path is the NOT_FOUND envelope.
 */
export function createOpsApp(deps: { logger: Logger; ops: OpsDeps; currency: () => string }): Koa<ShellState> {
  return assemble(healthRouter(), deps.logger, deps.ops, deps.currency);
}

function healthRouter(): Router<ShellState> {
  const router = new Router<ShellState>();
  router.get('/healthz', (ctx) => {
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'up' };
  });
  return router;
}

function assemble(router: Router<ShellState>, logger: Logger, ops: OpsDeps | undefined, currency: () => string): Koa<ShellState> {
  if (ops) registerOpsRoutes(router, ops);
  const app = new Koa<ShellState>();
  // Koa's default handler prints to stderr; the shell already answered, so this only records
  // failures after the response started (a socket torn down mid-write).
  app.on('error', (error: unknown) => logger.warn({ err: error }, 'response failed after the shell'));
  if (ops) app.use(opsMiddleware(ops));
  app.use(shell(logger, currency));
  app.use(router.routes());
  app.use(notFoundOrNotAllowed(router));
  return app;
}

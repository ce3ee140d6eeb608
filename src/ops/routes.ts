// The routes an operator's tools call: readiness for the load balancer, metrics
// for Prometheus. Neither takes an API key: a probe or a scraper should not hold a key that could
// post leads, and neither answer carries PII or a principal's name (see README, Operator guide).

import type Router from '@koa/router';
import type { Middleware } from 'koa';
import { noLeadEnvelope } from '../http/envelope.js';
import type { ShellState } from '../http/state.js';
import type { ServiceMetrics } from './metrics.js';
import type { ReadinessProbe } from './readiness.js';
import type { ShutdownFlag } from './shutdown-flag.js';

export interface OpsDeps {
  readonly readiness: ReadinessProbe;
  readonly metrics: ServiceMetrics;
  readonly shutdown: ShutdownFlag;
}

export function registerOpsRoutes(router: Router<ShellState>, deps: OpsDeps): void {
  router.get('/readyz', async (ctx) => {
    const { ready, checks } = await deps.readiness.check();
    if (ready) {
      ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'ready', checks };
      return;
    }
    // Not ready is an answer, not a failure: the envelope of UNAVAILABLE, naming what failed.
    const failing = Object.entries(checks).filter(([, check]) => !check.ok).map(([name, check]) => `${name} (${check.detail})`);
    ctx.status = 503;
    ctx.set('Retry-After', '5');
    ctx.body = { ...noLeadEnvelope('UNAVAILABLE', ctx.state.traceId, ctx.state.currency, { message: `not ready: ${failing.join('; ')}` }), checks };
  });

  router.get('/metrics', async (ctx) => {
    const { contentType, body } = await deps.metrics.render();
    ctx.type = contentType;
    ctx.body = body;
  });
}

/**
 * Outside the shell: the latency it measures and the connection it closes include the shell's work.
 * One middleware for both, so a request passes one more async function, not two.
 */
export function opsMiddleware(deps: OpsDeps): Middleware {
  return async (ctx, next) => {
    const started = performance.now();
    try {
      await next();
    } finally {
      // Once shutting down, every response closes its connection (see ShutdownFlag).
      if (deps.shutdown.shuttingDown) ctx.set('Connection', 'close');
      deps.metrics.observeRequest(ctx, started);
    }
  };
}

// The outermost middleware: trace id in, envelope out for every error, security headers and the
// access log on every response. It is the only place an error becomes a response body.

import type { Context, Middleware } from 'koa';
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { logAccess } from './access-log.js';
import { noLeadEnvelope, OUTCOMES, type OutcomeCode } from './envelope.js';
import { mayLandLater } from '../event-store/port.js';
import { isStoreUnavailable } from '../store-unavailable.js';
import { OutageLog, QUIET_MS } from '../ops/outage-log.js';
import { ShellError } from './errors.js';
import { lingerOnClose } from './linger.js';
import { JSON_CONTENT_TYPE, SECURITY_HEADERS } from './security-headers.js';
import type { ShellState } from './state.js';
import { traceIdFrom } from './trace.js';

/** `currency`: the routing file's in force, named by every envelope answered under the shell. */
export function shell(logger: Logger, currency: () => string): Middleware<ShellState> {
  // Every request waiting on a store that is down fails alike: the outage is logged, not each 503.
  const outages = new OutageLog(logger, {
    begins: 'store unavailable',
    goesOn: 'store unavailable: still answering 503 (answered_503: the requests since the line before, not logged one by one)',
    ends: `store unavailable: over, no request answered 503 for ${QUIET_MS / 1000} s (answered_503: the outage's total)`,
    counted: 'answered_503',
  });
  return async (ctx, next) => {
    const started = performance.now();
    const traceId = traceIdFrom(ctx.get('traceparent') || undefined);
    ctx.state.traceId = traceId;
    ctx.state.currency = currency();
    try {
      // RFC 9112 §3.2 wants a 400 for HTTP/1.1 without Host; Node's own answer has no body, so the
      // listeners leave it to the shell (requireHostHeader: false), which answers with the envelope.
      if (ctx.req.httpVersion === '1.1' && ctx.req.headers.host === undefined) {
        throw new ShellError('MALFORMED_JSON', { Connection: 'close' }, 'no Host header', undefined, NO_HOST_MESSAGE);
      }
      await next();
    } catch (error) {
      respondWithError(ctx, error, traceId, ctx.state.currency, logger, outages);
    }
    // The body of an unread request is still on the wire; closing beats draining it for a stranger,
    // after a moment for the client to stop sending (linger.ts), so that it reads this answer.
    if (!ctx.req.complete) {
      ctx.set('Connection', 'close');
      lingerOnClose(ctx.req.socket);
    }
    ctx.set(SECURITY_HEADERS);
    // A page for browsers (the docs) loosens the JSON-only defaults for itself, never the reverse.
    if (ctx.state.pageHeaders) ctx.set(ctx.state.pageHeaders);
    ctx.set('X-Trace-Id', traceId);
    // A read-back route may answer text (CSV, also streamed); everything else is the JSON envelope.
    if (typeof ctx.body !== 'string' && !(ctx.body instanceof Readable)) ctx.type = JSON_CONTENT_TYPE;
    logAccess(logger, {
      traceId,
      method: ctx.method,
      route: routePattern(ctx),
      status: ctx.status,
      started,
      keyId: ctx.state.principal?.keyId ?? null,
    });
  };
}

/** What a request without Host is told; the reference documentation shows the same. */
export const NO_HOST_MESSAGE = 'The request is not valid HTTP/1.1: it has no Host header.';

/** A 503 for a lead's append an event store took and never answered (EventStoreDB): it may have been recorded. */
export const MAY_BE_RECORDED_MESSAGE =
  'The service is temporarily unavailable, and its event store did not answer whether it recorded this lead; it may have. Retry later with the same Idempotency-Key: if it was recorded, the retry gets its answer.';

export const INVALID_INPUT_MESSAGE = 'One or more inputs are invalid; errors names each.';

function respondWithError(ctx: Context, error: unknown, traceId: string, currency: string, logger: Logger, outages: OutageLog): void {
  let code: OutcomeCode;
  let headers: Readonly<Record<string, string>> = {};
  let errors: ShellError['errors'];
  let message: string | undefined;
  if (error instanceof ShellError) {
    code = error.code;
    headers = error.headers;
    errors = error.errors;
    message = error.publicMessage;
  } else if (isStoreUnavailable(error)) {
    code = 'UNAVAILABLE';
    headers = { 'Retry-After': '1' };
    // Not "nothing was recorded": the store took the lead and never said whether it kept it. (Other
    // writes keep the generic answer: a retry of theirs does the same again.)
    if (mayLandLater(error) && ctx.method === 'POST' && routePattern(ctx) === '/functions/leads') message = MAY_BE_RECORDED_MESSAGE;
    outages.failed(error, { trace_id: traceId });
  } else {
    code = 'INTERNAL_ERROR';
    logger.error({ trace_id: traceId, err: error }, 'unhandled error');
  }
  ctx.status = OUTCOMES[code].status;
  ctx.set(headers);
  ctx.body = noLeadEnvelope(code, traceId, currency, errors ? { errors, message: INVALID_INPUT_MESSAGE } : message ? { message } : {});
}

// @koa/router leaves the matched pattern on an internal, untyped context field.
export function routePattern(ctx: Context): string | null {
  const matched: unknown = (ctx as { _matchedRoute?: unknown })._matchedRoute;
  if (typeof matched === 'string') return matched;
  const state = ctx.state as Partial<ShellState>;
  return state.route ?? null;
}

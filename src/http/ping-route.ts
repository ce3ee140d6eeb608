import type { Middleware } from 'koa';
import type { Ping, PingAnswer } from '../commands/ping/ping.js';
import { readBody, parseJsonBody } from './body.js';
import { type DecisionEnvelope, OUTCOMES, noLeadEnvelope } from './envelope.js';
import type { ShellState } from './state.js';

/** What a ping with a failing field is told (its reference documentation says the same). */
export const PING_INVALID_MESSAGE = 'Ping rejected: one or more fields are invalid.';

// POST /functions/pings: the ping command (src/commands/ping/ping.ts) answers in the domain's
// terms; this route renders its answer as the decision envelope, with no lead (none is recorded
// until the post) and the ping's id, bid and expiry.

/** The envelope of a ping's answer (also the documentation's example). */
export function pingEnvelope(answer: PingAnswer, traceId: string): DecisionEnvelope {
  const envelope: DecisionEnvelope = {
    ...noLeadEnvelope(answer.code, traceId, answer.currency),
    ok: true,
    ping_id: answer.ping_id,
    bid: answer.bid,
    expires_at: answer.expires_at,
  };
  if (answer.test) envelope.test = true;
  return envelope;
}

export function pingHandler(ping: Ping, bodyBytes: number): Middleware<ShellState> {
  return async (ctx) => {
    const principal = ctx.state.principal;
    if (!principal) throw new Error('ping route reached without a principal');
    const { body, repeated } = parseJsonBody(await readBody(ctx.req, bodyBytes));
    const traceId = ctx.state.traceId;
    const result = await ping({ principal, traceId, body, repeated });
    if (result.kind === 'invalid') {
      ctx.status = OUTCOMES.INVALID.status;
      ctx.body = noLeadEnvelope('INVALID', traceId, ctx.state.currency, { message: PING_INVALID_MESSAGE, errors: result.errors });
      return;
    }
    ctx.status = OUTCOMES[result.answer.code].status;
    ctx.body = pingEnvelope(result.answer, traceId);
  };
}

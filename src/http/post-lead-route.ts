import type { Middleware } from 'koa';
import { readBody, parseJsonBody } from './body.js';
import type { PostLead, PostLeadResult } from '../commands/post-lead/port.js';
import { type DecisionEnvelope, leadEnvelope, noLeadEnvelope, OUTCOMES } from './envelope.js';
import type { ShellState } from './state.js';

// The post-lead command (src/commands/post-lead/post-lead.ts) answers in the domain's terms; this
// route alone turns its answer into a status, headers and the decision envelope.

interface Answer {
  readonly status: number;
  readonly envelope: DecisionEnvelope;
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * A key reused with another body. The bodies are compared byte for byte, as sent: a retry that
 * serialises the same lead anew (another member order, other spacing) is another body, and `errors`
 * says so, as it names the key when it is malformed.
 */
export function otherBodyEnvelope(traceId: string, currency: string): DecisionEnvelope {
  const message = 'This Idempotency-Key was used with a different body.';
  const errors = [{ field: 'Idempotency-Key', code: 'other_body', message: 'Idempotency-Key was first used with another body (compared byte for byte): send a retry exactly as first sent, and a new lead with a new key' }];
  return noLeadEnvelope('IDEMPOTENCY_CONFLICT', traceId, currency, { acceptance: 'rejected', message, errors });
}

/** A key that is not 1–255 visible ASCII characters: nothing was recorded. */
export function malformedKeyEnvelope(traceId: string, currency: string): DecisionEnvelope {
  const message = 'Idempotency-Key must be 1 to 255 visible ASCII characters.';
  return noLeadEnvelope('IDEMPOTENCY_CONFLICT', traceId, currency, { acceptance: 'rejected', message, errors: [{ field: 'Idempotency-Key', code: 'invalid_format', message }] });
}

/** A lead whose mobile or e-mail another process is still posting (or lost when it died): retry, nothing recorded. */
export function pendingEnvelope(fields: readonly ('mobile' | 'email')[], traceId: string, currency: string): DecisionEnvelope {
  const errors = fields.map((field) => ({ field, code: 'pending', message: `${field} matches a lead still being decided; retry after the delay given` }));
  return noLeadEnvelope('DUPLICATE_PENDING', traceId, currency, { errors });
}

function answerOf(result: PostLeadResult, traceId: string, currency: string): Answer {
  if (result.kind === 'recorded') {
    const answer = { status: OUTCOMES[result.outcome.code].status, envelope: leadEnvelope(result.outcome, result.traceId) };
    return result.replayed ? { ...answer, headers: { 'Idempotency-Replayed': 'true' } } : answer;
  }
  if (result.kind === 'ping_not_found') {
    return { status: 404, envelope: noLeadEnvelope('NOT_FOUND', traceId, currency, { message: 'No ping with this ping_id was answered to this supplier.' }) };
  }
  if (result.kind === 'contacts_pending') {
    return { status: 409, envelope: pendingEnvelope(result.fields, traceId, currency), headers: { 'Retry-After': String(result.retryAfterSeconds) } };
  }
  switch (result.reason) {
    case 'in_flight':
      return { status: 409, envelope: noLeadEnvelope('IDEMPOTENCY_CONFLICT', traceId, currency), headers: { 'Retry-After': String(result.retryAfterSeconds) } };
    case 'other_body':
      return { status: 422, envelope: otherBodyEnvelope(traceId, currency) };
    case 'malformed_key':
      return { status: 422, envelope: malformedKeyEnvelope(traceId, currency) };
  }
}

export function postLeadHandler(postLead: PostLead, bodyBytes: number): Middleware<ShellState> {
  return async (ctx) => {
    const principal = ctx.state.principal;
    if (!principal) throw new Error('post-lead route reached without a principal');
    const rawBody = await readBody(ctx.req, bodyBytes);
    const { body, repeated } = parseJsonBody(rawBody);
    const traceId = ctx.state.traceId;
    // A header sent empty is a malformed key, refused as such: taken for no key, a retry would record a second lead.
    // Node joins a repeated header into one string (with ', ', which the key rule then refuses).
    const idempotencyKey = ctx.req.headers['idempotency-key'] as string | undefined;
    const result = await postLead({ principal, traceId, body, repeated, rawBody, idempotencyKey });
    const answer = answerOf(result, traceId, ctx.state.currency);
    for (const [name, value] of Object.entries(answer.headers ?? {})) ctx.set(name, value);
    ctx.status = answer.status;
    ctx.body = answer.envelope;
  };
}

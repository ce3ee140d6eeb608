import type { Middleware } from 'koa';
import { readBody, parseJsonObject } from './body.js';
import type { PostLead } from './post-lead-port.js';
import type { ShellState } from './state.js';

// The shell owns framing and the headers it sets last (security, trace id, type); a command that
// returned one of these would either be overwritten or corrupt the response.
const RESERVED = new Set(['content-type', 'content-length', 'transfer-encoding', 'connection', 'x-trace-id']);

export function postLeadHandler(postLead: PostLead, bodyBytes: number): Middleware<ShellState> {
  return async (ctx) => {
    const principal = ctx.state.principal;
    if (!principal) throw new Error('post-lead route reached without a principal');
    const rawBody = await readBody(ctx.req, bodyBytes);
    const body = parseJsonObject(rawBody);
    const response = await postLead({
      principal,
      traceId: ctx.state.traceId,
      body,
      rawBody,
      idempotencyKey: ctx.get('Idempotency-Key') || undefined,
    });
    for (const [name, value] of Object.entries(response.headers ?? {})) {
      if (!RESERVED.has(name.toLowerCase())) ctx.set(name, value);
    }
    ctx.status = response.status;
    ctx.body = response.envelope;
  };
}

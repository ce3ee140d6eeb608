import type Router from '@koa/router';
import { AfterSaleError, acknowledgeDelivery, recordFeedback } from '../commands/after-sale.js';
import type { EventStore } from '../event-store/port.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import type { Middleware } from 'koa';
import { type Authenticate, authenticate, requireRole } from './auth.js';
import { jsonWhenSent, parseJsonBody, readBody, readOptionalJsonBody, requireJson } from './body.js';
import { ShellError } from './errors.js';
import { unknownFields } from '../leads/outcome.js';
import type { ShellState } from './state.js';

export interface AfterSaleDeps {
  readonly events: EventStore;
  readonly routing: () => LoadedRoutingConfig;
  readonly now: () => Date;
  readonly bodyBytes: number;
}

const LEAD_ID = /^[1-9]\d{0,15}$/;

async function asShellError<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof AfterSaleError) throw new ShellError(error.code, {}, error.code, error.errors, error.explanation);
    throw error;
  }
}

/** The buyer's side after a sale: acknowledge a pulled lead, send feedback. */
export function registerAfterSaleRoutes(router: Router<ShellState>, lookup: Authenticate, deps: AfterSaleDeps, limit: Middleware<ShellState>): void {
  // Suppliers and analysts may neither acknowledge nor send feedback, whatever they send. Each
  // request appends to the lead's stream: limited per key as posts are, so that a runaway buyer
  // integration cannot flood the event store.
  const buyerWrites = [authenticate(lookup), requireRole('buyer', 'admin'), limit];
  // An acknowledgement takes no fields. A body is not needed; one sent is read as any other (JSON,
  // within the body limit), and a field in it is refused rather than ignored: a client that sends
  // one expects it to mean something.
  router.post('/functions/deliveries/:lead_id/ack', ...buyerWrites, jsonWhenSent, async (ctx) => {
    const principal = ctx.state.principal!;
    const id = ctx.params.lead_id ?? '';
    if (!LEAD_ID.test(id)) throw new ShellError('NOT_FOUND');
    const { body } = await readOptionalJsonBody(ctx.req, deps.bodyBytes);
    const fields = Object.keys(body);
    if (fields.length > 0) throw new ShellError('INVALID', {}, 'invalid acknowledgement', unknownFields(fields.slice(0, 20), 'a field of an acknowledgement: send no body, or {}'));
    const { delivered_at } = await asShellError(() => acknowledgeDelivery(deps.events, deps.routing(), { principal, traceId: ctx.state.traceId, now: deps.now() }, Number(id)));
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'Delivery acknowledged.', delivery: { lead_id: Number(id), status: 'delivered', delivered_at } };
  });

  router.post('/functions/leads/:lead_id/feedback', ...buyerWrites, requireJson(), async (ctx) => {
    const id = ctx.params.lead_id ?? '';
    if (!LEAD_ID.test(id)) throw new ShellError('NOT_FOUND');
    const { body, repeated } = parseJsonBody(await readBody(ctx.req, deps.bodyBytes));
    const request = { principal: ctx.state.principal!, traceId: ctx.state.traceId, now: deps.now() };
    const { feedback, created } = await asShellError(() => recordFeedback(deps.events, deps.routing(), request, Number(id), body, repeated));
    // The same conversion or contact sent again records nothing: 200 with the one recorded first.
    ctx.status = created ? 201 : 200;
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: created ? 'Feedback recorded.' : 'Feedback recorded already.', feedback };
  });
}

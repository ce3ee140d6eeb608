import type Router from '@koa/router';
import { AfterSaleError, acknowledgeDelivery, recordFeedback } from '../commands/after-sale.js';
import type { EventStore } from '../event-store/port.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { type Authenticate, authenticate } from './auth.js';
import { parseJsonBody, readBody, requireJson } from './body.js';
import { ShellError } from './errors.js';
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
    if (error instanceof AfterSaleError) throw new ShellError(error.code, {}, error.code, error.errors);
    throw error;
  }
}

/** The buyer's side after a sale: acknowledge a pulled lead, send feedback. */
export function registerAfterSaleRoutes(router: Router<ShellState>, lookup: Authenticate, deps: AfterSaleDeps): void {
  router.post('/functions/deliveries/:lead_id/ack', authenticate(lookup), async (ctx) => {
    const principal = ctx.state.principal!;
    if (principal.role !== 'buyer' && principal.role !== 'admin') throw new ShellError('FORBIDDEN');
    const id = ctx.params.lead_id ?? '';
    if (!LEAD_ID.test(id)) throw new ShellError('NOT_FOUND');
    const { delivered_at } = await asShellError(() => acknowledgeDelivery(deps.events, deps.routing(), { principal, traceId: ctx.state.traceId, now: deps.now() }, Number(id)));
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'Delivery acknowledged.', delivery: { lead_id: Number(id), status: 'delivered', delivered_at } };
  });

  router.post('/functions/leads/:lead_id/feedback', authenticate(lookup), async (ctx, next) => {
    // Suppliers and analysts may not post feedback, whatever they send.
    const role = ctx.state.principal!.role;
    if (role !== 'buyer' && role !== 'admin') throw new ShellError('FORBIDDEN');
    return next();
  }, requireJson(), async (ctx) => {
    const id = ctx.params.lead_id ?? '';
    if (!LEAD_ID.test(id)) throw new ShellError('NOT_FOUND');
    const { body, repeated } = parseJsonBody(await readBody(ctx.req, deps.bodyBytes));
    const request = { principal: ctx.state.principal!, traceId: ctx.state.traceId, now: deps.now() };
    const feedback = await asShellError(() => recordFeedback(deps.events, deps.routing(), request, Number(id), body, repeated));
    ctx.status = 201;
    ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'Feedback recorded.', feedback };
  });
}

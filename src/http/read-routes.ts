import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { ReadBackForbiddenError, ReadBackInputError, type ReadBack } from '../read-models/read-back.js';
import { toCsv } from '../read-models/report.js';
import { type Authenticate, authenticate } from './auth.js';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

// GET routes of DESIGN.md §4.2. Every body is {ok, trace_id, code, message, …} with the position
// of the read models it reflects; errors go through the shell like any other.

type Ctx = Context & { state: ShellState; params: Record<string, string> };

function ok(ctx: Ctx, body: Record<string, unknown>, readBack: ReadBack): void {
  ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'OK', ...body, position: readBack.position };
}

async function guarded(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof ReadBackInputError) throw new ShellError('INVALID', {}, 'invalid query', error.errors);
    if (error instanceof ReadBackForbiddenError) throw new ShellError('FORBIDDEN');
    throw error;
  }
}

/** `limit` runs after authentication: the key's read bucket (its own, apart from posting). */
export function registerReadRoutes(router: Router<ShellState>, lookup: Authenticate, readBack: ReadBack, limit: Middleware<ShellState>): void {
  const keyed = [authenticate(lookup), limit];

  router.get('/functions/leads/:lead_id', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    const lead = await readBack.lead(c.state.principal!, c.params.lead_id ?? '');
    if (!lead) throw new ShellError('NOT_FOUND');
    ok(c, { message: 'Lead found.', lead }, readBack);
  });

  router.get('/functions/deliveries', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    await guarded(async () => ok(c, { ...(await readBack.deliveries(c.state.principal!, c.query)) }, readBack));
  });

  router.get('/functions/feedback', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    await guarded(async () => ok(c, { ...(await readBack.feedback(c.state.principal!, c.query)) }, readBack));
  });

  router.get('/functions/reports/summary', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    await guarded(async () => {
      const report = await readBack.report(c.state.principal!, c.query);
      if (c.accepts('application/json', 'text/csv') === 'text/csv') {
        c.type = 'text/csv; charset=utf-8';
        c.set('Content-Disposition', `attachment; filename="leadpost-report-${report.from}-${report.to}.csv"`);
        c.body = toCsv(report.rows, report.groupBy);
        return;
      }
      ok(c, { items: report.rows, next_cursor: null, from: report.from, to: report.to, tz: report.tz, group_by: report.groupBy }, readBack);
    });
  });
}

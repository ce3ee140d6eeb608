import type Router from '@koa/router';
import type { Context, Middleware } from 'koa';
import { Readable } from 'node:stream';
import { ReadBackForbiddenError, ReadBackInputError, type ReadBack } from '../read-models/read-back.js';
import { type GroupBy, type ReportRow, csvHeader, csvLine } from '../read-models/report.js';
import { type Authenticate, authenticate } from './auth.js';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

// The read-back GET routes. Every body is {ok, trace_id, code, message, …} with the position
// of the read models it reflects; errors go through the shell like any other.

type Ctx = Context & { state: ShellState; params: Record<string, string> };

export function ok(ctx: Ctx, body: Record<string, unknown>, readBack: ReadBack): void {
  ctx.body = { ok: true, trace_id: ctx.state.traceId, code: 'OK', message: 'OK', ...body, position: readBack.position };
}

/** Runs a read-back answer, its refusals turned into the shell's: a bad query 422, a scope it may not read 403. */
export async function guarded(run: () => Promise<void>): Promise<void> {
  try {
    await run();
  } catch (error) {
    if (error instanceof ReadBackInputError) throw new ShellError('INVALID', {}, 'invalid query', error.errors);
    if (error instanceof ReadBackForbiddenError) throw new ShellError('FORBIDDEN');
    throw error;
  }
}

/**
 * `limit` runs after authentication: the key's read bucket (its own, apart from posting).
 * `currency`: the routing file's, which a report names when its range holds no money (else the
 * currency its money was recorded in).
 */
export function registerReadRoutes(router: Router<ShellState>, lookup: Authenticate, readBack: ReadBack, limit: Middleware<ShellState>, currency: () => string): void {
  const keyed = [authenticate(lookup), limit];

  router.get('/functions/leads', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    await guarded(async () => ok(c, { ...(await readBack.leads(c.state.principal!, c.query)) }, readBack));
  });

  router.get('/functions/leads/:lead_id', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    const lead = await readBack.lead(c.state.principal!, c.params.lead_id ?? '');
    if (!lead) throw new ShellError('NOT_FOUND');
    ok(c, { message: 'Lead found.', lead }, readBack);
  });

  router.get('/functions/leads/:lead_id/events', ...keyed, async (ctx) => {
    const c = ctx as unknown as Ctx;
    const events = await readBack.leadEvents(c.state.principal!, c.params.lead_id ?? '');
    if (!events) throw new ShellError('NOT_FOUND');
    // A lead posted with a ping: the ping's own stream too, which explains the price it sold at.
    const pingEvents = await readBack.leadPingEvents(c.state.principal!, c.params.lead_id ?? '');
    ok(c, { message: 'Events of the lead.', lead_id: Number(c.params.lead_id), items: events, ping_events: pingEvents }, readBack);
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
      if (prefersCsv(c.get('Accept'))) {
        const report = await readBack.reportRows(c.state.principal!, c.query);
        c.type = 'text/csv; charset=utf-8';
        c.set('Content-Disposition', `attachment; filename="leadpost-report-${report.from}-${report.to}.csv"`);
        // Streamed: each page is read from the store when the client has taken the one before.
        c.body = Readable.from(csv(report.groupBy, report.rows), { objectMode: false });
        return;
      }
      const report = await readBack.report(c.state.principal!, c.query);
      ok(c, { items: report.items, next_cursor: report.next_cursor, from: report.from, to: report.to, tz: report.tz, group_by: report.groupBy, currency: report.currency ?? currency(), ...(report.totals ? { totals: report.totals } : {}) }, readBack);
    });
  });
}

async function* csv(groupBy: readonly GroupBy[], pages: AsyncIterable<ReportRow[]>): AsyncGenerator<string> {
  yield csvHeader(groupBy);
  for await (const rows of pages) if (rows.length > 0) yield rows.map((row) => csvLine(row, groupBy)).join('');
}

/**
 * Whether the Accept header prefers CSV to JSON. Media-type parameters other than q are ignored:
 * `text/csv; charset=utf-8` (the charset the CSV has anyway) or RFC 4180's `header=present` still
 * ask for CSV, where a negotiator matching parameters answered them JSON. Each type takes the q of
 * the most specific range naming it (`text/csv`, then `text/` any, then any type); a tie is JSON.
 */
function prefersCsv(accept: string): boolean {
  if (accept.trim() === '') return false;
  const ranges = accept.split(',').map((range) => {
    const [type = '', ...parameters] = range.split(';').map((part) => part.trim().toLowerCase());
    const q = parameters.find((parameter) => parameter.startsWith('q='));
    const quality = q === undefined ? 1 : Number(q.slice(2));
    return { type, quality: Number.isFinite(quality) ? quality : 0 };
  });
  const qualityOf = (type: string): number => {
    const [main] = type.split('/');
    for (const name of [type, `${main}/*`, '*/*']) {
      const range = ranges.find((r) => r.type === name);
      if (range) return range.quality;
    }
    return 0;
  };
  const csv = qualityOf('text/csv');
  return csv > 0 && csv > qualityOf('application/json');
}

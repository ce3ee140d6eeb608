import { localTime, pad } from '../routing/local-time.js';

// The summary report: hourly UTC buckets folded into rows of the requested
// dimensions, with days taken in the report's time zone. Pure, so every metric is unit-tested.

export const GROUP_BY = ['day', 'sid', 's1', 'state', 'buyer', 'supplier'] as const;
export type GroupBy = (typeof GROUP_BY)[number];

export const REJECTION_CODES = ['INVALID', 'VERIFICATION_FAILED', 'DUPLICATE'] as const;

export interface ReportBucket {
  readonly hour: string;
  readonly supplier: string;
  readonly sid: string | null;
  readonly s1: string | null;
  readonly state: string | null;
  readonly buyer: string | null;
  readonly test: boolean;
  readonly received?: number;
  readonly accepted?: number;
  readonly sold?: number;
  readonly unsold?: number;
  readonly rejected?: number;
  readonly returned?: number;
  readonly revenue_cents?: number;
  readonly returned_cents?: number;
  readonly [counter: string]: unknown;
}

export interface ReportRow {
  [dimension: string]: string | number | boolean | null;
}

const COUNTERS = ['received', 'accepted', 'sold', 'unsold', 'rejected', ...REJECTION_CODES.map((c) => `rejected_${c}`), 'returned'];
export const METRICS = [...COUNTERS, 'revenue', 'net_revenue', 'acceptance_rate', 'sell_rate', 'avg_price'];

/** The local calendar day of an hour bucket (`2026-11-21T15`) in `tz`. */
export function dayOf(hour: string, tz: string, cache: Map<string, string>): string {
  let day = cache.get(hour);
  if (day === undefined) {
    const t = localTime(new Date(`${hour}:00:00Z`), tz);
    day = `${t.year}-${pad(t.month)}-${pad(t.day)}`;
    cache.set(hour, day);
  }
  return day;
}

/** The UTC instant at which local day `date` (YYYY-MM-DD) starts in `tz`. */
export function startOfLocalDay(date: string, tz: string): Date {
  const [y, m, d] = date.split('-').map(Number) as [number, number, number];
  let guess = Date.UTC(y, m - 1, d);
  // Two corrections reach the exact offset, also on a DST change day.
  for (let i = 0; i < 2; i++) {
    const t = localTime(new Date(guess), tz);
    const asUtc = Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute);
    guess -= asUtc - Date.UTC(y, m - 1, d);
  }
  return new Date(guess);
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 10_000) / 10_000);

export function summarise(buckets: readonly ReportBucket[], groupBy: readonly GroupBy[], tz: string): ReportRow[] {
  const days = new Map<string, string>();
  const rows = new Map<string, { dims: ReportRow; sums: Record<string, number> }>();
  for (const bucket of buckets) {
    const dims: ReportRow = {};
    for (const dimension of groupBy) dims[dimension] = dimension === 'day' ? dayOf(bucket.hour, tz, days) : (bucket[dimension] as string | null);
    const key = JSON.stringify(groupBy.map((d) => dims[d]));
    let row = rows.get(key);
    if (!row) rows.set(key, (row = { dims, sums: {} }));
    for (const counter of [...COUNTERS, 'revenue_cents', 'returned_cents']) {
      row.sums[counter] = (row.sums[counter] ?? 0) + Number(bucket[counter] ?? 0);
    }
  }
  const out = [...rows.values()].map(({ dims, sums }) => {
    const row: ReportRow = { ...dims };
    for (const counter of COUNTERS) row[counter] = sums[counter] ?? 0;
    const revenue = (sums.revenue_cents ?? 0) / 100;
    const returnedRevenue = (sums.returned_cents ?? 0) / 100;
    row.revenue = round2(revenue);
    row.net_revenue = round2(revenue - returnedRevenue);
    row.acceptance_rate = ratio(sums.accepted ?? 0, sums.received ?? 0);
    row.sell_rate = ratio(sums.sold ?? 0, sums.accepted ?? 0);
    row.avg_price = (sums.sold ?? 0) === 0 ? 0 : round2(revenue / sums.sold!);
    return row;
  });
  // Stable order: by the dimensions as text, days ascending.
  return out.sort((a, b) => JSON.stringify(groupBy.map((d) => a[d])).localeCompare(JSON.stringify(groupBy.map((d) => b[d]))));
}

export function toCsv(rows: readonly ReportRow[], groupBy: readonly GroupBy[]): string {
  const columns = [...groupBy, ...METRICS];
  const cell = (value: unknown) => {
    const text = value === null || value === undefined ? '' : String(value);
    // Quote what CSV needs quoted, and neutralise spreadsheet formulas in supplier-given values.
    const safe = /^[=+\-@\t\r]/.test(text) && typeof value === 'string' ? `'${text}` : text;
    return /[",\n\r]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
  };
  return [columns.join(','), ...rows.map((row) => columns.map((c) => cell(row[c])).join(','))].join('\r\n') + '\r\n';
}

import { REJECTION_CODES } from '../events/lead-events.js';
import { localTime, pad } from '../routing/local-time.js';

// The summary report: hourly UTC buckets folded into rows of the requested
// dimensions, with days taken in the report's time zone. The stores do the folding (`aggregate`);
// what is left here is pure, so every metric is unit-tested.

export const GROUP_BY = ['day', 'sid', 's1', 'state', 'buyer', 'supplier'] as const;
export type GroupBy = (typeof GROUP_BY)[number];

export interface ReportBucket {
  readonly hour: string;
  readonly supplier: string;
  readonly sid: string | null;
  /** Only in a single lead's counts: a bucket is never keyed by s1. */
  readonly s1?: string | null;
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
  /** The currency of the bucket's money; null (or missing) when it holds none. */
  readonly currency?: string | null;
  readonly [counter: string]: unknown;
}

export interface ReportRow {
  [dimension: string]: string | number | boolean | null;
}

/**
 * Pings count where they were pinged (supplier, sid, state; buyer empty), bids under the buyer that
 * bid, ping_posts under the buyer the lead sold to at its bid: a report by buyer shows what each
 * bid and won, by supplier or sid what its pings fetched.
 */
export const PING_COUNTERS = ['pings', 'bids', 'ping_posts'];
const COUNTERS = ['received', 'accepted', 'sold', 'unsold', 'rejected', ...REJECTION_CODES.map((c) => `rejected_${c}`), 'returned', ...PING_COUNTERS];
/** The counters of a bucket that a report sums (a lead's view holds its own as `report_<counter>`; pings are in buckets only). */
export const SUMMED = [...COUNTERS, 'revenue_cents', 'returned_cents', 'bid_cents'];
export const METRICS = [...COUNTERS, 'revenue', 'net_revenue', 'acceptance_rate', 'sell_rate', 'avg_price', 'avg_bid'];

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

/** The local calendar day (YYYY-MM-DD) of an instant in `tz`. */
export function localDay(at: Date, tz: string): string {
  const t = localTime(at, tz);
  return `${t.year}-${pad(t.month)}-${pad(t.day)}`;
}

/** The day `days` after (or before) a calendar day. */
export function addDays(day: string, days: number): string {
  return new Date(Date.parse(`${day}T00:00:00Z`) + days * 86_400_000).toISOString().slice(0, 10);
}

/** True for a day of the calendar written YYYY-MM-DD: not 2026-02-30, which Date.parse takes for 2 March. */
export function isCalendarDay(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const time = Date.parse(`${value}T00:00:00Z`);
  return !Number.isNaN(time) && new Date(time).toISOString().startsWith(value);
}

const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})?)?$/i;

/**
 * An ISO 8601 date or time as the instant it names, in UTC ISO form; null when it is none (a day
 * that is not on the calendar, as 2026-02-30, too). A time without an offset is UTC, as a date alone
 * is (Date.parse would take it in the process's own zone); a fraction is kept to the millisecond a
 * Date holds. The API's `since`/`until` and the CLI's times read the same string the same way.
 */
export function parseInstant(raw: string): string | null {
  const form = ISO_INSTANT.test(raw) ? raw.toUpperCase().replace(/(\.\d{3})\d+/, '$1') : null;
  const time = form === null ? Number.NaN : Date.parse(form.length > 10 && !/(Z|[+-]\d{2}:\d{2})$/.test(form) ? `${form}Z` : form);
  return Number.isNaN(time) || !isCalendarDay(raw.slice(0, 10)) ? null : new Date(time).toISOString();
}

const MINUTE = 60_000;
const HOUR = 3_600_000;

/** The wall clock of `tz` at an instant, to the minute, written as if it were UTC (comparable across offsets). */
function wallClock(at: number, tz: string): number {
  const t = localTime(new Date(at), tz);
  return Date.UTC(t.year, t.month - 1, t.day, t.hour, t.minute);
}

/**
 * The UTC instant at which local day `date` (YYYY-MM-DD) starts in `tz`: the first instant whose
 * wall clock reads that date. That is local midnight, or, on a day whose midnight a DST change
 * skips (America/Santiago 2026-09-06), the first local time after the jump (01:00). Searched, not
 * computed from an offset: walk whole UTC hours from 16 hours before (earlier than the midnight of
 * any zone) to the first whose wall clock has reached the date, then halve down to the minute
 * (every offset, and every change of one, is a whole number of minutes).
 */
export function startOfLocalDay(date: string, tz: string): Date {
  const midnight = Date.parse(`${date}T00:00:00Z`);
  let before = midnight - 16 * HOUR;
  while (wallClock(before + HOUR, tz) < midnight) before += HOUR;
  // wallClock(before) < midnight <= wallClock(after): the day starts in (before, after].
  let after = before + HOUR;
  while (after - before > MINUTE) {
    const middle = before + Math.floor((after - before) / 2 / MINUTE) * MINUTE;
    if (wallClock(middle, tz) < midnight) before = middle;
    else after = middle;
  }
  return new Date(after);
}

/**
 * The first UTC hour bucket (`2026-11-21T15`) of local day `date` in `tz`: the first hour that
 * starts on that day, as `dayOf` labels hours. Where the day starts off the hour (Asia/Kolkata,
 * +05:30), that is the next whole UTC hour; the hour holding the local midnight started the day before.
 */
export function firstHourOfLocalDay(date: string, tz: string): string {
  const start = startOfLocalDay(date, tz).getTime();
  return new Date(Math.ceil(start / HOUR) * HOUR).toISOString().slice(0, 13);
}

/**
 * Where the local day changes within [start, end), UTC hours as in the buckets: one step per local
 * day, each day's first hour bucket labelled with the day, exactly as `dayOf` reads each hour. With
 * `start` and `end` from `firstHourOfLocalDay`, the first step is the first day's and the last the last day's.
 */
export function daySteps(start: string, end: string, tz: string): Array<{ from: string; label: string }> {
  const days = new Map<string, string>();
  const steps: Array<{ from: string; label: string }> = [];
  for (let t = Date.parse(`${start}:00:00Z`); ; t += HOUR) {
    const hour = new Date(t).toISOString().slice(0, 13);
    if (hour >= end && steps.length > 0) break;
    const day = dayOf(hour, tz, days);
    if (steps.at(-1)?.label !== day) steps.push({ from: hour, label: day });
  }
  return steps;
}

const round2 = (n: number) => Math.round(n * 100) / 100;
const ratio = (a: number, b: number) => (b === 0 ? 0 : Math.round((a / b) * 10_000) / 10_000);

/** A report row: the group's dimensions, then every metric from the group's sums. */
export function reportRow(dims: ReportRow, sums: Readonly<Record<string, number>>): ReportRow {
  const row: ReportRow = { ...dims };
  for (const counter of COUNTERS) row[counter] = sums[counter] ?? 0;
  const revenue = (sums.revenue_cents ?? 0) / 100;
  const returnedRevenue = (sums.returned_cents ?? 0) / 100;
  row.revenue = round2(revenue);
  row.net_revenue = round2(revenue - returnedRevenue);
  row.acceptance_rate = ratio(sums.accepted ?? 0, sums.received ?? 0);
  row.sell_rate = ratio(sums.sold ?? 0, sums.accepted ?? 0);
  row.avg_price = (sums.sold ?? 0) === 0 ? 0 : round2(revenue / sums.sold!);
  row.avg_bid = (sums.bids ?? 0) === 0 ? 0 : round2((sums.bid_cents ?? 0) / 100 / sums.bids!);
  return row;
}

/**
 * The order in which a report's rows come, and page: by `s1` first when it is grouped on (it is read
 * along the lead views' index on it), then the other dimensions in the order asked.
 */
export function keyOrder(groupBy: readonly GroupBy[]): GroupBy[] {
  return groupBy.includes('s1') ? ['s1', ...groupBy.filter((d) => d !== 's1')] : [...groupBy];
}

/** Key order of the stores: part by part, null first, then strings by code point. */
export function compareKeys(a: ReadonlyArray<string | null>, b: ReadonlyArray<string | null>): number {
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    const [x, y] = [a[i] ?? null, b[i] ?? null];
    if (x === y) continue;
    if (x === null) return -1;
    if (y === null) return 1;
    return Buffer.compare(Buffer.from(x), Buffer.from(y));
  }
  return 0;
}

/**
 * The report over buckets held in memory: what the stores compute with `aggregate`, in the same
 * rows and order. The service never calls it (it would hold every bucket); it states the metrics
 * in one place, and tests check the stores against it.
 */
export function summarise(buckets: readonly ReportBucket[], groupBy: readonly GroupBy[], tz: string): ReportRow[] {
  const days = new Map<string, string>();
  const order = keyOrder(groupBy);
  const rows = new Map<string, { key: Array<string | null>; dims: ReportRow; sums: Record<string, number> }>();
  for (const bucket of buckets) {
    const dims: ReportRow = {};
    for (const dimension of groupBy) dims[dimension] = dimension === 'day' ? dayOf(bucket.hour, tz, days) : (bucket[dimension] as string | null);
    const key = order.map((d) => dims[d] as string | null);
    const id = JSON.stringify(key);
    let row = rows.get(id);
    if (!row) rows.set(id, (row = { key, dims, sums: {} }));
    for (const field of SUMMED) row.sums[field] = (row.sums[field] ?? 0) + Number(bucket[field] ?? 0);
  }
  return [...rows.values()].sort((a, b) => compareKeys(a.key, b.key)).map(({ dims, sums }) => reportRow(dims, sums));
}

export const csvHeader = (groupBy: readonly GroupBy[]): string => `${[...groupBy, ...METRICS].join(',')}\r\n`;

export function csvLine(row: ReportRow, groupBy: readonly GroupBy[]): string {
  const cell = (value: unknown) => {
    const text = value === null || value === undefined ? '' : String(value);
    // Quote what CSV needs quoted, and neutralise spreadsheet formulas in supplier-given values.
    const safe = /^[=+\-@\t\r]/.test(text) && typeof value === 'string' ? `'${text}` : text;
    return /[",\n\r]/.test(safe) ? `"${safe.replaceAll('"', '""')}"` : safe;
  };
  return `${[...groupBy, ...METRICS].map((c) => cell(row[c])).join(',')}\r\n`;
}

export function toCsv(rows: readonly ReportRow[], groupBy: readonly GroupBy[]): string {
  return csvHeader(groupBy) + rows.map((row) => csvLine(row, groupBy)).join('');
}

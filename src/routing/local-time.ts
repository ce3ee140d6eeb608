// Wall-clock time in a buyer's zone. Intl knows every DST rule, so no offset is ever computed here.
import { TwoGenerationCache } from '../two-generation-cache.js';
import { WEEKDAYS, type Weekday } from './config-schema.js';

export interface LocalTime {
  readonly year: number;
  readonly month: number;
  readonly day: number;
  readonly hour: number;
  readonly minute: number;
  readonly weekday: Weekday;
}

/**
 * The zones asked of lately. Bounded: a report's `tz` comes from its caller, who may spell one zone
 * in any mix of cases (each spelling its own entry, and a formatter's memory is outside the heap's
 * limit); the routing file's zones are far fewer than this and stay in.
 */
const ZONES_KEPT = 256;

const formatters = new TwoGenerationCache<string, Intl.DateTimeFormat>(ZONES_KEPT);

function formatter(tz: string): Intl.DateTimeFormat {
  let f = formatters.get(tz);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone: tz, hourCycle: 'h23',
      year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric',
    });
    formatters.set(tz, f);
  }
  return f;
}

/**
 * The last answer per zone, by UTC minute. Every zone's offset is a whole number of minutes, so one
 * UTC minute is one local minute everywhere and the answer is exact. formatToParts is slow, and
 * every post asks it for each buyer (caps and hours), mostly within the same minute.
 */
const lastByZone = new TwoGenerationCache<string, { minute: number; time: LocalTime }>(ZONES_KEPT);

/** How many zones' formatters are kept now (at most twice ZONES_KEPT). */
export function zonesKept(): number {
  return formatters.size;
}

export function localTime(now: Date, tz: string): LocalTime {
  const minute = Math.floor(now.getTime() / 60_000);
  const last = lastByZone.get(tz);
  if (last && last.minute === minute) return last.time;
  const time = computeLocalTime(now, tz);
  lastByZone.set(tz, { minute, time });
  return time;
}

function computeLocalTime(now: Date, tz: string): LocalTime {
  const parts: Partial<Record<Intl.DateTimeFormatPartTypes, number>> = {};
  for (const part of formatter(tz).formatToParts(now)) parts[part.type] = Number(part.value);
  const [year, month, day] = [parts.year ?? 0, parts.month ?? 1, parts.day ?? 1];
  return { year, month, day, hour: parts.hour ?? 0, minute: parts.minute ?? 0, weekday: weekdayOf(year, month, day) };
}

/** The weekday of a calendar date; the date is already local, so UTC arithmetic is exact. */
function weekdayOf(year: number, month: number, day: number): Weekday {
  return WEEKDAYS[(new Date(Date.UTC(year, month - 1, day)).getUTCDay() + 6) % 7]!;
}

const DAY_MS = 86_400_000;

/** ISO 8601 week: weeks start on Monday and belong to the year that holds their Thursday. */
export function isoWeek(year: number, month: number, day: number): { year: number; week: number } {
  const date = Date.UTC(year, month - 1, day);
  const mondayBased = (new Date(date).getUTCDay() + 6) % 7;
  const thursday = date + (3 - mondayBased) * DAY_MS;
  const weekYear = new Date(thursday).getUTCFullYear();
  const week = Math.floor((thursday - Date.UTC(weekYear, 0, 1)) / DAY_MS / 7) + 1;
  return { year: weekYear, week };
}

export function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

// Loads the routing file once at start: validated, defaults applied, and tagged
// with a version so every LeadRouted event says which rules decided it.
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import type { CheckName } from '../enrichment/check.js';
import { type ConfigProblem, MOST_PROBLEMS, findProblems, pathOf } from './config-checks.js';
import { repeatedKeys } from './repeated-keys.js';
import {
  type BucketEntry, type BuyerEntry, type CapPeriod, DEFAULTS, type DeliveryEntry, type HoursEntry, type PingEntry, type Requirement,
  type RoutingFile, type Strategy, type Weekday,
} from './config-schema.js';

interface Cap {
  readonly period: CapPeriod;
  readonly max: number;
  readonly tz: string;
}

export interface Hours {
  readonly tz: string;
  readonly days: readonly Weekday[];
  /** HH:MM, inclusive. */
  readonly start: string;
  /** HH:MM (or 24:00), exclusive; earlier than `start` for an overnight window. */
  readonly end: string;
}

type Delivery =
  | { readonly kind: 'pull' }
  | { readonly kind: 'webhook'; readonly url: string; readonly timeout_ms: number; readonly max_attempts: number; readonly secret_env: string | null };

/** How a buyer bids on pings; null: it does not bid. */
type PingBidding =
  | { readonly kind: 'static' }
  | {
    readonly kind: 'webhook';
    readonly url: string;
    readonly timeout_ms: number;
    readonly secret_env: string | null;
    /** A bid over this is recorded `above_max_bid`, never sold at (the file's, else DEFAULTS.max_bid). */
    readonly max_bid: number;
  };

export interface Buyer {
  readonly id: string;
  /** Falls back to the id, so reports always have something to show. */
  readonly name: string;
  readonly price: number;
  /** Lower goes first. */
  readonly priority: number;
  readonly active: boolean;
  /** null: every state. */
  readonly states: readonly string[] | null;
  /** null: every ZIP. */
  readonly zip_prefixes: readonly string[] | null;
  /** A check left out is not required. */
  readonly require: Readonly<Partial<Record<CheckName, Requirement>>>;
  readonly caps: readonly Cap[];
  /** null: any time. */
  readonly hours: Hours | null;
  readonly delivery: Delivery;
  readonly ping: PingBidding | null;
  readonly return_window_days: number;
  readonly return_reasons: readonly string[];
}

interface Bucket {
  readonly id: string;
  readonly default: boolean;
  readonly states: readonly string[] | null;
  readonly zip_prefixes: readonly string[] | null;
}

export interface RoutingConfig {
  readonly currency: string;
  readonly strategy: Strategy;
  readonly duplicate_window_days: number;
  /** Ping bids under this are ignored (0: none). */
  readonly min_bid: number;
  readonly buyers: readonly Buyer[];
  /** Exactly one has `default: true`. */
  readonly buckets: readonly Bucket[];
}

export interface LoadedRoutingConfig extends RoutingConfig {
  /** Where it came from, for messages. */
  readonly source: string;
  /** First 12 hex chars of the sha256 of the file (or of its canonical JSON). */
  readonly version: string;
}

export class RoutingConfigError extends Error {
  override readonly name = 'RoutingConfigError';

  constructor(
    readonly source: string,
    readonly problems: readonly ConfigProblem[],
  ) {
    super(problems.map((p) => (p.path ? `${source}: ${p.path}: ${p.message}` : `${source}: ${p.message}`)).join('\n'));
  }
}

/**
 * The largest routing file read. 600 buyers with every field set come to about 90 KB (with states
 * and caps in several zones, 140 KB), so this is seven times the largest file known. A file over it
 * is something else put in its place (a leads export, a log): tens of MB of JSON values parsed on
 * a heap capped at 128 MB abort the process, at start or on a reload that should have left the
 * routing in force. Not 4 MB: the densest 4 MB of JSON (1.4 million empty objects, or arrays nested
 * two million deep) takes 90-120 MB once parsed, which the heap of a running service cannot spare;
 * the densest 1 MB takes 20-30 MB.
 */
export const MAX_ROUTING_FILE_BYTES = 1024 * 1024;

export function loadRoutingConfig(path: string): LoadedRoutingConfig {
  const bytes = readAtMost(path, MAX_ROUTING_FILE_BYTES);
  let json: unknown;
  const text = textOf(bytes, path);
  // Parsed, a key given twice is its last value and nothing tells: it is found in the text. Before
  // parsing, so what the scan holds is gone by the time the parsed file is (a deep file needs both).
  const repeated = repeatedKeys(text, MOST_PROBLEMS + 1);
  try {
    json = JSON.parse(text);
  } catch (error) {
    throw new RoutingConfigError(path, [{ path: '', message: `invalid JSON: ${located((error as Error).message, text)}` }]);
  }
  const twice = repeated.map((r) => ({ path: pathOf(r.path), message: r.times === 2 ? 'given twice' : `given ${r.times} times` }));
  return resolve(json, path, versionOf(bytes), twice);
}

export function parseRoutingConfig(json: unknown, source: string): LoadedRoutingConfig {
  return resolve(json, source, versionOf(canonicalJson(json)));
}

function resolve(json: unknown, source: string, version: string, found: readonly ConfigProblem[] = []): LoadedRoutingConfig {
  const problems = findProblems(json, found);
  if (problems.length > 0) throw new RoutingConfigError(source, problems);
  const file = json as RoutingFile;
  const buckets = file.buckets?.length ? file.buckets.map(bucket) : [{ ...DEFAULTS.bucket, states: null, zip_prefixes: null }];
  return {
    source,
    version,
    currency: file.currency ?? DEFAULTS.currency,
    strategy: file.strategy ?? DEFAULTS.strategy,
    duplicate_window_days: file.duplicate_window_days ?? DEFAULTS.duplicate_window_days,
    min_bid: file.min_bid ?? 0,
    buyers: file.buyers.map(buyer),
    buckets,
  };
}

function buyer(entry: BuyerEntry): Buyer {
  return {
    id: entry.id,
    name: entry.name ?? entry.id,
    price: entry.price,
    priority: entry.priority ?? DEFAULTS.priority,
    active: entry.active ?? DEFAULTS.active,
    states: entry.states ?? null,
    zip_prefixes: entry.zip_prefixes ?? null,
    require: { ...entry.require },
    caps: (entry.caps ?? []).map((cap) => ({ period: cap.period, max: cap.max, tz: cap.tz ?? DEFAULTS.cap_tz })),
    hours: entry.hours ? hours(entry.hours) : null,
    delivery: delivery(entry.delivery),
    ping: ping(entry.ping),
    return_window_days: entry.return_window_days ?? DEFAULTS.return_window_days,
    return_reasons: entry.return_reasons ?? DEFAULTS.return_reasons,
  };
}

function hours(entry: HoursEntry): Hours {
  return { tz: entry.tz, days: entry.days ?? DEFAULTS.days, start: entry.start, end: entry.end };
}

function delivery(entry: DeliveryEntry | undefined): Delivery {
  if (entry?.kind !== 'webhook') return { kind: 'pull' };
  return {
    kind: 'webhook',
    url: entry.url,
    timeout_ms: entry.timeout_ms ?? DEFAULTS.timeout_ms,
    max_attempts: entry.max_attempts ?? DEFAULTS.max_attempts,
    secret_env: entry.secret_env ?? null,
  };
}

function ping(entry: PingEntry | undefined): PingBidding | null {
  if (!entry) return null;
  if (entry.kind === 'static') return { kind: 'static' };
  return {
    kind: 'webhook',
    url: entry.url,
    timeout_ms: entry.timeout_ms ?? DEFAULTS.ping_timeout_ms,
    secret_env: entry.secret_env ?? null,
    max_bid: entry.max_bid ?? DEFAULTS.max_bid,
  };
}

function bucket(entry: BucketEntry): Bucket {
  return { id: entry.id, default: entry.default ?? false, states: entry.states ?? null, zip_prefixes: entry.zip_prefixes ?? null };
}

/**
 * The file's bytes, refused when there are more than `limit`: by its size before anything is read,
 * and by what is read (at most limit+1 bytes) for a file that grows meanwhile or has no size (a
 * pipe, a device), so an oversized file never takes more memory than the limit.
 */
function readAtMost(path: string, limit: number): Buffer {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const size = fstatSync(fd).size;
    if (size > limit) throw tooLarge(path, size, limit);
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(64 * 1024, limit + 1 - total));
      const read = readSync(fd, chunk, 0, chunk.length, null);
      if (read === 0) break;
      chunks.push(chunk.subarray(0, read));
      total += read;
      if (total > limit) throw tooLarge(path, null, limit);
    }
    return Buffer.concat(chunks, total);
  } catch (error) {
    if (error instanceof RoutingConfigError) throw error;
    throw new RoutingConfigError(path, [{ path: '', message: `cannot read the file: ${(error as Error).message}` }]);
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

const MB = 1024 * 1024;

/** `size` null: over the limit by what was read, its whole size unknown. */
function tooLarge(path: string, size: number | null, limit: number): RoutingConfigError {
  // A file just over the limit would read "1.0 MB" beside "at most 1 MB": then its bytes are given.
  const shown = size === null ? `over ${limit / MB} MB` : (size / MB).toFixed(1) === (limit / MB).toFixed(1) ? `${size} bytes` : `${(size / MB).toFixed(1)} MB`;
  const bytes = size !== null && shown.endsWith('bytes') ? ` (${limit} bytes)` : '';
  return new RoutingConfigError(path, [{ path: '', message: `is ${shown}; a routing file is at most ${limit / MB} MB${bytes}` }]);
}

function versionOf(content: Buffer | string): string {
  return createHash('sha256').update(content).digest('hex').slice(0, 12);
}

/** Key order and whitespace do not change the rules, so they do not change the version either. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const fields = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${fields.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/**
 * The file's text, held to UTF-8 as every other input is: a byte that is no UTF-8 refuses the file
 * rather than turning into U+FFFD in a buyer's name. An editor's UTF-8 byte-order mark is dropped.
 */
function textOf(bytes: Buffer, path: string): string {
  // Windows Notepad's "Unicode" is UTF-16, told by its byte-order mark: say so, not which byte failed.
  if ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)) {
    throw new RoutingConfigError(path, [{ path: '', message: 'the file is UTF-16: save it as UTF-8' }]);
  }
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    const where = lineAndColumn(textBeforeBadByte(bytes));
    throw new RoutingConfigError(path, [{ path: '', message: `not UTF-8 at ${where} (a byte there is no UTF-8 character): save the file as UTF-8` }]);
  }
}

/**
 * The text before the first byte sequence that is no UTF-8. A prefix decoded as a stream holds back
 * a sequence cut at its end instead of failing on it, so the prefixes that decode get no longer
 * once one fails: the longest is found by halving, and its text stops where the bad sequence starts.
 */
function textBeforeBadByte(bytes: Buffer): string {
  const decodes = (length: number) => {
    try {
      new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(0, length), { stream: true });
      return true;
    } catch {
      return false;
    }
  };
  let [good, bad] = [0, bytes.length + 1];
  while (bad - good > 1) {
    const middle = Math.floor((good + bad) / 2);
    if (decodes(middle)) good = middle;
    else bad = middle;
  }
  return new TextDecoder('utf-8').decode(bytes.subarray(0, good), { stream: true });
}

/** A parse error with its line and column, which an editor goes to: Node 20 gives only the offset into the file. */
function located(message: string, text: string): string {
  const unexpected = unexpectedToken(message, text);
  if (unexpected) return `${unexpected.message} (${lineAndColumn(text.slice(0, unexpected.at))})`;
  const at = /at position (\d+)/.exec(message);
  if (!at || /\bline \d+/.test(message)) return message;
  return `${message} (${lineAndColumn(text.slice(0, Number(at[1])))})`;
}

/**
 * Node's "Unexpected token" quotes up to ten characters of the file on each side of it, which in a
 * leads export copied over the routing file are a consumer's e-mail or phone: the message keeps
 * the token and loses the quote, whose place in the file gives the token's (V8 quotes the whole
 * text when it is short, the first characters up to ten past the token, the last from ten before
 * it, or the twenty around it).
 */
function unexpectedToken(message: string, text: string): { message: string; at: number } | null {
  const parts = /^(Unexpected token .+?), (\.\.\.)?"([\s\S]*)"(\.\.\.)? is not valid JSON$/.exec(message);
  if (!parts) return null;
  const [, said, before, quote, after] = parts as unknown as [string, string, string | undefined, string, string | undefined];
  const token = /^Unexpected token '([\s\S]*)'$/.exec(said)?.[1] ?? '';
  const at = before && after ? text.indexOf(quote) + 10 : after ? quote.length - 10 : before ? text.length - quote.length + 10 : Math.max(0, text.indexOf(token));
  return { message: said, at: Math.min(Math.max(at, 0), text.length) };
}

/** Where the text after `before` starts, as an editor counts: lines and columns from 1. */
function lineAndColumn(before: string): string {
  return `line ${before.split('\n').length}, column ${before.length - before.lastIndexOf('\n')}`;
}

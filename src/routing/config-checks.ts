// Turns a routing file into the list of everything wrong with it, each problem tied to the field an
// operator has to edit. Everything is reported in one go so a broken deploy takes one fix, not ten.
import type { ErrorObject } from 'ajv';
import { DEFAULTS, validateRoutingFile } from './config-schema.js';

export interface ConfigProblem {
  /** `buyers[1].caps[0].tz`; empty for a problem with the file as a whole. */
  readonly path: string;
  readonly message: string;
}

type Json = Record<string, unknown>;

export function findProblems(json: unknown): ConfigProblem[] {
  const problems = validateRoutingFile(json) ? [] : (validateRoutingFile.errors ?? []).map(describe);
  problems.push(...nullFields(json, ''), ...duplicateIds(json, 'buyers', 'buyer'), ...duplicateIds(json, 'buckets', 'bucket'));
  problems.push(...unknownCurrency(json), ...bucketDefaults(json), ...emptyWindows(json), ...repeatedCapPeriods(json), ...bidCeilings(json));
  return firstPerField(problems);
}

// One line per field: the first problem is the one to fix; ajv's follow-ups (a missing
// discriminator after a missing `kind`, a null that also fails its enum) only add noise.
function firstPerField(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => !seen.has(p.path) && seen.add(p.path));
}

function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((path, s) => (/^\d+$/.test(s) ? `${path}[${s}]` : path ? `${path}.${s}` : s), '');
}

function join(path: string, field: string): string {
  return path ? `${path}.${field}` : field;
}

function show(value: unknown): string {
  return typeof value === 'string' ? `'${value}'` : JSON.stringify(value);
}

const HINTED = new Set(['pattern', 'format', 'enum', 'multipleOf', 'maximum']);

function describe(error: ErrorObject): ConfigProblem {
  const path = fieldPath(error.instancePath);
  const params = error.params as Json;
  switch (error.keyword) {
    case 'required':
      return { path: join(path, String(params.missingProperty)), message: 'is required' };
    case 'additionalProperties':
      return { path: join(path, String(params.additionalProperty)), message: 'unknown field' };
    case 'discriminator': {
      const tag = (error.data as Json)[String(params.tag)];
      const kinds = path.endsWith('.ping') ? "'static' or 'webhook'" : "'pull' or 'webhook'";
      return { path: join(path, String(params.tag)), message: tag === undefined ? 'is required' : `must be ${kinds}, got ${show(tag)}` };
    }
    case 'type':
      return { path, message: `must be ${/^[aeiou]/.test(String(params.type)) ? 'an' : 'a'} ${String(params.type)}, got ${show(error.data)}` };
  }
  const hint = (error.parentSchema as Json | undefined)?.hint;
  if (HINTED.has(error.keyword) && typeof hint === 'string') {
    return { path, message: hint.replace('{value}', show(error.data)) };
  }
  return { path, message: error.message ?? error.keyword };
}

// The schema has to mark optional fields `nullable` for ajv's typing, but no field means anything
// by null: `"active": null` silently becoming `true` is exactly the typo this check exists for.
function nullFields(value: unknown, path: string): ConfigProblem[] {
  if (value === null) return path ? [{ path, message: 'must not be null (leave the field out instead)' }] : [];
  if (Array.isArray(value)) return value.flatMap((v, i) => nullFields(v, `${path}[${i}]`));
  if (typeof value === 'object') return Object.entries(value).flatMap(([k, v]) => nullFields(v, join(path, k)));
  return [];
}

/** The entries of `json[list]` that are objects, with their index; tolerant of a broken file. */
function entries(json: unknown, list: string): Array<[number, Json]> {
  const items = isObject(json) ? json[list] : undefined;
  if (!Array.isArray(items)) return [];
  return items.flatMap((item: unknown, i): Array<[number, Json]> => (isObject(item) ? [[i, item]] : []));
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function duplicateIds(json: unknown, list: string, noun: string): ConfigProblem[] {
  const first = new Map<unknown, number>();
  const problems: ConfigProblem[] = [];
  for (const [i, item] of entries(json, list)) {
    if (typeof item.id !== 'string') continue;
    const earlier = first.get(item.id);
    if (earlier === undefined) first.set(item.id, i);
    else problems.push({ path: `${list}[${i}].id`, message: `duplicate ${noun} id ${show(item.id)} (also ${list}[${earlier}])` });
  }
  return problems;
}

/**
 * The currencies Node's Intl knows, which are ISO 4217's. Three capital letters are not enough: a
 * typo (`UDS`) would price every sale in no currency, and reports refuse to add it to the real one.
 */
const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

// Only a value of the right shape: one that is not 3 upper-case letters has the schema's message.
function unknownCurrency(json: unknown): ConfigProblem[] {
  const currency = isObject(json) ? json.currency : undefined;
  if (typeof currency !== 'string' || !/^[A-Z]{3}$/.test(currency) || CURRENCIES.has(currency)) return [];
  return [{ path: 'currency', message: `must be an ISO 4217 currency code such as USD, EUR or CAD; ${show(currency)} is none` }];
}

function bucketDefaults(json: unknown): ConfigProblem[] {
  const buckets = entries(json, 'buckets');
  const defaults = buckets.filter(([, b]) => b.default === true);
  const problems: ConfigProblem[] = [];
  if (buckets.length > 0 && defaults.length === 0) {
    problems.push({ path: 'buckets', message: 'no bucket is marked "default": true; exactly one must be' });
  }
  const [firstDefault, ...extra] = defaults;
  for (const [i] of extra) {
    problems.push({ path: `buckets[${i}].default`, message: `only one bucket may be the default (buckets[${firstDefault![0]}] already is)` });
  }
  // The default bucket takes whatever no other bucket matched, so a filter on it would be ignored.
  for (const [i, b] of defaults) {
    for (const filter of ['states', 'zip_prefixes'] as const) {
      if (b[filter] !== undefined) problems.push({ path: `buckets[${i}].${filter}`, message: 'the default bucket takes every lead no other bucket matched; it cannot have filters' });
    }
  }
  return problems;
}

function emptyWindows(json: unknown): ConfigProblem[] {
  return entries(json, 'buyers').flatMap(([i, buyer]) => {
    const hours = buyer.hours;
    const empty = isObject(hours) && typeof hours.start === 'string' && hours.start === hours.end;
    return empty ? [{ path: `buyers[${i}].hours.end`, message: `must differ from start ${show(hours.start)} (use 00:00-24:00 for the whole day)` }] : [];
  });
}

// Two caps of one period in one zone count the same sales over the same window: the lower max
// always decides and the other reads as if it counted. (In two zones they are two windows, each
// counted on its own, and both can bind.) One zone has many spellings (US/Pacific, PST8PDT and
// america/los_angeles are America/Los_Angeles; utc and Etc/UTC are UTC), so zones are compared as
// Intl resolves them.
function repeatedCapPeriods(json: unknown): ConfigProblem[] {
  return entries(json, 'buyers').flatMap(([i, buyer]) => {
    const first = new Map<string, { index: number; tz: string }>();
    return entries(buyer, 'caps').flatMap(([j, cap]): ConfigProblem[] => {
      if (typeof cap.period !== 'string') return [];
      const tz = typeof cap.tz === 'string' ? cap.tz : DEFAULTS.cap_tz;
      const zone = canonicalZone(tz);
      const window = `${cap.period} ${zone}`;
      const earlier = first.get(window);
      if (earlier === undefined) {
        first.set(window, { index: j, tz });
        return [];
      }
      const where = earlier.tz === tz ? `in ${show(tz)} (also buyers[${i}].caps[${earlier.index}])` : `in ${show(tz)} (also buyers[${i}].caps[${earlier.index}], in ${show(earlier.tz)}: both are ${zone})`;
      return [{ path: `buyers[${i}].caps[${j}].period`, message: `a second ${show(cap.period)} cap ${where}; only the lower max would ever count` }];
    });
  });
}

/** The zone Intl resolves a name to; an unknown name is itself (the schema reports it). */
function canonicalZone(tz: string): string {
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: tz }).resolvedOptions().timeZone;
  } catch {
    return tz;
  }
}

// A webhook bidder's ceiling under the file's floor would refuse every bid it can make: each
// answer is either below min_bid or above max_bid.
function bidCeilings(json: unknown): ConfigProblem[] {
  const minBid = isObject(json) && typeof json.min_bid === 'number' ? json.min_bid : 0;
  return entries(json, 'buyers').flatMap(([i, buyer]): ConfigProblem[] => {
    const ping = buyer.ping;
    if (!isObject(ping) || ping.kind !== 'webhook') return [];
    const path = `buyers[${i}].ping.max_bid`;
    if (ping.max_bid === undefined) {
      return minBid > DEFAULTS.max_bid ? [{ path, message: `is required when min_bid ${show(minBid)} is over the ceiling a bid has without one (${DEFAULTS.max_bid})` }] : [];
    }
    return typeof ping.max_bid === 'number' && ping.max_bid < minBid ? [{ path, message: `must be at least min_bid ${show(minBid)}, got ${show(ping.max_bid)}` }] : [];
  });
}

// Turns a routing file into the list of everything wrong with it, each problem tied to the field an
// operator has to edit. Everything is reported in one go so a broken deploy takes one fix, not ten;
// but a file that is something else (a leads export, a log) can hold a problem per value, hundreds
// of thousands of them, so the list stops at MOST_PROBLEMS and nothing holds all of them at once.
import type { ErrorObject } from 'ajv';
import { DEFAULTS, FIELD_NAMES, isRoutingFile, validateRoutingFile } from './config-schema.js';

export interface ConfigProblem {
  /** `buyers[1].caps[0].tz`; empty for a problem with the file as a whole. */
  readonly path: string;
  readonly message: string;
}

type Json = Record<string, unknown>;

/** More than a hand edit gets wrong; past it the list says so rather than growing with the file. */
export const MOST_PROBLEMS = 50;

/** `found`: problems the text showed before it was parsed (a key given twice), listed first. */
export function findProblems(json: unknown, found: readonly ConfigProblem[] = []): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  // One line per field: the first problem is the one to fix; ajv's follow-ups (a missing
  // discriminator after a missing `kind`, a null that also fails its enum) only add noise.
  const seen = new Set<string>();
  for (const problem of chain(found, allProblems(json))) {
    if (seen.has(problem.path)) continue;
    seen.add(problem.path);
    if (problems.length === MOST_PROBLEMS) {
      problems.push({ path: '', message: `and more: only the first ${MOST_PROBLEMS} problems are listed` });
      break;
    }
    problems.push(problem);
  }
  return problems;
}

function* chain<T>(...lists: Array<Iterable<T>>): Generator<T> {
  for (const list of lists) yield* list;
}

function* allProblems(json: unknown): Generator<ConfigProblem> {
  if (!isRoutingFile(json)) yield* schemaProblems(json);
  yield* nullFields(json);
  yield* duplicateIds(json, 'buyers', 'buyer');
  yield* duplicateIds(json, 'buckets', 'bucket');
  yield* unknownCurrency(json);
  yield* bucketDefaults(json);
  yield* emptyWindows(json);
  yield* repeatedCapPeriods(json);
  yield* bidCeilings(json);
}

/**
 * The schema's errors, found a piece at a time: the file without its lists, then each buyer and
 * bucket on its own (a valid one costs nothing), each piece cut down to what the schema can look
 * at (see `pruned`). ajv lists every error of what it is given, and a file of a million wrong
 * values would otherwise be a million errors held at once.
 */
function* schemaProblems(json: unknown): Generator<ConfigProblem> {
  const firstError = isRoutingFile.errors?.[0];
  if (!isObject(json)) {
    yield* validated(json, (path) => path);
    return;
  }
  const top: Json = { ...json };
  for (const list of LISTS) if (Array.isArray(top[list])) top[list] = [];
  yield* validated(top, (path) => path);
  for (const list of LISTS) {
    const items = json[list];
    if (!Array.isArray(items)) continue;
    for (let i = 0; i < items.length; i++) {
      const piece = list === 'buyers' ? { buyers: [items[i]] } : { buyers: [], buckets: [items[i]] };
      if (isRoutingFile(piece)) continue;
      yield* validated(piece, (path) => path.replace(`/${list}/0`, `/${list}/${i}`));
    }
  }
  // A mistake beyond what a piece keeps (the 300th ZIP prefix of one buyer) is still reported.
  if (firstError) yield describe(firstError, (path) => path);
}

const LISTS = ['buyers', 'buckets'] as const;

function* validated(piece: unknown, at: (instancePath: string) => string): Generator<ConfigProblem> {
  if (validateRoutingFile(pruned(piece, 0))) return;
  // A value is described as the file has it (an array of 300000), not as the pruned piece does.
  for (const error of validateRoutingFile.errors ?? []) yield describe({ ...error, data: valueAt(piece, error.instancePath) }, at);
}

/** The value at a JSON pointer ajv gives (`/buyers/0/states`). */
function valueAt(value: unknown, pointer: string): unknown {
  for (const segment of pointer.split('/').slice(1)) {
    if (typeof value !== 'object' || value === null) return undefined;
    value = (value as Json)[segment.replaceAll('~1', '/').replaceAll('~0', '~')];
  }
  return value;
}

/** Items of a list and unknown fields of an object kept, and levels of nesting: far more than any routing file has. */
const PRUNED_ITEMS = 200;
const PRUNED_DEPTH = 8;

/**
 * The value with each list cut to its first PRUNED_ITEMS items, each object to its known fields and
 * its first PRUNED_ITEMS others, and nothing below PRUNED_DEPTH (where the schema never looks), so
 * the errors of one piece are bounded however much the file holds.
 */
function pruned(value: unknown, depth: number): unknown {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return depth >= PRUNED_DEPTH ? [] : value.slice(0, PRUNED_ITEMS).map((v) => pruned(v, depth + 1));
  if (depth >= PRUNED_DEPTH) return {};
  const kept: Json = {};
  let others = 0;
  for (const key in value) {
    if (!Object.hasOwn(value, key)) continue;
    if (!FIELD_NAMES.has(key) && others++ >= PRUNED_ITEMS) continue;
    kept[key] = pruned((value as Json)[key], depth + 1);
  }
  return kept;
}

/** `['buyers', 0, 'active']` as `buyers[0].active`. */
export function pathOf(segments: ReadonlyArray<string | number>): string {
  return segments.reduce<string>((path, s) => (typeof s === 'number' ? `${path}[${s}]` : join(path, s)), '');
}

function fieldPath(pointer: string): string {
  return pointer
    .split('/')
    .slice(1)
    .map((s) => s.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce((path, s) => (/^\d+$/.test(s) ? `${path}[${s}]` : join(path, s)), '');
}

function join(path: string, field: string): string {
  const name = FIELD_NAME.test(field) ? field : '*';
  return path ? `${path}.${name}` : name;
}

/**
 * A member name that reads as a field name (as a request body's, src/leads/outcome.ts): any other
 * (an e-mail, a phone number, an export keyed by either) may be a consumer's data, and is `*`.
 */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/**
 * A value a message may echo: a short code with nothing of a person or a secret about it (`usd`,
 * `Texas`, `Mars/Olympus`, `8:00`). Not an e-mail (no @), a phone number or a ZIP (5 digits or
 * more), nor a name with a space; anything else is said by its kind and length.
 */
function shown(value: unknown): string {
  if (typeof value === 'number') return Number.isFinite(value) ? String(value) : 'a number too large to hold';
  if (typeof value === 'string' && /^[A-Za-z0-9_:./+-]{1,32}$/.test(value) && (value.match(/[0-9]/g)?.length ?? 0) < 5) return `'${value}'`;
  return kindOf(value);
}

/** What a value is, never what it holds, and as short however large it is. */
function kindOf(value: unknown): string {
  if (Array.isArray(value)) return value.length === 0 ? 'an empty array' : `an array of ${value.length}`;
  if (typeof value === 'string') return value === '' ? 'an empty string' : `a string of ${value.length} ${value.length === 1 ? 'character' : 'characters'}`;
  if (typeof value === 'object' && value !== null) {
    const keys = Object.keys(value).length;
    return keys === 0 ? 'an empty object' : `an object of ${keys} ${keys === 1 ? 'key' : 'keys'}`;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? 'a number' : 'a number too large to hold';
  return String(value);
}

/** A string by the first character it has that `chars` (a character class) does not take, and where. */
function charsKind(value: unknown, chars: string): string {
  if (typeof value !== 'string') return kindOf(value);
  const allowed = new RegExp(`^${chars}$`);
  const at = [...value].findIndex((c) => !allowed.test(c));
  if (at < 0) return kindOf(value);
  const c = [...value][at]!;
  const kind = /[A-Z]/.test(c) ? 'an upper-case letter' : /[a-z]/.test(c) ? 'a lower-case letter' : c === ' ' ? 'a space' : /[!-~]/.test(c) ? `'${c}'` : 'a character outside ASCII';
  return `${kindOf(value)} with ${kind} at character ${at + 1}`;
}

/** A URL's scheme says what is wrong with it and nothing of what it holds (its path or query may carry a token). */
function urlKind(value: unknown): string {
  if (typeof value !== 'string' || !URL.canParse(value)) return `${kindOf(value)} that is no URL`;
  const scheme = new URL(value).protocol;
  return /^[a-z][a-z0-9+.-]{0,9}:$/.test(scheme) ? `an ${scheme}// URL` : 'a URL of another scheme';
}

const HINTED = new Set(['pattern', 'format', 'enum', 'multipleOf', 'maximum']);

function describe(error: ErrorObject, at: (instancePath: string) => string): ConfigProblem {
  const path = fieldPath(at(error.instancePath));
  const params = error.params as Json;
  switch (error.keyword) {
    case 'required':
      return { path: join(path, String(params.missingProperty)), message: 'is required' };
    case 'additionalProperties': {
      const name = String(params.additionalProperty);
      return { path: join(path, name), message: FIELD_NAME.test(name) ? 'unknown field' : 'unknown field, named with other characters than letters, digits, _ and - (its name is not repeated here)' };
    }
    case 'discriminator': {
      const tag = (error.data as Json)[String(params.tag)];
      const kinds = path.endsWith('.ping') ? "'static' or 'webhook'" : "'pull' or 'webhook'";
      return { path: join(path, String(params.tag)), message: tag === undefined ? 'is required' : `must be ${kinds}, got ${shown(tag)}` };
    }
    case 'type': {
      // A number where an integer goes is shown (1.5): it is what is wrong. Any other value is
      // said by its kind: what is wrong is its type, and a pasted file can hold anything.
      const fraction = params.type === 'integer' && typeof error.data === 'number' && Number.isFinite(error.data);
      return { path, message: `must be ${/^[aeiou]/.test(String(params.type)) ? 'an' : 'a'} ${String(params.type)}, got ${fraction ? String(error.data) : kindOf(error.data)}` };
    }
  }
  const hint = (error.parentSchema as Json | undefined)?.hint;
  if (HINTED.has(error.keyword) && typeof hint === 'string') {
    const chars = (error.parentSchema as Json).chars;
    const what = error.keyword === 'format' && params.format === 'https-url' ? urlKind(error.data) : typeof chars === 'string' ? charsKind(error.data, chars) : kindOf(error.data);
    return { path, message: hint.replace('{value}', shown(error.data)).replace('{what}', what) };
  }
  return { path, message: error.message ?? error.keyword };
}

// The schema has to mark optional fields `nullable` for ajv's typing, but no field means anything
// by null: `"active": null` silently becoming `true` is exactly the typo this check exists for.
// Walked with a stack of its own, not by recursion, and not below PRUNED_DEPTH (no field is that
// deep): a file nested thousands of levels deep must not overflow the call stack.
function* nullFields(json: unknown): Generator<ConfigProblem> {
  const stack: Array<{ readonly path: string; readonly depth: number; readonly children: Iterator<[string, unknown]> }> = [];
  const visit = function* (value: unknown, path: string, depth: number): Generator<ConfigProblem> {
    if (value === null && path) yield { path, message: 'must not be null (leave the field out instead)' };
    if (typeof value === 'object' && value !== null && depth < PRUNED_DEPTH) stack.push({ path, depth, children: childrenOf(value) });
  };
  yield* visit(json, '', 0);
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const next = top.children.next();
    if (next.done) stack.pop();
    else yield* visit(next.value[1], next.value[0].startsWith('[') ? `${top.path}${next.value[0]}` : join(top.path, next.value[0]), top.depth + 1);
  }
}

/** An object's fields or a list's items, each with its path segment, one at a time. */
function* childrenOf(value: object): Generator<[string, unknown]> {
  if (Array.isArray(value)) for (let i = 0; i < value.length; i++) yield [`[${i}]`, value[i]];
  else for (const key in value) if (Object.hasOwn(value, key)) yield [key, (value as Json)[key]];
}

/** The entries of `json[list]` that are objects, with their index; tolerant of a broken file. */
function* entries(json: unknown, list: string): Generator<[number, Json]> {
  const items = isObject(json) ? json[list] : undefined;
  if (!Array.isArray(items)) return;
  for (let i = 0; i < items.length; i++) if (isObject(items[i])) yield [i, items[i] as Json];
}

function isObject(value: unknown): value is Json {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function* duplicateIds(json: unknown, list: string, noun: string): Generator<ConfigProblem> {
  const first = new Map<unknown, number>();
  for (const [i, item] of entries(json, list)) {
    if (typeof item.id !== 'string') continue;
    const earlier = first.get(item.id);
    if (earlier === undefined) first.set(item.id, i);
    else yield { path: `${list}[${i}].id`, message: `duplicate ${noun} id (the same as ${list}[${earlier}].id)` };
  }
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
  return [{ path: 'currency', message: `must be an ISO 4217 currency code such as USD, EUR or CAD; ${shown(currency)} is none` }];
}

function bucketDefaults(json: unknown): ConfigProblem[] {
  const buckets = [...entries(json, 'buckets')];
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

function* emptyWindows(json: unknown): Generator<ConfigProblem> {
  for (const [i, buyer] of entries(json, 'buyers')) {
    const hours = buyer.hours;
    const empty = isObject(hours) && typeof hours.start === 'string' && hours.start === hours.end;
    if (empty) yield { path: `buyers[${i}].hours.end`, message: `must differ from start ${shown(hours.start)} (use 00:00-24:00 for the whole day)` };
  }
}

// Two caps of one period in one zone count the same sales over the same window: the lower max
// always decides and the other reads as if it counted. (In two zones they are two windows, each
// counted on its own, and both can bind.) One zone has many spellings (US/Pacific, PST8PDT and
// america/los_angeles are America/Los_Angeles; utc and Etc/UTC are UTC), so zones are compared as
// Intl resolves them.
function* repeatedCapPeriods(json: unknown): Generator<ConfigProblem> {
  for (const [i, buyer] of entries(json, 'buyers')) {
    const first = new Map<string, { index: number; tz: string }>();
    for (const [j, cap] of entries(buyer, 'caps')) {
      if (typeof cap.period !== 'string') continue;
      const tz = typeof cap.tz === 'string' ? cap.tz : DEFAULTS.cap_tz;
      const zone = canonicalZone(tz);
      const window = `${cap.period} ${zone}`;
      const earlier = first.get(window);
      if (earlier === undefined) {
        first.set(window, { index: j, tz });
        continue;
      }
      const where = earlier.tz === tz ? `in ${shown(tz)} (also buyers[${i}].caps[${earlier.index}])` : `in ${shown(tz)} (also buyers[${i}].caps[${earlier.index}], in ${shown(earlier.tz)}: both are ${zone})`;
      yield { path: `buyers[${i}].caps[${j}].period`, message: `a second ${shown(cap.period)} cap ${where}; only the lower max would ever count` };
    }
  }
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
function* bidCeilings(json: unknown): Generator<ConfigProblem> {
  const minBid = isObject(json) && typeof json.min_bid === 'number' ? json.min_bid : 0;
  for (const [i, buyer] of entries(json, 'buyers')) {
    const ping = buyer.ping;
    if (!isObject(ping) || ping.kind !== 'webhook') continue;
    const path = `buyers[${i}].ping.max_bid`;
    if (ping.max_bid === undefined) {
      if (minBid > DEFAULTS.max_bid) yield { path, message: `is required when min_bid ${shown(minBid)} is over the ceiling a bid has without one (${DEFAULTS.max_bid})` };
    } else if (typeof ping.max_bid === 'number' && ping.max_bid < minBid) {
      yield { path, message: `must be at least min_bid ${shown(minBid)}, got ${shown(ping.max_bid)}` };
    }
  }
}

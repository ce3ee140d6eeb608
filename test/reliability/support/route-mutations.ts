// Requests made from the documented ones by changing one thing at a time, or a few: a body member
// removed, nulled or given a value of another JSON type, a query parameter broken, a path
// parameter out of range, a header mangled. Everything is derived from the OpenAPI document (its
// paths, methods, parameters and request examples), so a route added to it is fuzzed too.
//
// Bodies are written as JSON text member by member, each value raw, so that values JSON.stringify
// cannot write are sent as they are: -0, 1e400, 1e-400, 2^53+1, a lone surrogate escaped as \ud800,
// and a member given twice.

import { Rng } from '../../post-lead/helpers.js';

type Json = Record<string, any>;

export interface Operation {
  readonly method: string;
  readonly template: string;
  readonly pathParams: readonly string[];
  readonly query: readonly string[];
  /** The documented request body, as raw JSON text per member; undefined when the route takes none. */
  readonly example: ReadonlyArray<readonly [string, string]> | undefined;
}

export interface Sent {
  readonly kind: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[]>;
  readonly body?: string | Buffer;
  readonly operation?: Operation;
}

/** What the fuzzer knows of the service's data: ids and cursors that are real, and whose they are. */
export interface Known {
  readonly keys: readonly (string | undefined)[];
  /** An admin key: admin may do everything, so its requests reach every route's validation. */
  readonly admin: string;
  readonly leadIds: readonly number[];
  readonly erasureIds: readonly string[];
  /** Real `next_cursor`s: of which list route, given to which key. */
  readonly cursors: ReadonlyArray<{ readonly template: string; readonly key: string; readonly cursor: string }>;
  /** A consumer's e-mail and mobile never sent before: a body that names one then sells rather than being a duplicate. */
  readonly freshContact: () => { readonly email: string; readonly mobile: string };
}

export function operationsOf(doc: Json): Operation[] {
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) {
      if (!(operation as Json)?.responses) continue;
      const parameters = ((operation as Json).parameters ?? []) as Json[];
      const query = parameters.filter((p) => p.in === 'query').map((p) => p.name as string);
      const pathParams = [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      const example = (Object.values(((operation as Json).requestBody?.content ?? {}) as Json)[0] as Json | undefined)?.example as Json | undefined;
      operations.push({
        method: method.toUpperCase(),
        template,
        pathParams,
        query,
        example: example === undefined ? undefined : Object.entries(example).map(([name, value]) => [name, JSON.stringify(value)] as const),
      });
    }
  }
  return operations;
}

const raw = (text: string) => text;
const big = (n: number) => JSON.stringify('x'.repeat(n));

/** Values for a member, as JSON text: every JSON type, edge numbers, edge strings, wrong shapes. */
const VALUES: readonly string[] = [
  'null', 'true', 'false', '0', '-0', '-1', '1.5', '1e400', '-1e400', '1e-400', '9007199254740993', '1e21', '""', '" "', '"NaN"', '"Infinity"',
  '[]', '{}', '[null]', '["a","b"]', '{"a":1}', '{"__proto__":{"x":1}}', big(300), big(5000), big(60_000),
  raw('"\\ud800"'), raw('"a\\udc00b"'), raw('"\\u0000"'), raw('"a\\u0000b"'), '"\u200f"', '"\u202eevil"', '"😀"', '"e\u0301"',
  `"${'a' + '\u0301'.repeat(500)}"`, '"\ufeff"', '"\u2028"', '"\t"', '"\\n"', '"ＡＢＣ"', '"<script>"', "\"' OR 1=1 --\"",
  '[' .repeat(200) + ']'.repeat(200), '{"a":'.repeat(200) + '1' + '}'.repeat(200), '"1"', '"true"', '"2026-02-30"',
];

/** Decoded strings for query and path values, sent percent-encoded. */
const QUERY_VALUES = [
  '', ' ', '0', '-1', '-0', '1.5', '1e400', '99999999999999999999', '9007199254740993', 'NaN', 'null', 'true', '[]', '{}', '__proto__',
  '\u0000', '\u200f', '\u202e', '😀', 'e\u0301', 'a'.repeat(5000), '2026-02-30', '2026-11-27T25:00:00Z', '2026-11-27', 'Europe/Nowhere',
  'day,day', 'sid,', ',', 'SOLD', 'sold', 'pending', 'return', 'only', '../x', "' OR 1=1 --",
];
/** Put into a query or path as they are: broken or tricky percent-encoding. */
const RAW_QUERY = ['%', '%zz', '%E0%A4%A', '%ED%A0%80', '%00', '%C0%AF', '%2F', '%26', '%3D', '+', '%20%20', '%FF%FE'];
const PATH_VALUES = [
  '-1', '0', '00', '007', '1.0', '1e3', '0x10', '99999999999999999999', '9007199254740993', 'abc', '%20', '%2F', '..', '.', '%2e%2e', '%2e%2e%2f',
  '..%2F..%2Fpackage.json', '%00', '%', '%zz', '%ED%A0%80', encodeURIComponent('😀'), 'a'.repeat(3000), '1%2F2', '%252F',
];
const CONTENT_TYPES = [
  undefined, '', 'text/plain', 'application/JSON', 'application/json; charset=latin1', 'application/json; charset="utf-8"', 'application/json;charset=UTF-16',
  'application/jsonx', 'application/json-patch+json', 'application/json, text/plain', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', ';;;', 'application/json; charset',
];
const ACCEPTS = ['', 'text/csv', 'application/xml', '*/*', 'text/csv;q=0', 'text/csv;q=0.1, application/json', ';;;', 'text/*', 'application/json;q=0'];
const IDEMPOTENCY_KEYS: ReadonlyArray<string | string[]> = ['', ' ', 'k'.repeat(256), 'k'.repeat(255), 'é', 'tab\tkey', 'a b', ['one', 'two']];
const TRACEPARENTS: ReadonlyArray<string | string[]> = [
  'junk', '00-zz-zz-01', `00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`, `ff-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, `00-${'A'.repeat(32)}-${'B'.repeat(16)}-01`,
  `01-${'a'.repeat(32)}-${'b'.repeat(16)}-01-extra`, 'x'.repeat(8000), '', [`00-${'a'.repeat(32)}-${'b'.repeat(16)}-01`, `00-${'c'.repeat(32)}-${'d'.repeat(16)}-01`],
];
const API_KEYS: ReadonlyArray<string | string[]> = ['', ' ', 'lp_', 'lp__', 'k'.repeat(8000), 'lp_é_ü', '\xff\xfe', 'lp_a_b_c', 'Bearer lp_x_y'];

export class RouteMutator {
  constructor(
    private readonly rng: Rng,
    private readonly operations: readonly Operation[],
    private readonly known: Known,
  ) {}

  /**
   * Every body member of every route, one at a time: removed, then set to each of VALUES, sent by
   * admin (who may do everything, so each reaches the route's own rules) with fresh contacts, so
   * that a value a route takes is recorded and read back afterwards.
   */
  sweep(): Sent[] {
    const sent: Sent[] = [];
    for (const operation of this.operations.filter((op) => op.example)) {
      for (const [name] of operation.example!) {
        for (const value of [undefined, ...VALUES]) {
          const members = this.freshExample(operation).filter(([member]) => value !== undefined || member !== name);
          const kind = value === undefined ? `sweep: ${name} removed` : `sweep: ${name} = ${value.slice(0, 40)}`;
          sent.push(this.request(kind, operation, this.path(operation), { 'x-api-key': this.known.admin }, members.map(([member, text]) => [member, member === name && value !== undefined ? value : text] as const)));
        }
      }
    }
    return sent;
  }

  private freshExample(operation: Operation): Array<readonly [string, string]> {
    const fresh = this.known.freshContact();
    return operation.example!.map(([name, value]) => [name, name === 'email' || name === 'mobile' ? JSON.stringify(fresh[name]) : value] as const);
  }

  next(): Sent {
    const operation = this.rng.pick(this.operations);
    // Now and then two things wrong at once: a refusal for one must not hide a failure on the other.
    if (operation.example && this.rng.chance(0.1)) {
      const body = this.body(operation);
      const header = this.header(operation);
      return { ...body, kind: `${body.kind}, ${header.kind}`, headers: { ...body.headers, ...header.headers, 'content-length': body.headers['content-length']! } };
    }
    const roll = this.rng.next();
    if (operation.example && roll < 0.45) return this.body(operation);
    if (operation.query.length > 0 && roll < 0.7) return this.query(operation);
    if (operation.pathParams.length > 0 && roll < 0.85) return this.pathParam(operation);
    return this.header(operation);
  }

  /** A key for the route: mostly admin (to get past the role check to the input), else any. */
  private key(): string | undefined {
    return this.rng.chance(0.6) ? this.known.admin : this.rng.pick(this.known.keys);
  }

  private path(operation: Operation, override?: { name: string; value: string }): string {
    return operation.template.replace(/\{(\w+)\}/g, (_, name: string) => {
      if (override?.name === name) return override.value;
      return name === 'erasure_id' ? this.rng.pick(this.known.erasureIds) : String(this.rng.pick(this.known.leadIds));
    });
  }

  private request(kind: string, operation: Operation, path: string, headers: Record<string, string | string[]>, members?: Array<readonly [string, string]>): Sent {
    const key = 'x-api-key' in headers ? undefined : this.key();
    const all: Record<string, string | string[]> = { ...(key === undefined ? {} : { 'x-api-key': key }), ...headers };
    if (members === undefined && !operation.example) return { kind, method: operation.method, path, headers: all, operation };
    const body = members === undefined ? objectText(operation.example!) : objectText(members);
    if (!('content-type' in all)) all['content-type'] = 'application/json';
    // An empty list stands for no Content-Type at all.
    if (Array.isArray(all['content-type']) && all['content-type'].length === 0) delete all['content-type'];
    return { kind, method: operation.method, path, headers: { ...all, 'content-length': String(Buffer.byteLength(body)) }, body, operation };
  }

  private body(operation: Operation): Sent {
    const rng = this.rng;
    const members = this.freshExample(operation);
    const index = rng.int(0, members.length - 1);
    const [name] = members[index]!;
    const roll = rng.next();
    let kind: string;
    if (roll < 0.15) {
      members.splice(index, 1);
      kind = `body: ${name} removed`;
    } else if (roll < 0.7) {
      const value = rng.pick(VALUES);
      members[index] = [name, value];
      kind = `body: ${name} = ${value.slice(0, 40)}`;
    } else if (roll < 0.8) {
      members.push([rng.pick(['extra', '__proto__', 'constructor', '', 'a'.repeat(300), '\u0000', 'é', 'ok', 'code']), rng.pick(VALUES)]);
      kind = 'body: an extra member';
    } else if (roll < 0.9) {
      members.push([name, rng.pick([members[index]![1], rng.pick(VALUES)])]);
      kind = `body: ${name} given twice`;
    } else {
      // Every member wrong at once: each must be named.
      for (let i = 0; i < members.length; i++) members[i] = [members[i]![0], rng.pick(['null', '[]', '{}', '0', 'true'])];
      kind = 'body: every member of the wrong type';
    }
    return this.request(kind, operation, this.path(operation), {}, members);
  }

  private query(operation: Operation): Sent {
    const rng = this.rng;
    const name = rng.pick(operation.query);
    const roll = rng.next();
    let query: string;
    let kind: string;
    let headers: Record<string, string> = {};
    if (name === 'cursor' && roll < 0.4) {
      const mine = this.known.cursors.filter((c) => c.template === operation.template);
      const any = rng.pick(this.known.cursors);
      const own = mine.length > 0 ? rng.pick(mine) : any;
      const variants: Array<[string, string, string]> = [
        ['cursor truncated', own.cursor.slice(0, rng.int(0, own.cursor.length - 1)), own.key],
        ['cursor tampered', tamper(rng, own.cursor), own.key],
        ['cursor of another route', any.cursor, own.key],
        ['cursor of another key', own.cursor, rng.pick(this.known.keys.filter((k): k is string => k !== undefined && k !== own.key))],
        ['cursor doubled', own.cursor + own.cursor, own.key],
      ];
      const [what, cursor, key] = rng.pick(variants);
      kind = `query: ${what}`;
      query = `cursor=${encodeURIComponent(cursor)}`;
      headers = { 'x-api-key': key };
    } else if (roll < 0.55) {
      kind = `query: ${name} bad`;
      query = `${name}=${encoded(rng.pick(QUERY_VALUES))}`;
    } else if (roll < 0.65) {
      kind = `query: ${name} raw`;
      query = `${name}=${rng.pick(RAW_QUERY)}`;
    } else if (roll < 0.75) {
      kind = `query: ${name} repeated`;
      query = `${name}=${encoded(rng.pick(QUERY_VALUES))}&${name}=${encoded(rng.pick(QUERY_VALUES))}`;
    } else if (roll < 0.85) {
      kind = `query: ${name} empty`;
      query = rng.pick([`${name}=`, name, `${name}=&${name}=`]);
    } else if (roll < 0.92) {
      kind = 'query: unknown parameter';
      query = `${rng.pick(['unknown', '__proto__', `${name}[]`, `${name}[$ne]`, '%zz', '', 'a'.repeat(3000)])}=1`;
    } else {
      kind = 'query: every parameter bad';
      query = operation.query.map((q) => `${q}=${encoded(rng.pick(QUERY_VALUES))}`).join('&');
    }
    return this.request(kind, operation, `${this.path(operation)}?${query}`, headers);
  }

  private pathParam(operation: Operation): Sent {
    const name = this.rng.pick(operation.pathParams);
    const value = this.rng.pick(PATH_VALUES);
    return this.request(`path: ${name} = ${value.slice(0, 30)}`, operation, this.path(operation, { name, value }), {});
  }

  private header(operation: Operation): Sent {
    const rng = this.rng;
    const roll = rng.next();
    const path = this.path(operation);
    if (roll < 0.3 && operation.example) {
      const type = rng.pick(CONTENT_TYPES);
      return this.request(`header: Content-Type ${String(type)}`, operation, path, type === undefined ? { 'content-type': [] } : { 'content-type': type });
    }
    if (roll < 0.45) {
      const accept = rng.pick(ACCEPTS);
      return this.request(`header: Accept ${accept}`, operation, path, { accept });
    }
    if (roll < 0.6) {
      const key = rng.pick(IDEMPOTENCY_KEYS);
      return this.request(`header: Idempotency-Key ${JSON.stringify(key).slice(0, 30)}`, operation, path, { 'idempotency-key': key });
    }
    if (roll < 0.75) {
      const traceparent = rng.pick(TRACEPARENTS);
      return this.request(`header: traceparent ${JSON.stringify(traceparent).slice(0, 40)}`, operation, path, { traceparent });
    }
    const key = rng.chance(0.2) ? [this.known.admin, this.known.admin] : rng.pick(API_KEYS);
    return this.request(`header: X-API-KEY ${JSON.stringify(key).slice(0, 30)}`, operation, path, { 'x-api-key': key });
  }
}

/** An object's JSON text from its members' raw texts, in order, repeats kept. */
function objectText(members: ReadonlyArray<readonly [string, string]>): string {
  return `{${members.map(([name, value]) => `${JSON.stringify(name)}:${value}`).join(',')}}`;
}

function encoded(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return '%ED%A0%80';
  }
}

/** One character of the cursor changed to another of its alphabet. */
function tamper(rng: Rng, cursor: string): string {
  if (cursor.length === 0) return 'x';
  const at = rng.int(0, cursor.length - 1);
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const replacement = alphabet[(alphabet.indexOf(cursor[at]!) + rng.int(1, alphabet.length - 1)) % alphabet.length]!;
  return cursor.slice(0, at) + replacement + cursor.slice(at + 1);
}

// Hostile requests to every route the OpenAPI document lists, and to the asset routes it does not:
// generated from the document itself (its paths, methods, parameters and request examples), sent
// as every role and as nobody, one at a time, against the real HTTPS server and embedded stores.
// Each answer must be documented for its route and status and fit its schema (so: never a 5xx,
// always the envelope on an error), hold no stack trace and none of the consumers' personal data
// when it refuses (nor in the log, ever), and a refusal must leave the event store as it was. Afterwards the service
// still answers and its projections still reach the head (no poisoned event).
//
// Reproduce a run with ROUTES_SEED=<seed printed by the run>.

import { expect } from 'chai';
import { openApiDocument } from '../../src/docs/openapi.js';
import { Rng } from '../post-lead/helpers.js';
import { DocumentReader } from '../support/openapi.js';
import { type Reply, TestService, validLead } from '../support/service.js';
import { answered } from './support/answered.js';
import { scale, seedFrom } from './support/stress.js';

type Json = Record<string, any>;

const CASES = scale(1500, 15_000);

const routing = {
  buyers: [{ id: 'acme-law', price: 42.5, states: ['CA'], return_reasons: ['bad_phone'] }],
  buckets: [{ id: 'unsold', default: true }],
};

/** Decoded strings, sent percent-encoded in paths and queries and as they are in JSON. */
const HOSTILE_STRINGS = [
  '', ' ', '0', '-1', '1.5', '1e309', '99999999999999999999999', 'NaN', 'null', 'true', '[]', '{}', '__proto__', 'constructor',
  'prototype', '\u0000', 'a\u0000b', '\u202e', '😀', '\ud83d', 'a'.repeat(5000), '../../package.json', "' OR 1=1 --",
  '<script>alert(1)</script>', '{"$gt":""}', '$where', '2026-02-30', '2026-11-27T25:00:00Z', 'Europe/Nowhere', 'day,day,day',
  'day,' + 'sid,'.repeat(200), 'SOLD', 'sold', 'pending', 'return', '\r\nX-Injected: 1', ' 1', '0x10', '1_000', '-0',
];
/** Raw fragments, put into a path or query as they are: broken percent-encoding and separators. */
const RAW_FRAGMENTS = ['%', '%zz', '%E0%A4%A', '%00', '%2F', '%2e%2e%2f', '..', '.', '%C0%AF', '?', '&', '=', '#', '%20', '+'];
const HOSTILE_JSON: unknown[] = [
  null, true, false, 0, -1, 1.5, 1e308, -0, 2 ** 53 + 1, '', [], {}, [[[[[[[[]]]]]]]], { $gt: '' }, ...HOSTILE_STRINGS,
];
/** Bodies as text, whatever the route wants. */
const HOSTILE_BODIES = [
  '', 'null', '[]', '"text"', '42', '{', '{"a":1,"a":2}', '{"__proto__":{"polluted":1}}', '{"constructor":{"prototype":{"polluted":1}}}',
  '['.repeat(5000) + ']'.repeat(5000), '{"a":' + '{"a":'.repeat(3000) + '1' + '}'.repeat(3001), ' '.repeat(70_000), '\ufeff{}',
];
const CONTENT_TYPES = ['application/json', 'application/json', 'application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=latin1', undefined];
const ACCEPTS = [undefined, undefined, 'text/csv', 'application/xml', '*/*', 'text/csv;q=0.1, application/json'];
const WRONG_METHODS = ['PUT', 'DELETE', 'PATCH'];
const ASSET_ROUTES = ['/console/', '/docs/assets/'];
const ASSET_NAMES = ['..%2Fpackage.json', '%2e%2e%2f%2e%2e%2fpackage.json', '..%5C..%5Cpackage.json', 'app.js%00.png', '%2Fetc%2Fpasswd', '....//package.json', 'index.html', 'nothing.js', '%ff', 'a'.repeat(3000)];

interface Operation {
  readonly method: string;
  readonly template: string;
  readonly query: readonly string[];
  readonly example: unknown;
}

interface Sent {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body?: string | Buffer;
}

function operationsOf(doc: Json): Operation[] {
  const operations: Operation[] = [];
  for (const [template, item] of Object.entries(doc.paths as Json)) {
    for (const [method, operation] of Object.entries(item as Json)) {
      if (!(operation as Json)?.responses) continue;
      const query = ((operation as Json).parameters ?? []).filter((p: Json) => p.in === 'query').map((p: Json) => p.name as string);
      const example = (Object.values(((operation as Json).requestBody?.content ?? {}) as Json)[0] as Json | undefined)?.example;
      operations.push({ method: method.toUpperCase(), template, query, example });
    }
  }
  return operations;
}

function encoded(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return '%ED%A0%BD'; // a lone surrogate has no UTF-8: its would-be bytes, which are not UTF-8 either
  }
}

class RouteFuzzer {
  constructor(
    private readonly rng: Rng,
    private readonly operations: readonly Operation[],
    private readonly keys: readonly (string | undefined)[],
    private readonly valid: { leadId: number; erasureId: string; email: string },
  ) {}

  next(): Sent {
    const rng = this.rng;
    if (rng.chance(0.05)) return this.asset();
    const operation = rng.pick(this.operations);
    const method = rng.chance(0.05) ? rng.pick(WRONG_METHODS) : operation.method;
    const path = operation.template.replace(/\{(\w+)\}/g, (_, name: string) => this.pathValue(name)) + this.query(operation);
    const headers: Record<string, string> = {};
    const key = rng.pick(this.keys);
    if (key !== undefined) headers['x-api-key'] = key;
    const accept = rng.pick(ACCEPTS);
    if (accept) headers.accept = accept;
    if (rng.chance(0.1)) headers['idempotency-key'] = rng.pick(['', ' ', 'k'.repeat(300), 'ok-key', 'tab\there', 'é']);
    if (rng.chance(0.05)) headers.traceparent = rng.pick(['00-zz-zz-01', '00-' + '0'.repeat(32) + '-' + '0'.repeat(16) + '-01', 'x'.repeat(600)]);
    if (operation.example === undefined && !rng.chance(0.1)) return { method, path, headers };
    const contentType = rng.pick(CONTENT_TYPES);
    if (contentType) headers['content-type'] = contentType;
    const body = this.body(operation.example);
    // Node's client frames a GET's body by neither length nor chunks: the server would read it as the next request.
    headers['content-length'] = String(Buffer.byteLength(body));
    return { method, path, headers, body };
  }

  private pathValue(name: string): string {
    const rng = this.rng;
    if (rng.chance(0.3)) return name === 'erasure_id' ? this.valid.erasureId : String(this.valid.leadId);
    // Not `?` or `#`: they end the path, and the route would then be another one.
    if (rng.chance(0.3)) return rng.pick(RAW_FRAGMENTS.filter((f) => f !== '?' && f !== '#')) + (rng.chance(0.5) ? String(this.valid.leadId) : '');
    return encoded(rng.pick(HOSTILE_STRINGS));
  }

  private query(operation: Operation): string {
    const rng = this.rng;
    if (rng.chance(0.3)) return '';
    const names = [...operation.query, 'unknown', '__proto__', 'limit[]', 'status[$ne]'];
    const pairs: string[] = [];
    for (let i = rng.int(1, 4); i > 0; i--) {
      const name = rng.chance(0.85) && operation.query.length > 0 ? rng.pick(operation.query) : rng.pick(names);
      const value = rng.chance(0.2) ? rng.pick(RAW_FRAGMENTS) : encoded(rng.pick(HOSTILE_STRINGS));
      pairs.push(rng.chance(0.1) ? name : `${name}=${value}`);
    }
    return `?${pairs.join('&')}`;
  }

  private body(example: unknown): string | Buffer {
    const rng = this.rng;
    if (rng.chance(0.15)) return rng.pick(HOSTILE_BODIES);
    if (rng.chance(0.05)) return Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]); // {"a":"\xff\xfe"}: not UTF-8
    const base: Json = example && typeof example === 'object' && !Array.isArray(example) ? structuredClone(example as Json) : {};
    if ('email' in base && rng.chance(0.5)) base.email = this.valid.email;
    const fields = Object.keys(base);
    for (let i = rng.int(0, 3); i > 0; i--) {
      const roll = rng.next();
      const field = fields.length > 0 && roll < 0.75 ? rng.pick(fields) : rng.pick(['unknown_field', '__proto__', 'constructor', 'toString', 'ok', '']);
      if (roll < 0.2 && fields.length > 0) delete base[field];
      else base[field] = rng.pick(HOSTILE_JSON);
    }
    // JSON.stringify leaves out a __proto__ set as a property: written into the text, it is a key.
    const text = JSON.stringify(base);
    return rng.chance(0.1) ? text.replace(/^\{/, '{"__proto__":{"polluted":"yes"},') : text;
  }

  private asset(): Sent {
    const rng = this.rng;
    const key = rng.pick(this.keys);
    return { method: rng.pick(['GET', 'GET', 'HEAD', 'POST']), path: rng.pick(ASSET_ROUTES) + rng.pick(ASSET_NAMES), headers: key ? { 'x-api-key': key } : {} };
  }
}

const STACK = /\n\s+at |node_modules|\/dist\/|\/src\/|\.ts:\d|\.js:\d|TypeError|ReferenceError|SyntaxError|SQLITE_/;

describe('reliability: hostile requests to every route', function () {
  this.timeout(scale(180_000, 1_800_000));
  const seed = seedFrom('ROUTES_SEED', 0x0a11_0e5);
  let svc: TestService;
  let reader: DocumentReader;
  /** Personal data of the seeded consumers: never in a refusal. */
  const personal: string[] = [];
  const problems: string[] = [];
  const seen = new Map<string, Set<number>>();
  let refusals = 0;

  before(async function () {
    const doc = await openApiDocument();
    reader = new DocumentReader(doc as Json);
    svc = await TestService.start({ routing, deliveryWorker: false });
    const supplier = await svc.key('supplier', 'sup-1');
    const keys = [
      supplier,
      await svc.key('supplier', 'sup-2'),
      await svc.key('buyer', 'acme-law'),
      await svc.key('analyst', 'ann'),
      await svc.key('admin', 'root'),
      undefined,
      'lp_notakey_notasecret',
    ];
    const admin = keys[4]!;
    const lead = validLead();
    personal.push(String(lead.email), String(lead.mobile), String(lead.first_name), String(lead.last_name));
    const sold = await svc.post(lead, { 'x-api-key': supplier });
    expect(sold.status, sold.text).to.equal(201);
    const other = validLead();
    personal.push(String(other.email), String(other.mobile));
    const erasure = await svc.request('POST', '/functions/erasures', { 'x-api-key': admin, 'content-type': 'application/json' }, JSON.stringify({ email: other.email }));
    expect(erasure.status, erasure.text).to.be.oneOf([200, 201]);
    const valid = { leadId: sold.body.lead_id as number, erasureId: String((erasure.body.erasure as Json).erasure_id), email: String(lead.email) };

    const fuzzer = new RouteFuzzer(new Rng(seed), operationsOf(doc as Json), keys, valid);
    console.log(`      routes seed ${seed} (ROUTES_SEED=${seed} to reproduce), ${CASES} requests`);
    for (let index = 0; index < CASES; index++) {
      const sent = fuzzer.next();
      const before = await svc.service.store.headPosition();
      let reply: Reply;
      try {
        reply = await answered(svc.request(sent.method, sent.path, sent.headers, sent.body));
      } catch (error) {
        problems.push(`#${index} ${shown(sent)}: no answer (${(error as Error).message})`);
        continue;
      }
      const route = `${sent.method} ${reader.template(sent.path) ?? sent.path.split('?')[0]!.replace(/\/[^/]*$/, '/…')}`;
      if (!seen.has(route)) seen.set(route, new Set());
      seen.get(route)!.add(reply.status);
      for (const problem of check(sent, reply)) problems.push(`#${index} ${shown(sent)} → ${reply.status}: ${problem}`);
      if (reply.status >= 400 && reply.body.lead_id == null) {
        refusals++;
        const after = await svc.service.store.headPosition();
        if (JSON.stringify(after) !== JSON.stringify(before)) problems.push(`#${index} ${shown(sent)} → ${reply.status}: the refusal wrote events`);
      }
      if (problems.length > 20) break;
    }
  });
  after(async () => svc?.stop());

  function check(sent: Sent, reply: Reply): string[] {
    const found: string[] = [];
    if (reply.status >= 500) found.push(`a ${reply.status}: ${reply.text.slice(0, 200)}`);
    if (ASSET_ROUTES.some((route) => sent.path.startsWith(route))) {
      if (/"dependencies"|BEGIN [A-Z ]*PRIVATE KEY|root:x:0:0/.test(reply.text)) found.push('an asset route served a file outside its folder');
      if (reply.status >= 400 && sent.method !== 'HEAD' && reply.body.ok !== false) found.push('a refusal without the envelope');
      return found;
    }
    if (sent.method !== 'HEAD') {
      found.push(...reader.check(sent.method, sent.path, reply.status, String(reply.headers['content-type'] ?? ''), reply.body));
    }
    if (reply.status >= 400) {
      if (STACK.test(reply.text)) found.push(`internals in the answer: ${reply.text.slice(0, 300)}`);
      for (const value of personal) if (reply.text.includes(value)) found.push('personal data in a refusal');
      if (sent.method !== 'HEAD' && reply.body.ok !== false) found.push('a refusal without the envelope');
    }
    return found;
  }

  it('answers every request as its route documents: no 5xx, the envelope on every refusal, no internals or personal data', function () {
    expect(problems.slice(0, 20)).to.deep.equal([]);
  });

  it("writes none of the consumers' personal data to its log, though requests carried it", function () {
    const log = svc.logs.join('');
    expect(log.length).to.be.greaterThan(0);
    for (const value of personal) expect(log.includes(value), 'personal data in the log').to.equal(false);
  });

  it('reaches every documented route with valid and refused requests alike', function () {
    const routes = [...seen.keys()].filter((route) => !route.includes('…'));
    const documented = operationsOf(reader.doc as Json).map((op) => `${op.method} ${op.template}`);
    expect(documented.filter((route) => !routes.includes(route))).to.deep.equal([]);
    // Each write route both took and refused something, so the oracle saw its two sides.
    for (const route of documented.filter((r) => r.startsWith('POST'))) {
      const statuses = [...seen.get(route)!];
      expect(statuses.some((s) => s >= 400), `${route}: ${statuses}`).to.equal(true);
    }
    expect(refusals).to.be.greaterThan(CASES / 3);
  });

  it('is still serving afterwards, its projections at the head', async function () {
    const health = await svc.request('GET', '/healthz');
    expect(health.status).to.equal(200);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const ready = await svc.request('GET', '/readyz');
    expect(ready.status, ready.text).to.equal(200);
  });
});

function shown(sent: Sent): string {
  const body = sent.body === undefined ? '' : ` ${JSON.stringify(String(sent.body).slice(0, 120))}`;
  return `${sent.method} ${sent.path.slice(0, 160)} ${JSON.stringify(sent.headers).slice(0, 200)}${body}`;
}

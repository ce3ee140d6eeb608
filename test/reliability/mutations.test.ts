// Requests to every route of the OpenAPI document made from its own examples by mutation (see
// support/route-mutations.ts): each body member removed, nulled, of every JSON type, huge, or a
// unicode or number edge case; query parameters bad, repeated, empty, badly percent-encoded,
// unknown; cursors truncated, tampered, of another route or key; path parameters out of range or
// escaping; Content-Type, Accept, Idempotency-Key, traceparent and X-API-KEY mangled. Sent as every
// role, one at a time, to one service over HTTPS with its real embedded stores.
//
// Every answer is under 500, carries the security headers, and on an API route is the envelope,
// `ok: false` with a documented code when it refuses; a 422 names at least one field. A request
// answered neither 2xx nor with a recorded lead leaves the event store as it was, and the lead
// streams are exactly the leads answered, each whole with its answered outcome. Afterwards every
// list reads back the same whole as a page at a time (what the run recorded included), the log
// holds no stack trace, no error and no warning, and the service still answers.
//
// First a sweep: every body member of every route, one at a time, removed and set to each value of
// VALUES; then random mutations. Reproduce a run with MUTATIONS_SEED=<seed printed by the run>;
// MUTATIONS_CASES sets how many random ones.

import { expect } from 'chai';
import { openApiDocument } from '../../src/docs/openapi.js';
import { OUTCOMES } from '../../src/http/envelope.js';
import { SECURITY_HEADERS } from '../../src/http/security-headers.js';
import { Rng } from '../post-lead/helpers.js';
import { DocumentReader } from '../support/openapi.js';
import { type Reply, TestService, validLead } from '../support/service.js';
import { answered } from './support/answered.js';
import { Client } from './support/client.js';
import { leadStreams, readLead } from './support/leads.js';
import { type Known, operationsOf, RouteMutator, type Sent } from './support/route-mutations.js';
import { scale, seedFrom } from './support/stress.js';

type Json = Record<string, any>;

const CASES = Number(process.env.MUTATIONS_CASES || scale(800, 20_000));
const routing = {
  buyers: [{ id: 'acme-law', price: 42.5, states: ['CA'], return_reasons: ['bad_phone'] }],
  buckets: [{ id: 'unsold', default: true }],
};
const CODES = new Set<string>(Object.keys(OUTCOMES));
const LOGGED_FAILURE = /"level":(40|50|60)|"stack"|\n\s+at |unhandled|uncaught/i;

interface Result {
  readonly index: number;
  readonly sent: Sent;
  readonly role: string;
  readonly reply?: Reply;
  readonly error?: string;
  readonly wrote: boolean;
}

describe('reliability: mutated requests to every documented route', function () {
  this.timeout(scale(120_000, 1_200_000));
  const seed = seedFrom('MUTATIONS_SEED', 0x6d75_7461);
  let svc: TestService;
  let client: Client;
  let reader: DocumentReader;
  const results: Result[] = [];
  /** The leads posted before the run, to point requests at. */
  const seeded: number[] = [];

  before(async function () {
    const doc = (await openApiDocument()) as Json;
    reader = new DocumentReader(doc);
    svc = await TestService.start({ routing, deliveryWorker: false });
    client = new Client(1);
    const roles: Record<string, string> = {};
    const key = async (role: 'supplier' | 'buyer' | 'analyst' | 'admin', name: string) => {
      const made = await svc.key(role, name);
      roles[made] = `${role}:${name}`;
      return made;
    };
    const [supplier, otherSupplier, buyer, analyst, admin] = [
      await key('supplier', 'sup-1'), await key('supplier', 'sup-2'), await key('buyer', 'acme-law'), await key('analyst', 'ann'), await key('admin', 'root'),
    ];
    const known = await seedData(svc, { supplier, otherSupplier, buyer, analyst, admin }, operationsOf(doc));
    seeded.push(...known.leadIds);
    const mutator = new RouteMutator(new Rng(seed), operationsOf(doc), known);
    const sweep = mutator.sweep();
    console.log(`      mutations seed ${seed} (MUTATIONS_SEED=${seed} to reproduce): ${sweep.length} requests sweeping every body member, then ${CASES} random ones`);
    for (let index = 0; index < sweep.length + CASES; index++) {
      const sent = sweep[index] ?? mutator.next();
      const key = sent.headers['x-api-key'];
      const role = key === undefined ? 'none' : typeof key === 'string' ? (roles[key] ?? 'junk') : 'repeated';
      const before = await svc.service.store.headPosition();
      try {
        const reply = await answered(client.request(svc.port, sent.method, sent.path, sent.headers, sent.body));
        const after = await svc.service.store.headPosition();
        results.push({ index, sent, role, reply, wrote: JSON.stringify(after) !== JSON.stringify(before) });
      } catch (error) {
        results.push({ index, sent, role, error: (error as Error).message, wrote: false });
      }
    }
  });
  after(async () => {
    client?.destroy();
    await svc?.stop();
  });

  const shown = (r: Result) =>
    `#${r.index} ${r.sent.kind} as ${r.role}: ${r.sent.method} ${r.sent.path.slice(0, 120)}${r.sent.body ? ` ${JSON.stringify(String(r.sent.body).slice(0, 160))}` : ''}`;
  const replied = () => results.filter((r): r is Result & { reply: Reply } => r.reply !== undefined);

  it('answers every request', function () {
    const unanswered = results.filter((r) => r.error).map((r) => `${shown(r)}: ${r.error}`);
    expect(unanswered.slice(0, 10), `${unanswered.length} unanswered`).to.deep.equal([]);
    const counts: Record<string, number> = {};
    for (const r of replied()) counts[`${r.reply.status}`] = (counts[`${r.reply.status}`] ?? 0) + 1;
    console.log(`      statuses: ${Object.entries(counts).map(([s, n]) => `${s}=${n}`).join(' ')}`);
  });

  it('never answers 5xx, and every answer carries the security headers', function () {
    const problems: string[] = [];
    for (const r of replied()) {
      if (r.reply.status >= 500) problems.push(`${shown(r)} → ${r.reply.status} ${r.reply.text.slice(0, 200)}`);
      const missing = Object.keys(SECURITY_HEADERS).filter((name) => r.reply.headers[name.toLowerCase()] === undefined);
      if (missing.length > 0) problems.push(`${shown(r)} → ${r.reply.status} without ${missing.join(', ')}`);
    }
    expect(problems.slice(0, 15), `${problems.length} problems`).to.deep.equal([]);
  });

  it('answers every refusal with the envelope: ok false, a documented code, and as the document describes the route', function () {
    const problems: string[] = [];
    for (const r of replied()) {
      const { status, body, text } = r.reply;
      const api = r.sent.path.startsWith('/functions/');
      const contentType = String(r.reply.headers['content-type'] ?? '');
      if ((status < 400 && !api) || contentType.startsWith('text/csv')) continue;
      if (status >= 400 && (body.ok !== false || !CODES.has(String(body.code)))) problems.push(`${shown(r)} → ${status} not the envelope: ${text.slice(0, 200)}`);
      if (status < 400 && body.ok !== true) problems.push(`${shown(r)} → ${status} without ok: ${text.slice(0, 200)}`);
      for (const problem of reader.check(r.sent.method, r.sent.path, status, contentType, body)) problems.push(`${shown(r)}: ${problem}`);
    }
    expect(problems.slice(0, 15), `${problems.length} problems`).to.deep.equal([]);
  });

  it('names at least one failing field in every 422', function () {
    const problems = replied()
      .filter((r) => r.reply.status === 422)
      .filter((r) => {
        const errors = r.reply.body.errors as Array<{ field?: unknown }> | undefined;
        return !Array.isArray(errors) || errors.length === 0 || errors.some((e) => typeof e.field !== 'string' || e.field === '');
      })
      .map((r) => `${shown(r)} → ${r.reply.text.slice(0, 200)}`);
    expect(problems.slice(0, 15), `${problems.length} problems`).to.deep.equal([]);
  });

  it('writes to the event store only for requests answered 2xx or with a recorded lead', function () {
    const problems = replied()
      .filter((r) => r.wrote && r.reply.status >= 300 && r.reply.body.lead_id == null)
      .map((r) => `${shown(r)} → ${r.reply.status} ${String(r.reply.body.code)} wrote events`);
    expect(problems.slice(0, 15), `${problems.length} problems`).to.deep.equal([]);
  });

  it('holds exactly the leads answered, each whole, with the outcome answered', async function () {
    const answered = new Map<number, string>();
    // The decision envelopes: a read-back answer names a lead_id too, with code OK.
    for (const r of replied()) if (typeof r.reply.body.lead_id === 'number' && r.reply.body.code !== 'OK') answered.set(r.reply.body.lead_id, String(r.reply.body.code));
    const problems: string[] = [];
    for (const [id, events] of await leadStreams(svc.service.store)) {
      const read = readLead(id, events);
      problems.push(...read.problems);
      if (seeded.includes(id)) continue;
      if (!answered.has(id)) problems.push(`lead-${id} (${events.map((e) => e.type).join(', ')}) was answered to no request`);
      else if (read.outcome && read.outcome.code !== answered.get(id)) problems.push(`lead-${id} recorded ${read.outcome.code}, answered ${answered.get(id)}`);
      answered.delete(id);
    }
    for (const [id, code] of answered) problems.push(`lead ${id} answered ${code} has no stream`);
    expect(problems.slice(0, 10)).to.deep.equal([]);
  });

  it('reaches every documented route as every role', function () {
    const seen = new Set(replied().map((r) => `${r.sent.method} ${r.sent.operation?.template}`));
    const documented = operationsOf(reader.doc as Json).map((op) => `${op.method} ${op.template}`);
    expect(documented.filter((route) => !seen.has(route))).to.deep.equal([]);
    const roles = new Set(replied().map((r) => r.role.split(':')[0]));
    expect([...roles].sort()).to.include.members(['admin', 'analyst', 'buyer', 'junk', 'none', 'supplier']);
  });

  it('reads back what the run wrote, every list the same paged as whole, a report by every dimension', async function () {
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const admin = results.find((r) => r.role.startsWith('admin'))!.sent.headers['x-api-key'] as string;
    const problems: string[] = [];
    for (const op of operationsOf(reader.doc as Json).filter((o) => o.method === 'GET' && o.query.includes('cursor'))) {
      const groupings = op.query.includes('group_by') ? groupByValues(reader.doc as Json, op.template).map((g) => `group_by=${g}&`) : [''];
      for (const grouping of groupings) {
        const path = `${op.template}?${grouping}`;
        const whole = await pages(svc, admin, path, 500);
        const paged = await pages(svc, admin, path, 7);
        problems.push(...whole.problems, ...paged.problems);
        if (JSON.stringify(paged.items) !== JSON.stringify(whole.items)) problems.push(`${path}: ${whole.items.length} rows 500 at a time, ${paged.items.length} seven at a time`);
      }
    }
    expect(problems.slice(0, 10)).to.deep.equal([]);
  });

  it('logs no stack trace, no error and no warning, and is still serving afterwards', async function () {
    const failures = svc.logs.filter((line) => LOGGED_FAILURE.test(line));
    expect(failures.slice(0, 5).map((line) => line.slice(0, 600))).to.deep.equal([]);
    const health = await svc.request('GET', '/healthz');
    expect(health.status).to.equal(200);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const ready = await svc.request('GET', '/readyz');
    expect(ready.status, ready.text).to.equal(200);
  });
});

/** Leads, feedback and erasures to point at, and a real cursor of every list for every key that can page it. */
async function seedData(svc: TestService, keys: Record<'supplier' | 'otherSupplier' | 'buyer' | 'analyst' | 'admin', string>, operations: ReturnType<typeof operationsOf>): Promise<Known> {
  const json = { 'content-type': 'application/json' };
  const leadIds: number[] = [];
  for (const [key, sid] of [[keys.supplier, 'src-1'], [keys.supplier, 'src-2'], [keys.supplier, 'src-3'], [keys.otherSupplier, 'src-4']] as const) {
    const sold = await svc.post(validLead({ sid }), { 'x-api-key': key });
    expect(sold.status, sold.text).to.equal(201);
    leadIds.push(sold.body.lead_id as number);
  }
  for (const [leadId, type] of [[leadIds[0], 'contacted'], [leadIds[1], 'conversion']] as const) {
    const feedback = await svc.request('POST', `/functions/leads/${leadId}/feedback`, { ...json, 'x-api-key': keys.buyer }, JSON.stringify({ type }));
    expect(feedback.status, feedback.text).to.equal(201);
  }
  const erasureIds: string[] = [];
  for (let i = 0; i < 2; i++) {
    const erasure = await svc.request('POST', '/functions/erasures', { ...json, 'x-api-key': keys.admin }, JSON.stringify({ email: validLead().email }));
    expect(erasure.status, erasure.text).to.be.oneOf([200, 201]);
    erasureIds.push(String((erasure.body.erasure as Json).erasure_id));
  }
  await svc.service.projections.waitFor(await svc.service.store.headPosition());
  const cursors: Array<{ template: string; key: string; cursor: string }> = [];
  for (const op of operations.filter((o) => o.method === 'GET' && o.query.includes('cursor'))) {
    for (const key of Object.values(keys)) {
      const extra = op.template.endsWith('/summary') ? '&group_by=sid' : '';
      const page = await svc.request('GET', `${op.template}?limit=1${extra}`, { 'x-api-key': key });
      if (typeof page.body.next_cursor === 'string') cursors.push({ template: op.template, key, cursor: page.body.next_cursor });
    }
  }
  expect(new Set(cursors.map((c) => c.template)).size, JSON.stringify(cursors)).to.be.at.least(4);
  return {
    keys: [...Object.values(keys), undefined, 'lp_notakey_notasecret'],
    admin: keys.admin,
    freshContact: () => {
      const lead = validLead();
      return { email: String(lead.email), mobile: String(lead.mobile) };
    },
    leadIds: [...leadIds, 999_999],
    erasureIds: [...erasureIds, '00000000-0000-4000-8000-000000000000'],
    cursors,
  };
}

/** Every row of a list, read `limit` at a time along its cursors. */
async function pages(svc: TestService, key: string, path: string, limit: number): Promise<{ items: unknown[]; problems: string[] }> {
  const items: unknown[] = [];
  const problems: string[] = [];
  for (let cursor: unknown = '', page = 0; typeof cursor === 'string' && page < 5000; page++) {
    const reply = await svc.request('GET', `${path}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { 'x-api-key': key });
    if (reply.status !== 200) problems.push(`${path} page ${page} of ${limit}: ${reply.status} ${reply.text.slice(0, 200)}`);
    items.push(...((reply.body.items as unknown[] | undefined) ?? []));
    cursor = reply.body.next_cursor;
  }
  return { items, problems };
}

/** Each dimension a report may be grouped by, alone, then all of them at once: read from the parameter's description. */
function groupByValues(doc: Json, template: string): string[] {
  const parameter = ((doc.paths as Json)[template].get.parameters as Json[]).find((p) => p.name === 'group_by')!;
  const names = String(parameter.description).replace(/^[^:]*:/, '').replace(/\.$/, '').split(',').map((name) => name.trim());
  return [...names, names.join(',')];
}

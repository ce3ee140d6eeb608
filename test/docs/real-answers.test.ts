import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { openApiDocument } from '../../src/docs/openapi.js';
import { CERT_URL, type Reply, TestService, validLead } from '../support/service.js';
import { DocumentReader } from '../support/openapi.js';
import { rawExchange, toReply } from '../reliability/support/client.js';
import { bodySchema, unnamedFields } from './named-fields.js';

// The document against the running service: every answer below is looked up in the document by
// path, method and status, must be documented there, fit its schema, carry a code the document
// lists for that status, and hold no field its schema does not name. A route that answers what
// its docs do not say fails here.

const README = fileURLToPath(new URL('../../../README.md', import.meta.url));

const routing = {
  buyers: [
    { id: 'acme-law', price: 42.5, states: ['CA'], return_reasons: ['bad_phone'] },
    // A webhook buyer nobody listens for (port 1): its one attempt fails for good.
    { id: 'hook-law', price: 30, states: ['NV'], delivery: { kind: 'webhook', url: 'https://127.0.0.1:1/leads', timeout_ms: 2000, max_attempts: 1 } },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

type Json = Record<string, any>;
const commitOf = (reply: Reply) => Number((reply.body.erasure as Json).as_of.commit);
const withoutAsOf = (reply: Reply) => ({ ...(reply.body.erasure as Json), as_of: undefined });

describe('OpenAPI document against real answers', function () {
  this.timeout(60_000);
  let svc: TestService;
  let reader: DocumentReader;
  const answers: Array<{ method: string; path: string; reply: Reply }> = [];
  const erasures: Reply[] = [];
  /** Bodies with blanks around values at their limits, by the schema of their route's request body. */
  const padded: Array<{ schema: string; body: Json; reply: Reply }> = [];
  /** Requests without a Host header, which no route sees: refused before it. */
  const noHost: Array<{ method: string; path: string; reply: Reply }> = [];
  let paddedQuery: { email: string };
  let paddedQueryReply: Reply;
  /** HEAD requests, apart: their answers have no body to check against a schema. */
  const heads: Array<{ path: string; reply: Reply }> = [];

  before(async function () {
    reader = new DocumentReader(await openApiDocument());
    svc = await TestService.start({ routing });
    const supplier = await svc.key('supplier', 'sup-1');
    const buyer = await svc.key('buyer', 'acme-law');
    const analyst = await svc.key('analyst', 'ann');
    const admin = await svc.key('admin', 'root');
    const as = (key: string) => ({ 'x-api-key': key });
    const call = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
      const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
      const reply = await svc.request(method, path, { ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }, payload);
      answers.push({ method, path, reply });
      return reply;
    };
    const post = (body: unknown, headers: Record<string, string> = as(supplier)) => call('POST', '/functions/leads', headers, body);
    const settled = async () => svc.service.projections.waitFor(await svc.service.store.headPosition());

    const sold = validLead();
    const soldReply = await post(sold, { ...as(supplier), 'idempotency-key': 'docs-1' });
    await post(sold, { ...as(supplier), 'idempotency-key': 'docs-1' }); // replay
    await post(validLead(), { ...as(supplier), 'idempotency-key': 'docs-1' }); // other body
    await post(validLead({ accident_state: 'TX', zip: '75001' }));
    await post(validLead({ zip: 'nope' }));
    await post(validLead({ email: 'ada@no-mx.example.com' }));
    await post(sold);
    await post('{"first_name":');
    await call('POST', '/functions/leads', { ...as(supplier), 'content-type': 'text/plain' }, 'hello');
    await post({ s1: 'x'.repeat(70_000) });
    await post(validLead(), {});
    await post(validLead(), as(analyst));
    await post(validLead(), { ...as(supplier), 'idempotency-key': 'not a key' });
    // A ping posted twice, and posted from another ZIP.
    const pingOf = async () => (await call('POST', '/functions/pings', as(supplier), { zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `docs-${Math.random()}` })).body.ping_id;
    const pinged = await pingOf();
    await post(validLead({ ping_id: pinged }));
    await post(validLead({ ping_id: pinged }));
    await post(validLead({ ping_id: await pingOf(), zip: '90211' }));
    await call('POST', '/functions/pings', as(supplier), { zip: '9021', accident_state: 'CA', sid: 'src-1' });
    // Blanks around each value the service trims before it measures or checks it, at its limit.
    const blanks = validLead({ first_name: `  ${'A'.repeat(24)}   ${'B'.repeat(23)}  `, certificate_url: `${CERT_URL} `, s1: `  ${'x'.repeat(255)}` });
    Object.assign(blanks, { email: ` ${String(blanks.email)} `, mobile: `${String(blanks.mobile)}${' '.repeat(20)}` });
    padded.push({ schema: 'Lead', body: blanks, reply: await post(blanks) });
    const blankPing = { zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `  ${'p'.repeat(255)}` };
    padded.push({ schema: 'Ping', body: blankPing, reply: await call('POST', '/functions/pings', as(supplier), blankPing) });
    // A consumer nobody posted, so that the erasures below still find their leads; null is a contact left out.
    const nobody = { email: ` Nobody.${Date.now()}@Example.com `, mobile: null };
    padded.push({ schema: 'ErasureRequest', body: nobody, reply: await call('POST', '/functions/erasures', as(admin), nobody) });
    paddedQuery = { email: ` ${String(sold.email)} ` };
    paddedQueryReply = await call('GET', `/functions/consumers?email=${encodeURIComponent(paddedQuery.email)}`, as(admin));
    await post(validLead()); // sold to the pull buyer, left pending
    const hooked = (await post(validLead({ accident_state: 'NV', zip: '89101' }))).body.lead_id as number;
    const leadId = soldReply.body.lead_id as number;
    await settled();

    await call('GET', `/functions/leads/${leadId}`, as(supplier));
    await call('GET', '/functions/leads/999999', as(supplier));
    await call('GET', `/functions/leads/${leadId}/events`, as(analyst));
    await call('GET', '/functions/leads/999999/events', as(supplier));
    await call('GET', '/functions/deliveries?status=pending', as(buyer));
    await call('GET', '/functions/leads?status=rejected', as(supplier));
    await call('GET', '/functions/leads', as(buyer));
    await call('GET', '/functions/leads?status=lost&limit=0', as(analyst));
    await call('GET', '/functions/me', as(buyer));
    await call('GET', '/functions/me', as(supplier));
    await call('GET', '/functions/deliveries?limit=0', as(analyst));
    await call('GET', '/functions/reports/summary?group_by=day,sid', as(analyst));
    await call('GET', '/functions/reports/summary', { ...as(analyst), accept: 'text/csv' });
    await call('GET', '/functions/reports/summary', as(buyer));
    await call('POST', `/functions/deliveries/${leadId}/ack`, as(buyer));
    await call('POST', `/functions/leads/${leadId}/feedback`, as(buyer), { type: 'return', reason: 'bad_phone' });
    await call('POST', `/functions/leads/${leadId}/feedback`, as(buyer), { type: 'return', reason: 'bad_phone' });
    await call('POST', `/functions/leads/${leadId}/feedback`, as(buyer), { type: 'return', reason: 'moon' });
    // A conversion, and the same sent again: 201, then 200 with the one recorded.
    for (let i = 0; i < 2; i++) await call('POST', `/functions/leads/${leadId}/feedback`, as(buyer), { type: 'conversion', reason: 'policy_bound' });
    await settled();
    await call('GET', '/functions/feedback?type=return', as(supplier));
    // A lead with feedback, in each answer that shows a lead view.
    await call('GET', `/functions/leads/${leadId}`, as(buyer));
    await call('GET', '/functions/leads', as(supplier));
    await call('POST', '/functions/consumers/lookup', as(admin), { email: sold.email });
    await call('GET', `/functions/consumers?email=${encodeURIComponent(String(sold.email))}`, as(admin));
    // The webhook buyer's failed attempt, then every kind of delivery row: delivered, pending, failed, bucket.
    for (const started = Date.now(); Date.now() - started < 20_000; await new Promise((resolve) => setTimeout(resolve, 100))) {
      await settled();
      const rows = (await svc.request('GET', '/functions/deliveries?buyer=hook-law', as(analyst))).body.items as Json[] | undefined;
      if (rows?.some((row) => row.lead_id === hooked && row.status === 'failed')) break;
    }
    await call('GET', '/functions/deliveries', as(analyst));
    // The failed delivery sent again: refused to an analyst, a body breaking its rule, re-opened; a
    // delivered lead and no lead at all refused.
    await call('POST', `/functions/deliveries/${hooked}/redeliver`, as(analyst));
    await call('POST', `/functions/deliveries/${hooked}/redeliver`, as(admin), { reason: 'Not a code', channel: 'phone' });
    const redelivered = await call('POST', `/functions/deliveries/${hooked}/redeliver`, as(admin), { reason: 'buyer_outage' });
    expect(redelivered.status, redelivered.text).to.equal(202);
    await call('POST', `/functions/deliveries/${leadId}/redeliver`, as(admin));
    await call('POST', '/functions/deliveries/999999/redeliver', as(admin));
    await call('GET', '/healthz', {});
    await call('GET', '/readyz', {});
    await call('GET', '/metrics', {});
    await call('GET', '/docs', {});
    await call('GET', '/docs/openapi.json', {});
    await call('DELETE', '/functions/leads', as(supplier));
    await call('PUT', `/functions/leads/${leadId}`, as(supplier));
    await call('GET', '/functions/consumers/lookup', as(admin));
    await call('GET', `/functions/deliveries/${leadId}/ack`, as(buyer));
    await call('POST', '/healthz', {});
    await call('OPTIONS', '/functions/deliveries', as(analyst));
    await call('GET', '/functions/nothing-here', {});
    for (const path of ['/healthz', '/functions/consumers/lookup']) heads.push({ path, reply: await svc.request('HEAD', path, as(admin)) });
    // The same erasure asked again, with an event recorded in between; then the erasure as recorded.
    erasures.push(await call('POST', '/functions/erasures', as(admin), { email: sold.email }));
    await post(validLead());
    erasures.push(await call('POST', '/functions/erasures', as(admin), { email: sold.email }));
    erasures.push(await call('GET', `/functions/erasures/${String((erasures[0]!.body.erasure as Json).erasure_id)}`, as(admin)));
    await settled();
    // The erased lead as its buyer reads it: the delivery row and the view, without the personal fields.
    await call('GET', '/functions/deliveries?status=delivered', as(buyer));
    await call('GET', `/functions/leads/${leadId}`, as(buyer));
    await call('GET', '/functions/erasures?limit=1', as(admin));
    await call('GET', `/functions/erasures/${'0'.repeat(32)}`, as(admin));
    // Refused by the listener before any route: documented on every route all the same.
    // Not valid HTTP/1.1 (no Host header, which a client library always sends): a raw TLS request.
    for (const [method, path] of [['GET', '/functions/leads'], ['GET', '/functions/me'], ['GET', '/functions/reports/summary'], ['GET', '/healthz'], ['GET', '/console'], ['POST', '/functions/pings']] as const) {
      const { responses } = await rawExchange(svc.port, [`${method} ${path} HTTP/1.1\r\nX-API-KEY: ${analyst}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`], { timeoutMs: 5000 });
      const [refused] = responses;
      expect(refused, `${method} ${path}: an answer`).to.not.equal(undefined);
      const reply = toReply(refused!.status, refused!.headers, refused!.text);
      noHost.push({ method, path, reply });
      answers.push({ method, path, reply });
    }
    // The console asked again with its ETag, as a browser does on each visit (no-cache).
    const page = await call('GET', '/console', {});
    await call('GET', '/console', { 'if-none-match': String(page.headers.etag) });
    const oversized = await call('GET', '/functions/deliveries', { ...as(analyst), 'x-filler': 'f'.repeat(20 * 1024) });
    expect(oversized.status).to.equal(431);
    answers.push({ method: 'POST', path: '/functions/leads', reply: await svc.plainHttp('POST', '/functions/leads') });
  });
  after(async () => svc?.stop());

  it('every answer is documented for its route and status, fits the schema and carries a listed code', function () {
    const problems = answers.flatMap(({ method, path, reply }) =>
      reader.check(method, path, reply.status, String(reply.headers['content-type'] ?? ''), reply.body, { messages: true }),
    );
    expect(problems).to.deep.equal([]);
  });

  it("a ping with a failing field is answered as the ping's own 422 example says, not as a lead's", function () {
    const answer = answers.find(({ path, reply }) => path === '/functions/pings' && reply.status === 422);
    expect(answer, 'an invalid ping was posted').to.not.equal(undefined);
    const examples = (reader.doc as Json).paths['/functions/pings'].post.responses['422'].content['application/json'].examples as Json;
    const shown = Object.values(examples).map((example) => (example as Json).value);
    expect(shown.map((value) => value.message)).to.deep.equal([answer!.reply.body.message]);
    expect(shown.map((value) => value.lead_id)).to.deep.equal([null]);
    expect(answer!.reply.body.lead_id).to.equal(null);
  });

  it('a body with blanks around values at their limits: taken by the service, and by the request schema the served document gives', async function () {
    const served = new DocumentReader((await svc.request('GET', '/docs/openapi.json')).body);
    expect(padded.map(({ schema }) => schema)).to.deep.equal(['Lead', 'Ping', 'ErasureRequest']);
    for (const { schema, body, reply } of padded) {
      expect(reply.status, `${schema}: ${reply.text}`).to.equal(201);
      const validate = served.compile(`#/components/schemas/${schema}`);
      expect(validate(body), `${schema}: ${JSON.stringify(validate.errors)}`).to.equal(true);
    }
    // The deprecated look-up's e-mail, in the query string.
    expect(paddedQueryReply.status, paddedQueryReply.text).to.equal(200);
    expect(paddedQueryReply.body.leads_found).to.be.greaterThan(0);
    const parameters = (served.doc as Json).paths['/functions/consumers'].get.parameters as Json[];
    const email = served.compile(`#/paths/~1functions~1consumers/get/parameters/${parameters.findIndex((p) => p.name === 'email')}/schema`);
    expect(email(paddedQuery.email), JSON.stringify(email.errors)).to.equal(true);
  });

  it('a request that is not valid HTTP/1.1, on any route: refused 400 MALFORMED_JSON, as documented for its operation', function () {
    expect(noHost.map(({ reply }) => [reply.status, reply.body.code])).to.deep.equal(noHost.map(() => [400, 'MALFORMED_JSON']));
    const problems = noHost.flatMap(({ method, path, reply }) => reader.check(method, path, reply.status, String(reply.headers['content-type'] ?? ''), reply.body));
    expect(problems).to.deep.equal([]);
  });

  it('the console asked again with its ETag: 304 with no body, as its operation documents', function () {
    const asked = answers.filter(({ method, path, reply }) => method === 'GET' && path === '/console' && reply.status !== 400).map(({ reply }) => reply);
    expect(asked.map((reply) => reply.status)).to.deep.equal([200, 304]);
    const [page, again] = asked as [Reply, Reply];
    expect(again.text).to.equal('');
    expect(again.headers.etag).to.equal(page.headers.etag);
    expect(reader.check('GET', '/console', 304, String(again.headers['content-type'] ?? ''), again.body)).to.deep.equal([]);
    expect(Object.keys(reader.responseOf('GET', '/console', 304)!.response.headers as Json)).to.include('ETag');
  });

  it('every field of every answer is named in the schema its route documents', function () {
    const problems = answers.flatMap(({ method, path, reply }) => {
      const found = reader.responseOf(method, path, reply.status);
      if (!found || !String(reply.headers['content-type']).startsWith('application/json')) return [];
      return unnamedFields(reader.doc, bodySchema(found.pointer), reply.body).map((field) => `${method} ${path} ${reply.status}: ${field} is not named`);
    });
    expect(problems).to.deep.equal([]);
  });

  it("the envelope's errors description names every code an answer carried errors with", function () {
    const envelope = (reader.doc as Json).components.schemas.DecisionEnvelope as Json;
    const description = String(envelope.properties.errors.description);
    const carried = new Set(answers.filter(({ reply }) => Array.isArray(reply.body.errors)).map(({ reply }) => String(reply.body.code)));
    expect([...carried]).to.include.members(['INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'PING_CONSUMED', 'PING_MISMATCH', 'IDEMPOTENCY_CONFLICT']);
    expect([...carried].filter((code) => !description.includes(code))).to.deep.equal([]);
  });

  it('the answers cover the lead outcomes a supplier can cause and the statuses of every read-back route', function () {
    const codes = new Set(answers.map(({ reply }) => reply.body.code));
    for (const code of ['SOLD', 'UNSOLD', 'INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE',
      'PAYLOAD_TOO_LARGE', 'UNAUTHORIZED', 'FORBIDDEN', 'HTTPS_REQUIRED', 'NOT_FOUND', 'METHOD_NOT_ALLOWED', 'IDEMPOTENCY_CONFLICT',
      'ALREADY_RETURNED', 'OK']) {
      expect(codes, code).to.include(code);
    }
    const conversions = answers.filter(({ path, reply }) => path.endsWith('/feedback') && (reply.body.feedback as Json | undefined)?.type === 'conversion');
    expect(conversions.map(({ reply }) => reply.status)).to.deep.equal([201, 200]);
    const replayed = answers.find(({ reply }) => reply.headers['idempotency-replayed'] === 'true');
    expect(replayed?.reply.status).to.equal(201);
  });

  it('the answers hold a lead view with feedback on every route that shows one, and delivery rows of every kind', function () {
    const leadViews = (reply: Reply): Json[] => [reply.body.lead as Json, ...((reply.body.items ?? []) as Json[])].filter((view) => view?.feedback);
    for (const route of ['GET /functions/leads/', 'GET /functions/leads', 'POST /functions/consumers/lookup', 'GET /functions/consumers?']) {
      const shown = answers.filter(({ method, path }) => `${method} ${path}`.startsWith(route)).flatMap(({ reply }) => leadViews(reply));
      expect(shown.some((view) => view.feedback.length > 0), route).to.equal(true);
    }
    const rows = answers.find(({ path }) => path === '/functions/deliveries')!.reply.body.items as Json[];
    expect(rows.map((row) => row.status)).to.include.members(['delivered', 'pending', 'failed']);
    expect(rows.some((row) => row.bucket !== null)).to.equal(true);
    const failed = rows.find((row) => row.status === 'failed')!;
    expect(failed).to.include({ buyer: 'hook-law', last_status_code: null, next_attempt_at: null });
    expect(['connection_error', 'timeout']).to.include(failed.last_error);
    const pending = rows.find((row) => row.status === 'pending' && row.buyer === 'acme-law')!;
    expect(pending).to.include({ last_error: null, next_attempt_at: pending.created_at });
  });

  it("the consumer fields a buyer reads its lead by, in a delivery row (a pull buyer's only copy) and a lead view, are named one by one, in clear and erased", function () {
    const doc = reader.doc as Json;
    const named = (schema: Json): string[] => [
      ...Object.keys(schema.properties ?? {}),
      ...((schema.anyOf ?? []) as Json[]).flatMap((part) => named(part.$ref ? doc.components.schemas[String(part.$ref).split('/').pop()!] : part)),
    ];
    const consumerFields = (reply: Reply): Json[] => [(reply.body.lead as Json | undefined)?.lead, ...((reply.body.items ?? []) as Json[]).map((item) => item.lead)].filter((lead) => lead && typeof lead === 'object');
    const shown = { DeliveryRow: answers.filter(({ path }) => path.startsWith('/functions/deliveries?')), LeadView: answers.filter(({ path }) => path.startsWith('/functions/leads')) };
    for (const [schema, replies] of Object.entries(shown)) {
      const leads = replies.flatMap(({ reply }) => consumerFields(reply));
      expect(leads.some((lead) => typeof lead.email === 'string'), `${schema}: a lead in clear`).to.equal(true);
      expect(leads.some((lead) => lead.erased === true), `${schema}: an erased lead`).to.equal(true);
      const names = named(doc.components.schemas[schema].properties.lead as Json);
      expect([...new Set(leads.flatMap((lead) => Object.keys(lead)))].filter((field) => !names.includes(field)), schema).to.deep.equal([]);
    }
  });

  it('a method a path does not have: 405 as the shared response the introduction names, Allow naming the methods documented for the path', function () {
    const doc = reader.doc as Json;
    const shared = '#/components/responses/MethodNotAllowed';
    expect(doc.info.description).to.contain(`\`${shared}\``);
    const refused = answers.filter(({ reply }) => reply.status === 405);
    expect(refused.length).to.be.greaterThan(5);
    const problems = refused.flatMap(({ method, path, reply }) => {
      const where = `${method} ${path}`;
      const template = reader.template(path);
      if (!template) return [`${where}: 405 on a path the document does not have`];
      const methods = Object.keys(doc.paths[template] as Json).map((m) => m.toUpperCase());
      if (methods.includes(method)) return [`${where}: 405 for a method the document gives the path`];
      const response = doc.components.responses.MethodNotAllowed as Json;
      const found: string[] = [];
      const validate = reader.compile(`${shared}/content/application~1json/schema`);
      if (!validate(reply.body)) found.push(`${where}: ${JSON.stringify(validate.errors)}`);
      if (!Object.keys(response.content['application/json'].examples).includes(String(reply.body.code))) found.push(`${where}: code ${String(reply.body.code)}`);
      for (const header of Object.keys(response.headers)) if (reply.headers[header.toLowerCase()] === undefined) found.push(`${where}: no ${header} header`);
      const allow = String(reply.headers.allow ?? '').split(',').map((m) => m.trim()).sort();
      const documented = [...methods, ...(methods.includes('GET') ? ['HEAD'] : [])].sort();
      if (JSON.stringify(allow) !== JSON.stringify(documented)) found.push(`${where}: Allow ${allow.join(', ')}, documented ${documented.join(', ')}`);
      return found;
    });
    expect(problems).to.deep.equal([]);
    // HEAD, which Allow names wherever GET is, answers as GET does, without a body; elsewhere 405.
    const [live, erase] = heads.map(({ reply }) => reply) as [Reply, Reply];
    expect([live.status, live.text]).to.deep.equal([200, '']);
    expect([erase.status, erase.headers.allow]).to.deep.equal([405, 'POST']);
  });

  it("an erasure's as_of is each answer's own look, as the reference and the README say", function () {
    const [first, again, recorded] = erasures as [Reply, Reply, Reply];
    expect([first.status, again.status, recorded.status]).to.deep.equal([201, 200, 200]);
    // The record is the same in all three; as_of is not.
    expect(withoutAsOf(again)).to.deep.equal(withoutAsOf(first));
    expect(withoutAsOf(recorded)).to.deep.equal(withoutAsOf(first));
    // The recorded look came before the leads were erased; the first answer's last look after; the
    // repeat's look after the lead posted in between.
    expect(commitOf(recorded)).to.be.lessThan(commitOf(first));
    expect(commitOf(first)).to.be.lessThan(commitOf(again));

    const doc = reader.doc as Json;
    const asOf = doc.components.schemas.ErasureAnswer.properties.erasure.properties.as_of.description as string;
    for (const answer of ['POST /functions/erasures', 'Asked again', 'GET /functions/erasures/{erasure_id}']) expect(asOf, answer).to.contain(answer);
    expect(doc.paths['/functions/erasures'].post.responses['200'].description).to.contain('except `as_of`');
    const rows = readFileSync(README, 'utf8').split('\n');
    const posted = rows.find((line) => line.startsWith('| `POST /functions/erasures`'))!;
    expect(posted.slice(posted.indexOf('`200`')), 'README: the 200 answer').to.contain('`as_of`');
    expect(rows.find((line) => line.startsWith('| `GET /functions/erasures/{erasure_id}`')), 'README: the erasure as recorded').to.contain('`as_of`');
  });
});

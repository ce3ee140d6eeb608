import { expect } from 'chai';
import { gzipSync } from 'node:zlib';
import { EventStoreUnavailableError, type EventStore } from '../../src/event-store/index.js';
import { overriding } from '../support/overriding.js';
import { ENVELOPE_FIELDS, type Reply, TestService, validLead } from '../support/service.js';

// Every outcome of a lead post (the README's outcomes table), through the real HTTPS server and the embedded store.

function expectEnvelope(reply: Reply, status: number, code: string, acceptance: string, recorded: boolean): void {
  expect(reply.status, reply.text).to.equal(status);
  for (const field of ENVELOPE_FIELDS) expect(reply.body, field).to.have.property(field);
  expect(reply.body.code).to.equal(code);
  expect(reply.body.acceptance).to.equal(acceptance);
  expect(reply.body.ok).to.equal(acceptance === 'accepted');
  expect(reply.body.Response).to.equal({ accepted: 'Success', rejected: 'Failure', error: 'Error' }[acceptance]);
  expect(reply.body.trace_id).to.match(/^[0-9a-f]{32}$/);
  expect(reply.headers['x-trace-id']).to.equal(reply.body.trace_id);
  if (recorded) expect(reply.body.lead_id).to.be.a('number');
  else expect(reply.body.lead_id).to.equal(null);
}

/** A store whose appends can be made to fail, as a disk or a server would. */
interface Fault {
  error: Error | null;
  /** Only appends to matching streams fail. */
  streams?: RegExp;
}

function faultyStore(store: EventStore, fault: Fault): EventStore {
  return overriding(store, {
    append: (stream, ...rest) => (fault.error && (!fault.streams || fault.streams.test(stream)) ? Promise.reject(fault.error) : store.append(stream, ...rest)),
  });
}

describe('POST /functions/leads: every outcome', function () {
  let svc: TestService;
  let key: string;
  const fault: Fault = { error: null };

  before(async function () {
    svc = await TestService.start({ wrapStore: (store) => faultyStore(store, fault), env: { RATE_LIMIT_PER_SECOND: '0' } });
    key = await svc.key();
  });
  after(async () => svc.stop());
  afterEach(() => Object.assign(fault, { error: null, streams: undefined }));

  it('SOLD 201: routed to the highest-paying eligible buyer, revenue is its price', async function () {
    const reply = await svc.post(validLead(), { 'x-api-key': key });
    expectEnvelope(reply, 201, 'SOLD', 'accepted', true);
    expect(reply.body).to.include({ lead_status: 'sold', sold: true, revenue: 42.5, currency: 'USD' });
    const events = await svc.service.store.readStream(`lead-${reply.body.lead_id}`);
    expect(events.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold']);
    // LeadReceived is at version 2 (its personal fields encrypted), the lead's other events at 1.
    expect(events[0]!.metadata).to.include({ trace_id: reply.body.trace_id, schema: 2, supplier_id: 'sup-1' });
    expect(events[1]!.metadata).to.include({ trace_id: reply.body.trace_id, schema: 1, supplier_id: 'sup-1' });
  });

  it('UNSOLD 201: no buyer eligible → the matching bucket', async function () {
    const svc2 = await TestService.start({
      routing: { buyers: [{ id: 'ca-only', price: 10, states: ['CA'] }], buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }] },
    });
    try {
      const reply = await svc2.post(validLead({ accident_state: 'TX', zip: '75001' }), { 'x-api-key': await svc2.key() });
      expectEnvelope(reply, 201, 'UNSOLD', 'accepted', true);
      expect(reply.body).to.include({ lead_status: 'unsold', sold: false, revenue: 0 });
      const routed = (await svc2.service.store.readStream(`lead-${reply.body.lead_id}`))[2]!;
      expect(routed.data).to.deep.include({
        target: { kind: 'bucket', id: 'unsold-tx' },
        candidates: [{ buyer: 'ca-only', price: 10, eligible: false, reason: 'state_not_allowed', detail: 'state:TX' }],
      });
    } finally {
      await svc2.stop();
    }
  });

  it('INVALID 422: recorded and rejected, errors name each field', async function () {
    const reply = await svc.post(validLead({ zip: 'nope', extra: 1 }), { 'x-api-key': key });
    expectEnvelope(reply, 422, 'INVALID', 'rejected', true);
    expect(reply.body.lead_status).to.equal('rejected');
    expect((reply.body.errors as Array<{ field: string }>).map((e) => e.field)).to.have.members(['zip', 'extra']);
    const events = await svc.service.store.readStream(`lead-${reply.body.lead_id}`);
    expect(events.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadRejected']);
  });

  it('VERIFICATION_FAILED 422: an e-mail domain with no MX, or a disposable one', async function () {
    for (const email of ['someone@no-mx.example.com', 'someone@mailinator.com']) {
      const reply = await svc.post(validLead({ email }), { 'x-api-key': key });
      expectEnvelope(reply, 422, 'VERIFICATION_FAILED', 'rejected', true);
      expect(reply.body.errors).to.deep.equal([{ field: 'email', code: 'verification_failed', message: 'email failed e-mail verification' }]);
    }
  });

  it('VERIFICATION_FAILED 422: a toll-free number is not a consumer phone', async function () {
    const reply = await svc.post(validLead({ mobile: '+18005550199' }), { 'x-api-key': key });
    expectEnvelope(reply, 422, 'VERIFICATION_FAILED', 'rejected', true);
    expect((reply.body.errors as Array<{ field: string }>)[0]!.field).to.equal('mobile');
  });

  it('DUPLICATE 409: the same mobile, or the same e-mail, accepted before', async function () {
    const first = validLead();
    expect((await svc.post(first, { 'x-api-key': key })).status).to.equal(201);
    const sameMobile = await svc.post(validLead({ mobile: first.mobile }), { 'x-api-key': key });
    expectEnvelope(sameMobile, 409, 'DUPLICATE', 'rejected', true);
    const sameEmail = await svc.post(validLead({ email: String(first.email).toUpperCase() }), { 'x-api-key': key });
    expectEnvelope(sameEmail, 409, 'DUPLICATE', 'rejected', true);
  });

  it('DUPLICATE 409: errors has one entry per field that matched, never a value or the other supplier', async function () {
    const otherSupplier = await svc.key('supplier', 'sup-dup-other');
    const first = validLead({ sid: 'other-source', s1: 'other-click' });
    const firstReply = await svc.post(first, { 'x-api-key': otherSupplier });
    expect(firstReply.status).to.equal(201);
    const entry = (field: string) => ({ field, code: 'duplicate', message: `${field} matches a lead accepted within the duplicate window` });
    const national = String(first.mobile).slice(2);
    const cases: Array<[string, Record<string, unknown>, string[]]> = [
      ['same e-mail, another mobile', validLead({ email: first.email }), ['email']],
      ['same mobile (national form), another e-mail', validLead({ mobile: national }), ['mobile']],
      ['both', validLead({ email: first.email, mobile: first.mobile }), ['mobile', 'email']],
      ['both, as a test lead', validLead({ email: first.email, mobile: first.mobile, test: true }), ['mobile', 'email']],
    ];
    for (const [name, lead, fields] of cases) {
      const reply = await svc.post(lead, { 'x-api-key': key });
      expectEnvelope(reply, 409, 'DUPLICATE', 'rejected', true);
      expect(reply.body.errors, name).to.deep.equal(fields.map(entry));
      const rejected = (await svc.service.store.readStream(`lead-${reply.body.lead_id}`)).find((e) => e.type === 'LeadRejected')!;
      expect((rejected.data as { errors: unknown }).errors, name).to.deep.equal(fields.map(entry));
      for (const value of [first.email, first.mobile, national, 'sup-dup-other', 'other-source', 'other-click']) {
        expect(reply.text, `${name}: ${String(value)}`).to.not.contain(String(value));
      }
      const words = `${String(reply.body.message)} ${JSON.stringify(reply.body.errors)}`;
      expect(words, `${name}: the matched lead's id`).to.not.match(new RegExp(`\\b${String(firstReply.body.lead_id)}\\b`));
    }
  });

  it('MALFORMED_JSON 400, UNSUPPORTED_MEDIA_TYPE 415, PAYLOAD_TOO_LARGE 413: nothing recorded', async function () {
    const before = await svc.service.store.headPosition();
    expectEnvelope(await svc.post('{"first_name":', { 'x-api-key': key }), 400, 'MALFORMED_JSON', 'rejected', false);
    expectEnvelope(await svc.post('[1,2]', { 'x-api-key': key }), 400, 'MALFORMED_JSON', 'rejected', false);
    expectEnvelope(await svc.post('a=b', { 'x-api-key': key, 'content-type': 'application/x-www-form-urlencoded' }), 415, 'UNSUPPORTED_MEDIA_TYPE', 'rejected', false);
    // A compressed body is refused as such, not taken for malformed JSON.
    const gzipped = await svc.post(gzipSync(JSON.stringify(validLead())), { 'x-api-key': key, 'content-encoding': 'gzip' });
    expectEnvelope(gzipped, 415, 'UNSUPPORTED_MEDIA_TYPE', 'rejected', false);
    expect(gzipped.body.message).to.equal('Content-Encoding is not accepted: send the JSON body uncompressed.');
    // JSON in another charset is refused for its charset: the type it names is the right one.
    const utf16 = await svc.post(Buffer.from(`\ufeff${JSON.stringify(validLead())}`, 'utf16le'), { 'x-api-key': key, 'content-type': 'application/json; charset=utf-16' });
    expectEnvelope(utf16, 415, 'UNSUPPORTED_MEDIA_TYPE', 'rejected', false);
    expect(utf16.body.message).to.equal('The body must be JSON in UTF-8: send Content-Type application/json with no charset, or charset=utf-8.');
    const latin1 = await svc.post(JSON.stringify(validLead()), { 'x-api-key': key, 'content-type': 'application/json; charset=ISO-8859-1' });
    expect([latin1.status, latin1.body.message]).to.deep.equal([415, utf16.body.message]);
    expectEnvelope(await svc.post(validLead({ s1: 'x'.repeat(70_000) }), { 'x-api-key': key }), 413, 'PAYLOAD_TOO_LARGE', 'rejected', false);
    expect(await svc.service.store.headPosition()).to.deep.equal(before);
  });

  it('a UTF-8 body led by a byte-order mark is read as the JSON after it', async function () {
    const reply = await svc.post(`\ufeff${JSON.stringify(validLead())}`, { 'x-api-key': key, 'content-type': 'application/json; charset=utf-8' });
    expectEnvelope(reply, 201, 'SOLD', 'accepted', true);
  });

  it('UNAUTHORIZED 401 (missing, unknown, revoked key) and FORBIDDEN 403 (wrong role)', async function () {
    expectEnvelope(await svc.post(validLead()), 401, 'UNAUTHORIZED', 'rejected', false);
    expectEnvelope(await svc.post(validLead(), { 'x-api-key': 'lp_000000000000_nope' }), 401, 'UNAUTHORIZED', 'rejected', false);
    const doomed = await svc.key();
    expect((await svc.post(validLead(), { 'x-api-key': doomed })).status).to.equal(201);
    await svc.revoke(doomed);
    await svc.service.keys.refresh();
    expectEnvelope(await svc.post(validLead(), { 'x-api-key': doomed }), 401, 'UNAUTHORIZED', 'rejected', false);
    const analyst = await svc.key('analyst', 'ann');
    expectEnvelope(await svc.post(validLead(), { 'x-api-key': analyst }), 403, 'FORBIDDEN', 'rejected', false);
  });

  it('an admin key may post: the lead is decided like any other and its supplier is the admin key\'s name', async function () {
    const admin = await svc.key('admin', 'ops-desk');
    const reply = await svc.post(validLead(), { 'x-api-key': admin });
    expectEnvelope(reply, 201, 'SOLD', 'accepted', true);
    const events = await svc.service.store.readStream(`lead-${reply.body.lead_id}`);
    expect(events[0]!.metadata).to.include({ supplier_id: 'ops-desk' });
    expect(events[0]!.data).to.include({ supplier: 'ops-desk' });
    // Read back as that supplier: a supplier key of the same name sees it, another does not.
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const asSupplier = await svc.request('GET', `/functions/leads/${reply.body.lead_id}`, { 'x-api-key': await svc.key('supplier', 'ops-desk') });
    expect(asSupplier.status, asSupplier.text).to.equal(200);
    expect(asSupplier.body.lead).to.include({ supplier: 'ops-desk', lead_status: 'sold' });
    expect((await svc.request('GET', `/functions/leads/${reply.body.lead_id}`, { 'x-api-key': key })).status).to.equal(404);
    // Only the buyer and analyst roles are refused.
    expectEnvelope(await svc.post(validLead(), { 'x-api-key': await svc.key('buyer', 'acme-law') }), 403, 'FORBIDDEN', 'rejected', false);
  });

  it('a revoked key stops working without a refresh call', async function () {
    // The running service learns of the revocation by its key ring's poll, whose 250 ms interval
    // test/keys/key-ring.test.ts proves on a stubbed clock; here, that the served route uses it.
    const doomed = await svc.key();
    expect((await svc.post(validLead(), { 'x-api-key': doomed })).status).to.equal(201);
    await svc.revoke(doomed);
    const started = Date.now();
    let reply = await svc.post(validLead(), { 'x-api-key': doomed });
    while (reply.status !== 401 && Date.now() - started < 10_000) {
      await new Promise((r) => setTimeout(r, 50));
      reply = await svc.post(validLead(), { 'x-api-key': doomed });
    }
    expectEnvelope(reply, 401, 'UNAUTHORIZED', 'rejected', false);
  });

  it('HTTPS_REQUIRED 403 on the plain-HTTP listener', async function () {
    const reply = await svc.plainHttp('POST', '/functions/leads');
    expectEnvelope(reply, 403, 'HTTPS_REQUIRED', 'rejected', false);
  });

  it('NOT_FOUND 404 and METHOD_NOT_ALLOWED 405', async function () {
    expectEnvelope(await svc.request('GET', '/nope'), 404, 'NOT_FOUND', 'rejected', false);
    // GET lists leads; DELETE is no method of the route.
    const wrongMethod = await svc.request('DELETE', '/functions/leads');
    expectEnvelope(wrongMethod, 405, 'METHOD_NOT_ALLOWED', 'rejected', false);
    expect(wrongMethod.headers.allow).to.contain('POST').and.contain('GET');
  });

  it('RATE_LIMITED 429 with Retry-After once a key spends its burst', async function () {
    const limited = await TestService.start({ env: { RATE_LIMIT_PER_SECOND: '1', RATE_LIMIT_BURST: '2' } });
    try {
      const k = await limited.key();
      const replies = await Promise.all([1, 2, 3].map(() => limited.post('{', { 'x-api-key': k })));
      const statuses = replies.map((r) => r.status).sort();
      expect(statuses).to.deep.equal([400, 400, 429]);
      const refused = replies.find((r) => r.status === 429)!;
      expectEnvelope(refused, 429, 'RATE_LIMITED', 'error', false);
      expect(Number(refused.headers['retry-after'])).to.be.at.least(1);
    } finally {
      await limited.stop();
    }
  });

  it('IDEMPOTENCY_CONFLICT: the same key with another body is 422; a replay returns the original', async function () {
    const lead = validLead();
    const first = await svc.post(lead, { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect(first.status).to.equal(201);
    const replay = await svc.post(lead, { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expect(replay.status).to.equal(201);
    expect(replay.headers['idempotency-replayed']).to.equal('true');
    expect(replay.body).to.deep.equal(first.body);
    const other = await svc.post(validLead(), { 'x-api-key': key, 'idempotency-key': 'order-1' });
    expectEnvelope(other, 422, 'IDEMPOTENCY_CONFLICT', 'rejected', false);
  });

  it('IDEMPOTENCY_CONFLICT: a malformed key (empty, too long, a blank or a byte outside visible ASCII inside) is 422 naming the header, and records nothing', async function () {
    const head = await svc.service.store.headPosition();
    for (const malformed of ['', 'x'.repeat(256), 'order 1', 'order-\u00e9']) {
      const reply = await svc.post(validLead(), { 'x-api-key': key, 'idempotency-key': malformed });
      expectEnvelope(reply, 422, 'IDEMPOTENCY_CONFLICT', 'rejected', false);
      expect(reply.body.errors, JSON.stringify(malformed)).to.deep.equal([
        { field: 'Idempotency-Key', code: 'invalid_format', message: 'Idempotency-Key must be 1 to 255 visible ASCII characters.' },
      ]);
    }
    expect(await svc.service.store.headPosition()).to.deep.equal(head);
  });

  it('UNAVAILABLE 503 with Retry-After when the store cannot write; nothing half-written', async function () {
    // The lead's own append fails after its contacts were claimed: they must be given back.
    Object.assign(fault, { error: new EventStoreUnavailableError('disk full'), streams: /^lead-\d/ });
    const lead = validLead();
    const reply = await svc.post(lead, { 'x-api-key': key });
    expectEnvelope(reply, 503, 'UNAVAILABLE', 'error', false);
    expect(reply.headers['retry-after']).to.equal('1');
    fault.error = null;
    // It recovers without a restart, and the supplier's retry of the same lead after Retry-After
    // is not a duplicate of the lead that was never recorded.
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const retry = await svc.post(lead, { 'x-api-key': key });
    expect(retry.status, retry.text).to.equal(201);
  });

  it('INTERNAL_ERROR 500 for a bug, logged with the trace id, no stack in the response', async function () {
    fault.error = new TypeError('a bug');
    const reply = await svc.post(validLead(), { 'x-api-key': key });
    expectEnvelope(reply, 500, 'INTERNAL_ERROR', 'error', false);
    expect(reply.text).to.not.contain('TypeError');
    expect(reply.text).to.not.contain('.js:');
    expect(svc.logs.some((line) => line.includes(String(reply.body.trace_id)) && line.includes('a bug'))).to.equal(true);
  });

  it('trace_id comes from traceparent when one is given', async function () {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const reply = await svc.post(validLead(), { 'x-api-key': key, traceparent: `00-${traceId}-00f067aa0ba902b7-01` });
    expect(reply.body.trace_id).to.equal(traceId);
  });

  it('a traceparent of a later version is read by its first four fields, as W3C Trace Context asks; version ff and a malformed later one are not', async function () {
    const traceId = '0af7651916cd43dd8448eb211c80319c';
    const trace = async (traceparent: string) => (await svc.request('GET', '/healthz', { traceparent })).body.trace_id as string;
    expect(await trace(`01-${traceId}-b7ad6b7169203331-01`)).to.equal(traceId);
    expect(await trace(`cc-${traceId}-b7ad6b7169203331-01-what-a-later-version-adds`)).to.equal(traceId);
    for (const refused of [`ff-${traceId}-b7ad6b7169203331-01`, `01-${traceId}-b7ad6b7169203331-01x`, `00-${traceId}-b7ad6b7169203331-01-more`, `01-${traceId}-0000000000000000-01`]) {
      expect(await trace(refused), refused).to.not.equal(traceId);
    }
  });

  it('HSTS and the other security headers on HTTPS responses', async function () {
    const reply = await svc.request('GET', '/healthz');
    expect(reply.status).to.equal(200);
    expect(reply.headers['strict-transport-security']).to.match(/max-age=\d+/);
    expect(reply.headers['x-content-type-options']).to.equal('nosniff');
  });
});

import { expect } from 'chai';
import { openApiDocument } from '../../src/docs/openapi.js';
import { type Reply, TestService, validLead } from '../support/service.js';
import { DocumentReader } from '../support/openapi.js';

// The document against the running service: every answer below is looked up in the document by
// path, method and status, must be documented there, fit its schema, and carry a code the
// document lists for that status. A route that answers what its docs do not say fails here.

const routing = {
  buyers: [{ id: 'acme-law', price: 42.5, states: ['CA'], return_reasons: ['bad_phone'] }],
  buckets: [{ id: 'unsold', default: true }],
};

describe('OpenAPI document against real answers', function () {
  this.timeout(60_000);
  let svc: TestService;
  let reader: DocumentReader;
  const answers: Array<{ method: string; path: string; reply: Reply }> = [];

  before(async function () {
    reader = new DocumentReader(await openApiDocument());
    svc = await TestService.start({ routing });
    const supplier = await svc.key('supplier', 'sup-1');
    const buyer = await svc.key('buyer', 'acme-law');
    const analyst = await svc.key('analyst', 'ann');
    const as = (key: string) => ({ 'x-api-key': key });
    const call = async (method: string, path: string, headers: Record<string, string>, body?: unknown) => {
      const payload = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
      const reply = await svc.request(method, path, { ...(payload !== undefined ? { 'content-type': 'application/json' } : {}), ...headers }, payload);
      answers.push({ method, path, reply });
      return reply;
    };
    const post = (body: unknown, headers: Record<string, string> = as(supplier)) => call('POST', '/functions/leads', headers, body);

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
    const leadId = soldReply.body.lead_id as number;
    await svc.service.projections.waitFor(await svc.service.store.headPosition());

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
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    await call('GET', '/functions/feedback?type=return', as(supplier));
    await call('GET', '/healthz', {});
    await call('GET', '/readyz', {});
    await call('GET', '/metrics', {});
    await call('GET', '/docs', {});
    await call('GET', '/docs/openapi.json', {});
    await call('DELETE', '/functions/leads', as(supplier));
    await call('GET', '/functions/nothing-here', {});
    // Refused by the listener before any route: documented on every route all the same.
    const oversized = await call('GET', '/functions/deliveries', { ...as(analyst), 'x-filler': 'f'.repeat(20 * 1024) });
    expect(oversized.status).to.equal(431);
    answers.push({ method: 'POST', path: '/functions/leads', reply: await svc.plainHttp('POST', '/functions/leads') });
  });
  after(async () => svc?.stop());

  it('every answer is documented for its route and status, fits the schema and carries a listed code', function () {
    const problems = answers.flatMap(({ method, path, reply }) =>
      reader.check(method, path, reply.status, String(reply.headers['content-type'] ?? ''), reply.body),
    );
    expect(problems).to.deep.equal([]);
  });

  it('the answers cover the lead outcomes a supplier can cause and the statuses of every read-back route', function () {
    const codes = new Set(answers.map(({ reply }) => reply.body.code));
    for (const code of ['SOLD', 'UNSOLD', 'INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'MALFORMED_JSON', 'UNSUPPORTED_MEDIA_TYPE',
      'PAYLOAD_TOO_LARGE', 'UNAUTHORIZED', 'FORBIDDEN', 'HTTPS_REQUIRED', 'NOT_FOUND', 'METHOD_NOT_ALLOWED', 'IDEMPOTENCY_CONFLICT',
      'ALREADY_RETURNED', 'OK']) {
      expect(codes, code).to.include(code);
    }
    const replayed = answers.find(({ reply }) => reply.headers['idempotency-replayed'] === 'true');
    expect(replayed?.reply.status).to.equal(201);
  });
});

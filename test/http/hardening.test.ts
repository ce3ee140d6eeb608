// What README's Security section promises an attacker, through the real HTTPS server: no CORS, a key
// only in its header, no method override, and one 401 for every kind of bad key.
import { expect } from 'chai';
import { TestService } from '../support/service.js';

describe('HTTP hardening', function () {
  this.timeout(30_000);
  let svc: TestService;
  let supplier: string;
  let admin: string;

  before(async function () {
    svc = await TestService.start();
    supplier = await svc.key('supplier', 'sup-1');
    admin = await svc.key('admin', 'root');
  });
  after(async () => svc?.stop());

  const corsHeaders = (headers: Record<string, unknown>) => Object.keys(headers).filter((name) => name.startsWith('access-control-'));

  it('sends no CORS header, to a preflight or a request from another origin, and refuses the preflight', async function () {
    const origin = { origin: 'https://attacker.example' };
    const preflight = await svc.request('OPTIONS', '/functions/leads', { ...origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-api-key' });
    expect(preflight.status).to.equal(405);
    const read = await svc.request('GET', '/functions/me', { ...origin, 'x-api-key': supplier });
    expect(read.status).to.equal(200);
    for (const reply of [preflight, read]) expect(corsHeaders(reply.headers)).to.deep.equal([]);
  });

  it('reads a key only from X-API-KEY, never from the query string', async function () {
    for (const name of ['api_key', 'apiKey', 'key', 'x-api-key', 'X-API-KEY']) {
      const reply = await svc.request('GET', `/functions/me?${name}=${supplier}`);
      expect(reply.status, name).to.equal(401);
    }
  });

  it('reads no method-override header', async function () {
    // A GET that asks to be a POST stays a read: no erasure is made.
    const override = { 'x-api-key': admin, 'x-http-method-override': 'POST', 'x-http-method': 'POST', 'x-method-override': 'POST' };
    const reply = await svc.request('GET', '/functions/erasures', override);
    expect(reply.status, reply.text).to.equal(200);
    expect(reply.body.items).to.deep.equal([]);
  });

  it('answers one 401, the same body, for a malformed, unknown, wrong, revoked or repeated key', async function () {
    const revoked = await svc.key('supplier', 'sup-1');
    await svc.revoke(revoked);
    await svc.service.keys.refresh();
    const id = supplier.split('_')[1]!;
    const keys: Array<string | string[]> = ['abc', `lp_000000000000_${'a'.repeat(43)}`, `lp_${id}_${'a'.repeat(43)}`, revoked, [supplier, supplier]];
    const replies = [];
    for (const key of keys) replies.push(await svc.request('GET', '/functions/me', { 'x-api-key': key as string }));
    expect(replies.map((r) => r.status)).to.deep.equal(keys.map(() => 401));
    const bodies = new Set(replies.map((r) => JSON.stringify({ ...r.body, trace_id: null })));
    expect([...bodies]).to.have.length(1);
  });
});

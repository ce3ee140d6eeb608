import { expect } from 'chai';
import { formatKey, issueKey, newKeyMaterial, type Role } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { ENVELOPE_FIELDS, TestService, validLead } from '../support/service.js';

// A supplier's onboarding script creates a key (`leadpost keys create`, another process) and posts
// with it at once. The service follows the keys stream by polling; here its polls are an hour
// apart, so only the lookup of a key it has not seen can find the new key. Through the real HTTPS
// server and embedded stores.

describe('a key made a moment ago, before the service has polled the keys stream', function () {
  this.timeout(30_000);
  let svc: TestService;
  before(async () => (svc = await TestService.start({ keyPollMs: 3_600_000 })));
  after(async () => svc.stop());

  /** Appended as the CLI does, without telling the service. */
  const made = async (role: Role, name: string) => {
    const { id, secret } = newKeyMaterial();
    await changeKeys(svc.service.store, (state) => issueKey(state, { role, name, now: Date.now(), id, secret }));
    return formatKey(id, secret);
  };

  it('posts a lead with it at once, and reads with a buyer key made the same way', async function () {
    const supplier = await made('supplier', 'sup-new');
    expect(svc.service.keys.authenticate(supplier), 'the ring has not read it yet').to.equal(null);
    const posted = await svc.post(validLead(), { 'x-api-key': supplier });
    expect(posted.status, posted.text).to.equal(201);
    expect(posted.body).to.include({ code: 'SOLD' });
    const buyer = await made('buyer', 'acme-law');
    const me = await svc.request('GET', '/functions/me', { 'x-api-key': buyer });
    expect(me.status, me.text).to.equal(200);
  });

  it('a key nobody made is still 401, the envelope naming nothing of it', async function () {
    const { id, secret } = newKeyMaterial();
    const refused = await svc.post(validLead(), { 'x-api-key': formatKey(id, secret) });
    expect(refused.status).to.equal(401);
    expect(Object.keys(refused.body)).to.include.members(ENVELOPE_FIELDS);
    expect(refused.body).to.include({ code: 'UNAUTHORIZED' });
    expect(refused.text).to.not.contain(id);
  });
});

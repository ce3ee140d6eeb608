// A verification provider is sent a consumer's phone or e-mail: an answer that redirects must not
// carry them anywhere else. Through the real service, with two local providers: the one configured
// answers 307 (which keeps method and body) pointing at the other. Nor may one hold the service
// reading an answer of megabytes.
import { expect } from 'chai';
import { TestService, leadWith } from '../support/service.js';
import { startProvider, type ProviderServer } from './provider-server.js';

describe('an external verification provider that redirects', function () {
  this.timeout(30_000);
  let configured: ProviderServer;
  let elsewhere: ProviderServer;
  let svc: TestService;

  before(async function () {
    elsewhere = await startProvider();
    elsewhere.handle((_req, _body, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"result":"pass"}'));
    configured = await startProvider();
    configured.handle((_req, _body, res) => res.writeHead(307, { location: elsewhere.url }).end());
    svc = await TestService.start({ env: { PHONE_VERIFIER_URL: configured.url, EMAIL_VERIFIER_URL: configured.url } });
  });
  after(async function () {
    await svc?.stop();
    await configured?.close();
    await elsewhere?.close();
  });

  it('is not followed: the contacts reach only the configured provider, and the checks say unknown', async function () {
    const email = 'redirected.consumer@example.com';
    const mobile = '+12134680177';
    const posted = await svc.post(leadWith(email, mobile), { 'x-api-key': await svc.key('supplier', 'sup-1') });
    expect(posted.status, posted.text).to.be.oneOf([200, 201]);
    expect(configured.bodies.map((b) => JSON.parse(b) as unknown)).to.have.deep.members([{ value: mobile }, { value: email }]);
    expect(elsewhere.bodies, 'what the redirect target was sent').to.deep.equal([]);
    const read = await svc.request('GET', `/functions/leads/${String(posted.body.lead_id)}`, { 'x-api-key': await svc.key('admin', 'root') });
    expect((read.body.lead as { enrichment: unknown }).enrichment).to.include({ phone: 'unknown', email: 'unknown' });
  });
});

describe('an external verification provider that answers far more than an answer', function () {
  this.timeout(30_000);
  let provider: ProviderServer;
  let svc: TestService;
  let served = 0;

  before(async function () {
    provider = await startProvider();
    // A valid answer padded to 8 MB: parsed whole, it would pass.
    const huge = JSON.stringify({ result: 'pass', detail: 'mobile', padding: 'x'.repeat(8 * 1024 * 1024) });
    provider.handle((_req, _body, res) => {
      served += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end(huge);
    });
    svc = await TestService.start({ env: { PHONE_VERIFIER_URL: provider.url } });
  });
  after(async function () {
    await svc?.stop();
    await provider?.close();
  });

  it('is not read to its end: the phone check says unknown', async function () {
    const posted = await svc.post(leadWith('padded.answer@example.com', '+12134680178'), { 'x-api-key': await svc.key('supplier', 'sup-1') });
    expect(posted.status, posted.text).to.be.oneOf([200, 201]);
    expect(served).to.equal(1);
    const read = await svc.request('GET', `/functions/leads/${String(posted.body.lead_id)}`, { 'x-api-key': await svc.key('admin', 'root') });
    expect((read.body.lead as { enrichment: unknown }).enrichment).to.include({ phone: 'unknown' });
  });
});

import { expect } from 'chai';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createHttpVerifier } from '../../src/enrichment/http-provider.js';
import { startProvider, type ProviderServer } from './provider-server.js';

const json = (status: number, body: string) => (_req: IncomingMessage, _body: string, res: ServerResponse) => {
  res.writeHead(status, { 'content-type': 'application/json' }).end(body);
};

describe('HTTP provider adapter', function () {
  let provider: ProviderServer;
  const signal = new AbortController().signal;

  beforeEach(async function () { provider = await startProvider(); });
  afterEach(async function () { await provider.close(); });

  it('POSTs the value as JSON and reports a pass with the provider host', async function () {
    let seen: { method?: string; type?: string } = {};
    provider.handle((req, _body, res) => {
      seen = { method: req.method, type: req.headers['content-type'] };
      json(200, '{"result":"pass","detail":"Mobile"}')(req, _body, res);
    });
    const verifier = createHttpVerifier({ name: 'phone-api', url: provider.url, timeoutMs: 500 });
    expect(verifier.name).to.equal('phone-api');
    expect(await verifier.verify('+12025550143', signal)).to.deep.equal({ result: 'pass', provider: `http:${provider.host}`, detail: 'mobile' });
    expect(seen).to.deep.equal({ method: 'POST', type: 'application/json' });
    expect(provider.bodies.map((b) => JSON.parse(b))).to.deep.equal([{ value: '+12025550143' }]);
  });

  it('reports a fail, and replaces a missing or free-text detail', async function () {
    const verifier = createHttpVerifier({ name: 'p', url: provider.url, timeoutMs: 500 });
    provider.handle(json(200, '{"result":"fail","detail":"toll_free"}'));
    expect(await verifier.verify('x', signal)).to.deep.equal({ result: 'fail', provider: `http:${provider.host}`, detail: 'toll_free' });
    provider.handle(json(200, '{"result":"fail"}'));
    expect((await verifier.verify('x', signal)).detail).to.equal('unspecified');
    provider.handle(json(200, '{"result":"unknown","detail":"jo@example.com is not reachable"}'));
    expect(await verifier.verify('x', signal)).to.deep.equal({ result: 'unknown', provider: `http:${provider.host}`, detail: 'unspecified' });
    // A provider echoing what it checked: a national number, an e-mail's local part, its domain.
    for (const echoed of ['2135550143', 'ada.lovelace', 'lovelace-family.org', 'line2']) {
      provider.handle(json(200, JSON.stringify({ result: 'pass', detail: echoed })));
      expect((await verifier.verify('x', signal)).detail, echoed).to.equal('unspecified');
    }
  });

  it('turns a 500, bad JSON or a bad shape into unknown provider_error', async function () {
    const verifier = createHttpVerifier({ name: 'p', url: provider.url, timeoutMs: 500 });
    const cases = [
      json(500, '{"result":"pass"}'),
      json(200, 'not json'),
      json(200, '"pass"'),
      json(200, 'null'),
      json(200, '{"result":"maybe"}'),
      json(200, '{"result":"pass","detail":42}'),
    ];
    for (const [i, handler] of cases.entries()) {
      provider.handle(handler);
      expect(await verifier.verify('x', signal), `case ${i}`).to.deep.equal({ result: 'unknown', provider: `http:${provider.host}`, detail: 'provider_error' });
    }
  });

  it('gives unknown timeout when the provider hangs past its timeout', async function () {
    provider.handle(() => undefined);
    const verifier = createHttpVerifier({ name: 'p', url: provider.url, timeoutMs: 100 });
    const started = performance.now();
    expect(await verifier.verify('x', signal)).to.deep.equal({ result: 'unknown', provider: `http:${provider.host}`, detail: 'timeout' });
    // Not before its timeout; and well before the hanging provider would ever answer. The upper
    // bound is loose on purpose: a busy machine delays the answer, never the behaviour.
    expect(performance.now() - started).to.be.within(90, 5000);
  });

  it('stops when the caller aborts, and survives a refused connection', async function () {
    provider.handle(() => undefined);
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 30);
    const result = await createHttpVerifier({ name: 'p', url: provider.url, timeoutMs: 5_000 }).verify('x', controller.signal);
    expect(result.detail).to.equal('provider_error');
    const url = provider.url;
    await provider.close();
    expect((await createHttpVerifier({ name: 'p', url, timeoutMs: 500 }).verify('x', signal)).detail).to.equal('provider_error');
    provider = await startProvider();
  });

  it('rejects a malformed URL at construction, not per lead', function () {
    expect(() => createHttpVerifier({ name: 'p', url: 'not a url' })).to.throw();
  });
});

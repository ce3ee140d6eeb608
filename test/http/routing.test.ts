import { expect } from 'chai';
import {
  ENVELOPE_FIELDS, postLeadTo, SECURITY_HEADERS, send, soldResult, startTestServer, SUPPLIER_KEY, type Reply, type TestServer,
} from './helpers.js';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const TRACEPARENT = `00-${TRACE_ID}-00f067aa0ba902b7-01`;

function expectSecurityHeaders(reply: Reply): void {
  for (const [name, value] of Object.entries(SECURITY_HEADERS)) expect(reply.headers[name], name).to.equal(value);
  expect(reply.headers['x-trace-id']).to.match(/^[0-9a-f]{32}$/);
  expect(reply.headers['content-type']).to.equal('application/json; charset=utf-8');
}

describe('http: routes, headers and trace ids', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(() => server.close());

  it('GET /healthz answers 200 with ok, trace_id, code and message', async () => {
    const reply = await send({ port: server.httpsPort, path: '/healthz' });
    expect(reply.status).to.equal(200);
    expect(reply.json()).to.deep.equal({ ok: true, trace_id: reply.headers['x-trace-id'], code: 'OK', message: 'up' });
    expectSecurityHeaders(reply);
  });

  it('404 NOT_FOUND envelope for an unknown path', async () => {
    const reply = await send({ port: server.httpsPort, path: '/functions/nope?email=ada@example.com' });
    expect(reply.status).to.equal(404);
    const body = reply.json();
    expect(Object.keys(body)).to.have.members(ENVELOPE_FIELDS);
    expect(body).to.include({ code: 'NOT_FOUND', ok: false, acceptance: 'rejected', Response: 'Failure' });
    expectSecurityHeaders(reply);
  });

  for (const [method, path, allow] of [
    ['GET', '/functions/leads', ['POST']],
    ['PUT', '/functions/leads', ['POST']],
    ['OPTIONS', '/functions/leads', ['POST']],
    ['POST', '/healthz', ['GET', 'HEAD']],
    ['DELETE', '/healthz', ['GET', 'HEAD']],
  ] as const) {
    it(`405 with Allow for ${method} ${path}`, async () => {
      const reply = await send({ port: server.httpsPort, method, path, headers: { 'x-api-key': SUPPLIER_KEY } });
      expect(reply.status).to.equal(405);
      expect(reply.headers.allow?.split(', ')).to.have.members([...allow]);
      expect(reply.json()).to.include.all.keys(...ENVELOPE_FIELDS);
      expect(reply.json().code).to.equal('METHOD_NOT_ALLOWED');
      expectSecurityHeaders(reply);
    });
  }

  it('sets the security headers on rejections and errors too', async () => {
    expectSecurityHeaders(await postLeadTo(server.httpsPort, '{}', { 'x-api-key': undefined }));
    expectSecurityHeaders(await postLeadTo(server.httpsPort, '{', {}));
    server.respondWith(async () => {
      throw new Error('boom');
    });
    try {
      expectSecurityHeaders(await postLeadTo(server.httpsPort, '{}'));
    } finally {
      server.respondWith(async (req) => soldResult(req.traceId));
    }
  });

  describe('trace id', () => {
    it('takes the trace id of a valid traceparent', async () => {
      const reply = await send({ port: server.httpsPort, path: '/nowhere', headers: { traceparent: TRACEPARENT } });
      expect(reply.headers['x-trace-id']).to.equal(TRACE_ID);
      expect(reply.json().trace_id).to.equal(TRACE_ID);
    });

    it('gives the same trace id to postLead', async () => {
      await postLeadTo(server.httpsPort, '{}', { traceparent: TRACEPARENT });
      expect(server.calls.at(-1)?.traceId).to.equal(TRACE_ID);
    });

    const invalid = [
      ['all-zero trace id', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`],
      ['all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
      ['upper-case hex', `00-${TRACE_ID.toUpperCase()}-00f067aa0ba902b7-01`],
      ['version ff, which is invalid', `ff-${TRACE_ID}-00f067aa0ba902b7-01`],
      ['a short trace id', `00-${TRACE_ID.slice(1)}-00f067aa0ba902b7-01`],
      ['trailing data', `${TRACEPARENT}-extra`],
      ['garbage', 'hello'],
    ];
    for (const [name, traceparent] of invalid) {
      it(`generates one for a traceparent with ${name}`, async () => {
        const reply = await send({ port: server.httpsPort, path: '/healthz', headers: { traceparent } });
        expect(reply.headers['x-trace-id']).to.match(/^[0-9a-f]{32}$/).and.not.equal(TRACE_ID);
        expect(reply.json().trace_id).to.equal(reply.headers['x-trace-id']);
      });
    }

    it('generates a fresh one per request without traceparent', async () => {
      const first = await send({ port: server.httpsPort, path: '/healthz' });
      const second = await send({ port: server.httpsPort, path: '/healthz' });
      expect(first.headers['x-trace-id']).to.match(/^[0-9a-f]{32}$/).and.not.equal(second.headers['x-trace-id']);
    });
  });

  describe('default body limit (64 KiB)', () => {
    it('parses a body nested 32 000 levels deep without falling over', async () => {
      const depth = 32_000;
      const reply = await postLeadTo(server.httpsPort, `{"a":${'['.repeat(depth)}${']'.repeat(depth)}}`);
      expect(reply.status).to.equal(201);
    });

    it('413 one byte over 65 536', async () => {
      const body = JSON.stringify({ pad: 'x'.repeat(65_537 - 10) });
      expect(Buffer.byteLength(body)).to.equal(65_537);
      const reply = await postLeadTo(server.httpsPort, body);
      expect(reply.status).to.equal(413);
      expect(reply.json().code).to.equal('PAYLOAD_TOO_LARGE');
    });
  });
});

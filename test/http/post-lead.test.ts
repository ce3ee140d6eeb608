import { request as httpsRequest } from 'node:https';
import { expect } from 'chai';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import {
  BUYER_KEY, collect, ENVELOPE_FIELDS, postLeadTo, startTestServer, SUPPLIER, SUPPLIER_KEY,
  soldResult, type Reply, type TestServer,
} from './helpers.js';
import { until } from '../support/until.js';

const LEAD = JSON.stringify({ first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' });

function expectEnvelope(reply: Reply, status: number, code: string): Record<string, unknown> {
  expect(reply.status, reply.text).to.equal(status);
  expect(reply.headers['content-type']).to.equal('application/json; charset=utf-8');
  const body = reply.json();
  expect(body).to.include.all.keys(...ENVELOPE_FIELDS);
  expect(body.code).to.equal(code);
  expect(body.ok).to.equal(false);
  expect(body.trace_id).to.equal(reply.headers['x-trace-id']);
  return body;
}

describe('http: POST /functions/leads', () => {
  let server: TestServer;
  beforeEach(async () => {
    server = await startTestServer({ limits: { bodyBytes: 1024 } });
  });
  afterEach(() => server.close());

  it('hands the principal, trace id, parsed body, raw bytes and idempotency key to postLead and sends its answer', async () => {
    server.respondWith(async (req) => soldResult(req.traceId, true));
    const reply = await postLeadTo(server.httpsPort, LEAD, { 'idempotency-key': 'abc-123' });
    expect(reply.status).to.equal(201);
    expect(reply.headers['idempotency-replayed']).to.equal('true');
    expect(reply.headers['content-type']).to.equal('application/json; charset=utf-8');
    const body = reply.json();
    expect(body).to.include({ ok: true, code: 'SOLD', lead_id: 42, revenue: 12.5 });
    expect(reply.headers['x-trace-id']).to.equal(body.trace_id);
    expect(server.calls).to.have.length(1);
    const call = server.calls[0]!;
    expect(call.principal).to.deep.equal(SUPPLIER);
    expect(call.traceId).to.equal(body.trace_id);
    expect({ ...call.body }).to.deep.equal(JSON.parse(LEAD));
    expect(call.rawBody.toString('utf8')).to.equal(LEAD);
    expect(call.idempotencyKey).to.equal('abc-123');
  });

  it('passes no idempotency key when the header is absent', async () => {
    await postLeadTo(server.httpsPort, LEAD);
    expect(server.calls[0]!.idempotencyKey).to.equal(undefined);
  });

  describe('authentication and role', () => {
    it('401 without X-API-KEY', async () => {
      const reply = await postLeadTo(server.httpsPort, LEAD, { 'x-api-key': undefined });
      const body = expectEnvelope(reply, 401, 'UNAUTHORIZED');
      expect(body).to.include({ acceptance: 'rejected', Response: 'Failure', lead_id: null });
    });

    it('401 with an unknown or empty key', async () => {
      expectEnvelope(await postLeadTo(server.httpsPort, LEAD, { 'x-api-key': 'lp_nope' }), 401, 'UNAUTHORIZED');
      expectEnvelope(await postLeadTo(server.httpsPort, LEAD, { 'x-api-key': '' }), 401, 'UNAUTHORIZED');
    });

    it('401 when X-API-KEY is repeated, even with valid keys', async () => {
      const reply = await postLeadTo(server.httpsPort, LEAD, { 'x-api-key': [SUPPLIER_KEY, SUPPLIER_KEY] });
      expectEnvelope(reply, 401, 'UNAUTHORIZED');
    });

    it('403 for a key whose role is not supplier', async () => {
      expectEnvelope(await postLeadTo(server.httpsPort, LEAD, { 'x-api-key': BUYER_KEY }), 403, 'FORBIDDEN');
    });

    it('checks the key before anything about the body', async () => {
      expectEnvelope(await postLeadTo(server.httpsPort, '{', { 'x-api-key': undefined, 'content-type': 'text/plain' }), 401, 'UNAUTHORIZED');
      expectEnvelope(await postLeadTo(server.httpsPort, '{', { 'x-api-key': BUYER_KEY, 'content-type': 'text/plain' }), 403, 'FORBIDDEN');
      expect(server.calls).to.have.length(0);
    });
  });

  describe('content type', () => {
    for (const type of [undefined, 'text/plain', 'application/jsonx', 'application/x-www-form-urlencoded', 'application/json; charset=latin1']) {
      it(`415 for ${type ?? 'no Content-Type'}`, async () => {
        const reply = await postLeadTo(server.httpsPort, LEAD, { 'content-type': type });
        expectEnvelope(reply, 415, 'UNSUPPORTED_MEDIA_TYPE');
      });
    }

    for (const type of ['application/json', 'Application/JSON; Charset=UTF-8', 'application/json;charset="utf-8"']) {
      it(`accepts ${type}`, async () => {
        expect((await postLeadTo(server.httpsPort, LEAD, { 'content-type': type })).status).to.equal(201);
      });
    }

    it('415 comes before 413', async () => {
      const reply = await postLeadTo(server.httpsPort, 'x'.repeat(5000), { 'content-type': 'text/plain' });
      expectEnvelope(reply, 415, 'UNSUPPORTED_MEDIA_TYPE');
    });
  });

  describe('body size', () => {
    it('accepts a body of exactly the limit', async () => {
      const body = JSON.stringify({ pad: 'x'.repeat(1024 - 10) });
      expect(Buffer.byteLength(body)).to.equal(1024);
      expect((await postLeadTo(server.httpsPort, body)).status).to.equal(201);
    });

    it('413 by Content-Length before a byte of the body is sent', async () => {
      const reply = await new Promise<Reply>((resolve, reject) => {
        const req = httpsRequest({
          host: '127.0.0.1', port: server.httpsPort, method: 'POST', path: '/functions/leads', agent: false, rejectUnauthorized: false,
          headers: { 'content-type': 'application/json', 'x-api-key': SUPPLIER_KEY, 'content-length': '1025' },
        }, (res) => collect(res, resolve, reject));
        req.on('error', () => undefined);
        req.flushHeaders();
      });
      expectEnvelope(reply, 413, 'PAYLOAD_TOO_LARGE');
      expect(reply.headers.connection).to.equal('close');
      expect(server.calls).to.have.length(0);
    });

    it('413 while a chunked body streams past the limit, without waiting for its end', async () => {
      let sent = 0;
      const reply = await new Promise<Reply>((resolve, reject) => {
        const req = httpsRequest({
          host: '127.0.0.1', port: server.httpsPort, method: 'POST', path: '/functions/leads', agent: false, rejectUnauthorized: false,
          headers: { 'content-type': 'application/json', 'x-api-key': SUPPLIER_KEY },
        }, (res) => {
          clearInterval(pump);
          collect(res, resolve, reject);
        });
        // The server may reset the connection while we are still writing; the reply is what counts.
        req.on('error', () => undefined);
        req.write('{"pad":"');
        const pump = setInterval(() => {
          if (sent < 64 * 1024) {
            req.write('x'.repeat(256));
            sent += 256;
          }
        }, 1);
      });
      expectEnvelope(reply, 413, 'PAYLOAD_TOO_LARGE');
      expect(sent, 'answered long before the client stopped').to.be.below(64 * 1024);
      expect(server.calls).to.have.length(0);
    });
  });

  it('forgets a client that hangs up mid-body and keeps serving', async () => {
    await new Promise<void>((resolve) => {
      const req = httpsRequest({
        host: '127.0.0.1', port: server.httpsPort, method: 'POST', path: '/functions/leads', agent: false, rejectUnauthorized: false,
        headers: { 'content-type': 'application/json', 'x-api-key': SUPPLIER_KEY, 'content-length': '500' },
      });
      req.on('error', () => resolve());
      req.write('{"first_name":"Ada"', () => setTimeout(() => req.destroy(), 50));
    });
    await until('the access log line of the cut-off post', () => server.logs().some((line) => line.msg === 'request'));
    expect(server.logs().find((line) => line.msg === 'request')).to.include({ status: 400 });
    expect(server.calls).to.have.length(0);
    expect((await postLeadTo(server.httpsPort, LEAD)).status).to.equal(201);
  });

  describe('malformed bodies', () => {
    const cases: Array<[string, string | Buffer]> = [
      ['invalid JSON', '{"a":'],
      ['an empty body', ''],
      ['only whitespace', '  \n '],
      ['invalid UTF-8', Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])],
      ['a JSON array', '[{"a":1}]'],
      ['a JSON string', '"lead"'],
      ['JSON null', 'null'],
      ['a JSON number', '42'],
      ['a JSON boolean', 'true'],
      ['two JSON objects', '{}{}'],
    ];
    for (const [name, body] of cases) {
      it(`400 for ${name}`, async () => {
        expectEnvelope(await postLeadTo(server.httpsPort, body), 400, 'MALFORMED_JSON');
        expect(server.calls).to.have.length(0);
      });
    }

    it('survives deep nesting within the limit', async () => {
      const depth = 150;
      const body = `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
      expect((await postLeadTo(server.httpsPort, body)).status).to.equal(201);
    });
  });

  it('hands over a body whose __proto__ and constructor keys are inert own data', async () => {
    const body = '{"__proto__":{"polluted":true},"constructor":{"prototype":{"polluted":true}},"nested":{"__proto__":{"polluted":true}},"list":[{"x":1}]}';
    expect((await postLeadTo(server.httpsPort, body)).status).to.equal(201);
    const received = server.calls[0]!.body;
    expect(Object.getPrototypeOf(received)).to.equal(null);
    expect(Object.getPrototypeOf(received.nested)).to.equal(null);
    expect(Object.getPrototypeOf((received.list as unknown[])[0])).to.equal(null);
    expect(Array.isArray(received.list)).to.equal(true);
    expect(Object.keys(received)).to.deep.equal(['__proto__', 'constructor', 'nested', 'list']);
    const spread: Record<string, unknown> = { ...received };
    expect(Object.getPrototypeOf(spread)).to.equal(Object.prototype);
    expect(Object.hasOwn(spread, '__proto__')).to.equal(true);
    expect(({} as Record<string, unknown>).polluted).to.equal(undefined);
    expect('toString' in received, 'nothing inherited').to.equal(false);
  });

  describe('failures of the command', () => {
    it('503 UNAVAILABLE with Retry-After when the event store is unavailable', async () => {
      server.respondWith(async () => {
        throw new EventStoreUnavailableError('disk full at /var/lib/leadpost');
      });
      const reply = await postLeadTo(server.httpsPort, LEAD);
      const body = expectEnvelope(reply, 503, 'UNAVAILABLE');
      expect(body).to.include({ acceptance: 'error', Response: 'Error' });
      expect(reply.headers['retry-after']).to.equal('1');
      expect(reply.text).not.to.include('disk full');
    });

    it('503 when the unavailable error is wrapped', async () => {
      server.respondWith(async () => {
        throw new Error('append failed', { cause: new EventStoreUnavailableError('down') });
      });
      expectEnvelope(await postLeadTo(server.httpsPort, LEAD), 503, 'UNAVAILABLE');
    });

    it('500 INTERNAL_ERROR for any other error: no message, no stack; logged with the trace id', async () => {
      server.respondWith(async () => {
        throw new Error('secret internals: ada@example.com');
      });
      const reply = await postLeadTo(server.httpsPort, LEAD);
      const body = expectEnvelope(reply, 500, 'INTERNAL_ERROR');
      expect(Object.keys(body)).to.have.members(ENVELOPE_FIELDS);
      expect(body).to.include({ acceptance: 'error', Response: 'Error' });
      expect(reply.text).not.to.include('secret internals');
      expect(reply.text).not.to.match(/\bat .*\.js/);
      const logged = server.logs().find((line) => line.msg === 'unhandled error');
      expect(logged?.trace_id).to.equal(body.trace_id);
      expect((logged?.err as { stack?: string }).stack).to.match(/post-lead\.test\.(ts|js)/);
    });

    it('500 when the command answers with an outcome the service does not have', async () => {
      server.respondWith(async (req) => {
        const sold = soldResult(req.traceId);
        return sold.kind === 'recorded' ? { ...sold, outcome: { ...sold.outcome, code: 'NO_SUCH_OUTCOME' as never } } : sold;
      });
      expectEnvelope(await postLeadTo(server.httpsPort, LEAD), 500, 'INTERNAL_ERROR');
    });
  });
});

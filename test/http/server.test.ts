import { connect as plainConnect } from 'node:net';
import { connect } from 'node:tls';
import { expect } from 'chai';
import { createApp } from '../../src/http/app.js';
import { createLogger } from '../../src/http/logger.js';
import { startServers } from '../../src/http/server.js';
import { TestService, validLead } from '../support/service.js';
import { ENVELOPE_FIELDS, postLeadTo, send, startTestServer, testTls, type TestServer } from './helpers.js';

const TRACE_ID = '0af7651916cd43dd8448eb211c80319c';

describe('http: listeners', () => {
  describe('without TRUST_PROXY', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ trustProxy: false });
    });
    after(() => server.close());

    it('reports the real ports when asked for port 0', () => {
      expect(server.httpsPort).to.be.above(0);
      expect(server.httpPort).to.be.above(0).and.not.equal(server.httpsPort);
    });

    it('answers every plain-HTTP request with 403 HTTPS_REQUIRED', async () => {
      for (const [method, path] of [['GET', '/healthz'], ['POST', '/functions/leads'], ['GET', '/nowhere']] as const) {
        const reply = await send({ port: server.httpPort, plain: true, method, path, body: method === 'POST' ? '{}' : undefined });
        expect(reply.status).to.equal(403);
        expect(reply.headers['content-type']).to.equal('application/json; charset=utf-8');
        const body = reply.json();
        expect(Object.keys(body)).to.have.members(ENVELOPE_FIELDS);
        expect(body).to.include({ code: 'HTTPS_REQUIRED', ok: false, acceptance: 'rejected', trace_id: reply.headers['x-trace-id'] });
        expect(reply.headers['x-content-type-options']).to.equal('nosniff');
        expect(reply.headers['strict-transport-security'], 'HSTS is meaningless over HTTP (RFC 6797 §7.2)').to.equal(undefined);
      }
      expect(server.calls).to.have.length(0);
    });

    it('keeps the trace id of a traceparent on the plain listener', async () => {
      const reply = await send({ port: server.httpPort, plain: true, path: '/healthz', headers: { traceparent: `00-${TRACE_ID}-b7ad6b7169203331-01` } });
      expect(reply.headers['x-trace-id']).to.equal(TRACE_ID);
    });

    it('ignores X-Forwarded-Proto', async () => {
      const reply = await send({ port: server.httpPort, plain: true, path: '/healthz', headers: { 'x-forwarded-proto': 'https' } });
      expect(reply.status).to.equal(403);
      expect(reply.json().code).to.equal('HTTPS_REQUIRED');
    });

    it('431 with a JSON body for headers over 16 KiB, and keeps serving', async () => {
      const reply = await send({ port: server.httpsPort, path: '/healthz', headers: { 'x-padding': 'x'.repeat(20 * 1024) } });
      expect(reply.status).to.equal(431);
      expect(reply.headers['content-type']).to.equal('application/json; charset=utf-8');
      expect(reply.headers['x-trace-id']).to.equal(reply.json().trace_id);
      expect(reply.json()).to.include.all.keys(...ENVELOPE_FIELDS);
      expect((await send({ port: server.httpsPort, path: '/healthz' })).status).to.equal(200);
    });

    it('400 with a JSON body for bytes that are not HTTP', async () => {
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: server.httpsPort, rejectUnauthorized: false }, () => socket.write('NONSENSE\r\n\r\n'));
        let received = '';
        socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
        socket.on('end', () => resolve(received));
        socket.on('error', reject);
      });
      expect(text).to.match(/^HTTP\/1\.1 400 /);
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
      expect(body).to.include.all.keys(...ENVELOPE_FIELDS);
    });
  });

  describe('with TRUST_PROXY', () => {
    let server: TestServer;
    before(async () => {
      server = await startTestServer({ trustProxy: true });
    });
    after(() => server.close());

    it('passes a request forwarded as https to the app', async () => {
      const health = await send({ port: server.httpPort, plain: true, path: '/healthz', headers: { 'x-forwarded-proto': 'https' } });
      expect(health.status).to.equal(200);
      expect(health.headers['strict-transport-security']).to.equal('max-age=63072000; includeSubDomains');
      const lead = await send({
        port: server.httpPort, plain: true, method: 'POST', path: '/functions/leads', body: '{}',
        headers: { 'x-forwarded-proto': 'HTTPS', 'content-type': 'application/json', 'x-api-key': 'lp_test_supplier_5f2d9c1e7a' },
      });
      expect(lead.status).to.equal(201);
    });

    for (const proto of [undefined, 'http', 'https, http', 'wss']) {
      it(`still refuses X-Forwarded-Proto: ${proto ?? '(none)'}`, async () => {
        const reply = await send({ port: server.httpPort, plain: true, path: '/healthz', headers: proto ? { 'x-forwarded-proto': proto } : {} });
        expect(reply.status).to.equal(403);
        expect(reply.json().code).to.equal('HTTPS_REQUIRED');
      });
    }

    it('trusts the hop nearest to it when a proxy appends', async () => {
      const reply = await send({ port: server.httpPort, plain: true, path: '/healthz', headers: { 'x-forwarded-proto': 'http, https' } });
      expect(reply.status).to.equal(200);
    });

    it('serves HTTPS as usual', async () => {
      expect((await postLeadTo(server.httpsPort, '{}')).status).to.equal(201);
    });
  });

  describe('start and close', () => {
    const app = () => createApp({
      authenticate: () => null,
      postLead: () => Promise.reject(new Error('unused')),
      logger: createLogger({ level: 'silent' }),
      currency: () => 'USD',
    });

    it('close() stops both listeners and may be called twice', async () => {
      const running = await startServers({ app: app(), tls: await testTls(), port: 0, httpPort: 0, host: '127.0.0.1', trustProxy: false, logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
      expect((await send({ port: running.httpsPort, path: '/healthz' })).status).to.equal(200);
      await Promise.all([running.close(), running.close()]);
      for (const [port, plain] of [[running.httpsPort, false], [running.httpPort, true]] as const) {
        const error = await send({ port, plain, path: '/healthz' }).then(() => undefined, (e: NodeJS.ErrnoException) => e);
        expect(error?.code).to.equal('ECONNREFUSED');
      }
    });

    it('rejects when a port is taken', async () => {
      const first = await startServers({ app: app(), tls: await testTls(), port: 0, httpPort: 0, host: '127.0.0.1', trustProxy: false, logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
      try {
        const second = startServers({ app: app(), tls: await testTls(), port: 0, httpPort: first.httpPort, host: '127.0.0.1', trustProxy: false, logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
        await second.then(() => expect.fail('should not start'), (error: NodeJS.ErrnoException) => expect(error.code).to.equal('EADDRINUSE'));
      } finally {
        await first.close();
      }
    });
  });
});

describe('http: bytes a connection carries after a request, and CONNECT', function () {
  this.timeout(30_000);
  let svc: TestService;
  let supplier: string;
  before(async () => {
    svc = await TestService.start();
    supplier = await svc.key();
  });
  after(() => svc.stop());

  /** Writes the bytes on one TLS connection and reads everything until the service closes it. */
  const exchange = (port: number, bytes: string, secure = true) =>
    new Promise<string>((resolve, reject) => {
      const socket = secure
        ? connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => socket.write(bytes))
        : plainConnect({ host: '127.0.0.1', port }, () => socket.write(bytes));
      let received = '';
      socket.on('data', (chunk: Buffer) => (received += chunk.toString('utf8')));
      socket.on('end', () => resolve(received));
      socket.on('error', reject);
    });
  const answers = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((match) => Number(match[1]));

  it('a lead followed by a stray byte gets its own answer first (201, its lead id), then the 400 for the byte', async () => {
    const body = JSON.stringify(validLead());
    // One byte more than Content-Length says: a client that counted its body without its trailing space.
    const text = await exchange(
      svc.port,
      `POST /functions/leads HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${supplier}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}x`,
    );
    expect(answers(text), text).to.deep.equal([201, 400]);
    const first = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4, text.indexOf('HTTP/1.1 400'))) as Record<string, unknown>;
    expect(first).to.include({ code: 'SOLD', sold: true });
    expect(first.lead_id).to.be.a('number');
  });

  it('a pipelined request Node refuses (headers over 16 KiB) is answered 431 after the lead before it', async () => {
    const body = JSON.stringify(validLead());
    const text = await exchange(
      svc.port,
      `POST /functions/leads HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${supplier}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}` +
        `GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'x'.repeat(20 * 1024)}\r\n\r\n`,
    );
    expect(answers(text), text.slice(0, 400)).to.deep.equal([201, 431]);
  });

  it('a broken chunk in the body of the request being read is answered 400 at once: that request is the one in error', async () => {
    const text = await exchange(
      svc.port,
      `POST /functions/leads HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${supplier}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n`,
    );
    expect(answers(text), text).to.deep.equal([400]);
  });

  it('CONNECT is answered 405 with the envelope on the HTTPS port, 403 HTTPS_REQUIRED on the plain one', async () => {
    const secure = await exchange(svc.port, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n');
    expect(answers(secure)).to.deep.equal([405]);
    expect(secure).to.match(/\r\nAllow: GET, HEAD, POST\r\n/);
    const envelope = JSON.parse(secure.slice(secure.indexOf('\r\n\r\n') + 4)) as Record<string, unknown>;
    expect(envelope).to.include.all.keys(...ENVELOPE_FIELDS);
    expect(envelope).to.include({ code: 'METHOD_NOT_ALLOWED', ok: false });
    const plain = await exchange(svc.service.httpPort, 'CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n', false);
    expect(answers(plain)).to.deep.equal([403]);
    expect(JSON.parse(plain.slice(plain.indexOf('\r\n\r\n') + 4))).to.include({ code: 'HTTPS_REQUIRED' });
  });

  // Node keeps a bounded count of headers and drops the rest without a word: a second key after
  // the 1,000th header was not seen, and the first one served.
  it('a second X-API-KEY after 2,500 other headers is still seen: 401, as a repeated key always is', async () => {
    const filler = 'a:\r\n'.repeat(2500);
    const request = (second: string) => `GET /functions/me HTTP/1.1\r\nHost: localhost\r\nX-API-KEY: ${supplier}\r\n${filler}${second}Connection: close\r\n\r\n`;
    expect(answers(await exchange(svc.port, request(''))), 'the filler alone').to.deep.equal([200]);
    const text = await exchange(svc.port, request(`X-API-KEY: ${supplier}\r\n`));
    expect(answers(text)).to.deep.equal([401]);
    expect(JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4))).to.include({ code: 'UNAUTHORIZED' });
  });
});

describe('http: connections whose TLS handshake never completes', function () {
  this.timeout(30_000);
  let running: Awaited<ReturnType<typeof startServers>>;
  const HEADERS_MS = 400;
  before(async () => {
    const app = createApp({ authenticate: () => null, postLead: () => Promise.reject(new Error('unused')), logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
    running = await startServers({
      app, tls: await testTls(), port: 0, httpPort: 0, host: '127.0.0.1', trustProxy: false, logger: createLogger({ level: 'silent' }), currency: () => 'USD',
      timeouts: { headersMs: HEADERS_MS, requestMs: 2 * HEADERS_MS },
    });
  });
  after(() => running.close());

  /** A TCP connection to the HTTPS port that sends `bytes` (or nothing): when the service closed it, in ms, and what it wrote back. */
  const closedAfter = (bytes: string | null) =>
    new Promise<{ ms: number; received: number }>((resolve, reject) => {
      const started = performance.now();
      let received = 0;
      const socket = plainConnect({ host: '127.0.0.1', port: running.httpsPort }, () => {
        if (bytes !== null) socket.write(bytes);
      });
      socket.on('data', (chunk: Buffer) => (received += chunk.length));
      socket.on('close', () => resolve({ ms: performance.now() - started, received }));
      socket.on('error', () => {});
      setTimeout(() => {
        socket.destroy();
        reject(new Error('the service kept a connection with no TLS session open for 10 s'));
      }, 10_000).unref();
    });

  // Answered with HTTP bytes before, such a socket waited for ever for a handshake to write them
  // in: each one a descriptor held for good, and a stop that waited its 10 s for them.
  it('one that sends nothing is closed at the headers deadline, not kept', async () => {
    const { ms } = await closedAfter(null);
    expect(ms).to.be.within(HEADERS_MS - 50, 5_000);
  });

  it('one that sends plain HTTP to the HTTPS port is closed at once, with no HTTP answer', async () => {
    const { received } = await closedAfter('GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    expect(received, 'bytes of an HTTP answer').to.be.below(100);
  });

  // Node's closing reaches HTTP connections only, and one still in its handshake is none yet: a
  // stop waited out its whole handshake deadline, and ran into the emergency exit.
  it('does not hold up close(): the listeners stop at once, the handshakes still under way ended', async () => {
    const app = createApp({ authenticate: () => null, postLead: () => Promise.reject(new Error('unused')), logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
    // The default deadlines: 10 s for a handshake.
    const servers = await startServers({ app, tls: await testTls(), port: 0, httpPort: 0, host: '127.0.0.1', trustProxy: false, logger: createLogger({ level: 'silent' }), currency: () => 'USD' });
    const socket = plainConnect({ host: '127.0.0.1', port: servers.httpsPort });
    const closed = new Promise((resolve) => socket.once('close', resolve));
    socket.on('error', () => {});
    await new Promise((resolve) => socket.once('connect', resolve));
    // Half a ClientHello: the handshake under way.
    socket.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]));
    const started = performance.now();
    await servers.close(5_000);
    expect(performance.now() - started, 'close() waited').to.be.below(2_000);
    await closed;
  });
});

import { Writable } from 'node:stream';
import { expect } from 'chai';
import { createLogger } from '../../src/http/logger.js';
import { postLeadTo, send, startTestServer, SUPPLIER_KEY, type TestServer } from './helpers.js';

const PII = { first_name: 'Grace', last_name: 'Hopper', email: 'grace.hopper@example.com', mobile: '+12025550143', sid: 'src-7' };

describe('http: logs', () => {
  let server: TestServer;
  beforeEach(async () => {
    server = await startTestServer();
  });
  afterEach(() => server.close());

  it('writes one access line per request with the route pattern and the key id, nothing else', async () => {
    await postLeadTo(server.httpsPort, JSON.stringify(PII));
    const access = server.logs().filter((line) => line.msg === 'request');
    expect(access).to.have.length(1);
    const line = access[0]!;
    expect(line).to.include({ method: 'POST', route: '/functions/leads', status: 201, key_id: 'key-sup-1' });
    expect(line.trace_id).to.match(/^[0-9a-f]{32}$/);
    expect(line.latency_ms).to.be.a('number');
    expect(Object.keys(line)).to.have.members(['level', 'time', 'service', 'msg', 'trace_id', 'method', 'route', 'status', 'latency_ms', 'key_id']);
  });

  it('never writes the API key, the body, the query string or headers', async () => {
    await postLeadTo(server.httpsPort, JSON.stringify(PII));
    await postLeadTo(server.httpsPort, JSON.stringify(PII), { 'x-api-key': 'lp_wrong_key_9d8e7f' });
    await postLeadTo(server.httpsPort, `${JSON.stringify(PII)}x`);
    await send({ port: server.httpsPort, path: `/functions/leads?email=${PII.email}`, headers: { 'x-api-key': SUPPLIER_KEY } });
    await send({ port: server.httpsPort, path: `/lookup/${PII.mobile}`, headers: { 'x-api-key': SUPPLIER_KEY } });
    const text = server.logText();
    for (const secret of [SUPPLIER_KEY, 'lp_wrong_key_9d8e7f', 'x-api-key', ...Object.values(PII)]) {
      expect(text, secret).not.to.include(secret);
    }
    const routes = server.logs().map((line) => line.route);
    expect(routes).to.deep.equal(['/functions/leads', '/functions/leads', '/functions/leads', '/functions/leads', null]);
  });

  it('logs a refused key with no key id', async () => {
    await postLeadTo(server.httpsPort, '{}', { 'x-api-key': 'nope' });
    expect(server.logs()[0]).to.include({ status: 401, key_id: null });
  });
});

describe('http: createLogger', () => {
  function capture(options: Parameters<typeof createLogger>[0] = {}) {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, callback) {
        lines.push(chunk.toString('utf8'));
        callback();
      },
    });
    return { logger: createLogger({ ...options, destination }), lines };
  }

  it('redacts the API key header and contact fields wherever a careless call puts them', () => {
    const { logger, lines } = capture({ level: 'info' });
    logger.info({ req: { headers: { 'x-api-key': SUPPLIER_KEY } }, lead: PII, ...PII }, 'careless');
    const text = lines.join('');
    for (const value of [SUPPLIER_KEY, PII.email, PII.mobile, PII.first_name, PII.last_name]) expect(text).not.to.include(value);
    expect(text).to.include(PII.sid);
  });

  it('redacts every personal field and whole leads three levels down, in arrays too', () => {
    const { logger, lines } = capture({ level: 'info' });
    const personal = { ...PII, mobile_national: '2135550143', certificate_url: 'https://cert.example/abc123', certificate_id: 'abc123' };
    logger.info({ received: { data: { lead: personal } }, batch: [personal], one: { two: { three: personal } }, ...personal }, 'careless');
    const text = lines.join('');
    for (const [field, value] of Object.entries(personal)) if (field !== 'sid') expect(text, field).not.to.include(value);
    expect(text).to.include('careless');
  });

  it('takes the level from LOG_LEVEL, info by default', () => {
    expect(capture({ env: {} }).logger.level).to.equal('info');
    expect(capture({ env: { LOG_LEVEL: 'warn' } }).logger.level).to.equal('warn');
    expect(() => capture({ env: { LOG_LEVEL: 'loud' } })).to.throw(/LOG_LEVEL/);
  });
});

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

  it('says each cause of a logged error once: a cause its error already quotes is not appended again, one that says more is', () => {
    const { logger, lines } = capture({ level: 'info' });
    const locked = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
    const wrapped = new Error('the key store cannot be read: database is locked', { cause: locked });
    logger.warn({ err: new Error('the erasure failed', { cause: wrapped }) }, 'quoted');
    logger.warn({ err: new Error('the projection stopped', { cause: new Error('disk I/O error') }) }, 'new words');
    const circular = new Error('a loop');
    circular.cause = new Error('its cause', { cause: circular });
    logger.warn({ err: circular }, 'circular');
    logger.warn(new Error('', { cause: new Error('only the cause speaks') }), 'empty');
    const logged = lines.map((line) => JSON.parse(line) as { msg: string; err: { message: string; stack: string } });
    expect(logged.map((line) => [line.msg, line.err.message])).to.deep.equal([
      ['quoted', 'the erasure failed: the key store cannot be read: database is locked'],
      ['new words', 'the projection stopped: disk I/O error'],
      ['circular', 'a loop: its cause'],
      ['empty', 'only the cause speaks'],
    ]);
    // The stack still follows every cause.
    expect(logged[0]!.err.stack).to.include('caused by: Error: the key store cannot be read: database is locked').and.include('caused by: Error: database is locked');
  });

  it('takes the level from LOG_LEVEL, info by default', () => {
    expect(capture({ env: {} }).logger.level).to.equal('info');
    expect(capture({ env: { LOG_LEVEL: 'warn' } }).logger.level).to.equal('warn');
    expect(() => capture({ env: { LOG_LEVEL: 'loud' } })).to.throw(/LOG_LEVEL/);
  });
});

import { expect } from 'chai';
import { TokenBuckets } from '../../src/http/rate-limit.js';
import { BUYER_KEY, postLeadTo, startTestServer, SUPPLIER_2_KEY, type TestServer } from './helpers.js';

describe('http: per-key rate limit', () => {
  let server: TestServer;
  let clock: number;
  beforeEach(async () => {
    clock = 1_000_000;
    server = await startTestServer({ rateLimit: { ratePerSecond: 0.5, burst: 2 }, now: () => clock });
  });
  afterEach(() => server.close());

  it('lets the burst through, then 429 RATE_LIMITED with Retry-After and RateLimit headers', async () => {
    const first = await postLeadTo(server.httpsPort, '{}');
    expect(first.status).to.equal(201);
    expect(first.headers).to.include({ 'ratelimit-limit': '2', 'ratelimit-remaining': '1', 'ratelimit-reset': '2' });
    const second = await postLeadTo(server.httpsPort, '{}');
    expect(second.headers).to.include({ 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '4' });

    const limited = await postLeadTo(server.httpsPort, '{}');
    expect(limited.status).to.equal(429);
    expect(limited.json()).to.include({ code: 'RATE_LIMITED', acceptance: 'error', Response: 'Error', ok: false });
    expect(limited.headers).to.include({ 'retry-after': '2', 'ratelimit-limit': '2', 'ratelimit-remaining': '0', 'ratelimit-reset': '4' });
    expect(server.calls).to.have.length(2);
  });

  it('recovers once the bucket has refilled', async () => {
    await postLeadTo(server.httpsPort, '{}');
    await postLeadTo(server.httpsPort, '{}');
    expect((await postLeadTo(server.httpsPort, '{}')).status).to.equal(429);
    clock += 1_000;
    const halfway = await postLeadTo(server.httpsPort, '{}');
    expect(halfway.status, 'half a token is not a request').to.equal(429);
    expect(halfway.headers['retry-after']).to.equal('1');
    clock += 1_000;
    expect((await postLeadTo(server.httpsPort, '{}')).status).to.equal(201);
  });

  it('keeps one bucket per key', async () => {
    await postLeadTo(server.httpsPort, '{}');
    await postLeadTo(server.httpsPort, '{}');
    expect((await postLeadTo(server.httpsPort, '{}')).status).to.equal(429);
    expect((await postLeadTo(server.httpsPort, '{}', { 'x-api-key': SUPPLIER_2_KEY })).status).to.equal(201);
  });

  it('limits before looking at the body, and never spends tokens on refused keys', async () => {
    for (let i = 0; i < 5; i++) {
      expect((await postLeadTo(server.httpsPort, '{}', { 'x-api-key': 'unknown' })).status).to.equal(401);
      expect((await postLeadTo(server.httpsPort, '{}', { 'x-api-key': BUYER_KEY })).status).to.equal(403);
    }
    expect((await postLeadTo(server.httpsPort, 'x', { 'content-type': 'text/plain' })).status).to.equal(415);
    expect((await postLeadTo(server.httpsPort, '{}')).status).to.equal(201);
    expect((await postLeadTo(server.httpsPort, 'x', { 'content-type': 'text/plain' })).status).to.equal(429);
  });
});

describe('http: token buckets', () => {
  it('does not drain when the clock steps back', () => {
    let clock = 10_000;
    const buckets = new TokenBuckets({ ratePerSecond: 1, burst: 1 }, () => clock);
    expect(buckets.take('k').allowed).to.equal(true);
    clock = 0;
    expect(buckets.take('k').allowed).to.equal(false);
    clock = 1_000;
    expect(buckets.take('k').allowed).to.equal(true);
  });

  it('refuses a configuration that could never let a request through', () => {
    expect(() => new TokenBuckets({ ratePerSecond: 0, burst: 1 }, Date.now)).to.throw(RangeError);
    expect(() => new TokenBuckets({ ratePerSecond: 1, burst: 0.5 }, Date.now)).to.throw(RangeError);
  });
});

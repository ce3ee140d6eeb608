// Limits, through the real HTTPS server of a service configured from the
// environment as an operator would: the per-key token bucket (RATE_LIMIT_PER_SECOND,
// RATE_LIMIT_BURST), the body limit (BODY_LIMIT_BYTES), the header limit, and the header and
// request timeouts (HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS) against slow clients, which must be cut
// off without holding up anyone else. test/http/rate-limit.test.ts has the bucket arithmetic with
// an injected clock; this file proves the same through `startService` and its configuration.

import { expect } from 'chai';
import { ConfigError, loadServiceConfig } from '../../src/config.js';
import { envelopeProblems } from '../post-lead/helpers.js';
import { type Reply, TestService } from '../support/service.js';
import { until } from '../support/until.js';
import { type RawExchange, type RawResponse, rawExchange, toReply } from './support/client.js';
import { leadNumber } from './support/leads.js';

const RATE = 1;
const BURST = 3;
const READ_RATE = 1;
const READ_BURST = 4;
const BODY_LIMIT = 2048;
const HEADERS_TIMEOUT_MS = 1000;
const REQUEST_TIMEOUT_MS = 2000;
/** Node sweeps for expired requests every min(1 s, headers timeout / 4): the most a deadline may slip. */
const SWEEP_MS = 250;

let serial = 0;
const lead = (overrides: Record<string, unknown> = {}) => leadNumber(++serial, overrides, 'limits');

/** A raw response as a Reply, so the envelope checker can read it. */
const asReply = (raw: RawResponse): Reply => toReply(raw.status, raw.headers, raw.text);

function expectEnvelope(reply: Reply, status: number, code: string): void {
  expect(reply.status, reply.text).to.equal(status);
  expect(envelopeProblems(reply)).to.deep.equal([]);
  expect(reply.body.code).to.equal(code);
  expect(reply.headers['strict-transport-security'], 'HSTS').to.match(/max-age=\d+/);
}

describe('reliability: limits (rate, body, headers, slow clients)', function () {
  this.timeout(30_000);
  let svc: TestService;

  before(async function () {
    svc = await TestService.start({
      env: {
        RATE_LIMIT_PER_SECOND: String(RATE),
        RATE_LIMIT_BURST: String(BURST),
        READ_RATE_LIMIT_PER_SECOND: String(READ_RATE),
        READ_RATE_LIMIT_BURST: String(READ_BURST),
        BODY_LIMIT_BYTES: String(BODY_LIMIT),
        HEADERS_TIMEOUT_MS: String(HEADERS_TIMEOUT_MS),
        REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      },
    });
  });
  after(async () => svc?.stop());

  describe('per-key rate limit (token bucket)', function () {
    it('lets the burst through, then 429 RATE_LIMITED with Retry-After and RateLimit headers, records nothing, and refills', async function () {
      const key = await svc.key('supplier', 'sup-rate');
      for (let i = 0; i < BURST; i++) {
        const reply = await svc.post(lead(), { 'x-api-key': key });
        expect(reply.status, reply.text).to.equal(201);
        expect(reply.headers).to.include({ 'ratelimit-limit': String(BURST), 'ratelimit-remaining': String(BURST - 1 - i) });
        expect(Number(reply.headers['ratelimit-reset'])).to.be.within(1, Math.ceil(BURST / RATE));
      }
      const limited = await svc.post(lead(), { 'x-api-key': key });
      expectEnvelope(limited, 429, 'RATE_LIMITED');
      expect(limited.body).to.include({ acceptance: 'error', Response: 'Error', lead_id: null });
      expect(limited.headers).to.include({ 'ratelimit-limit': String(BURST), 'ratelimit-remaining': '0' });
      const retryAfter = Number(limited.headers['retry-after']);
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= Math.ceil(1 / RATE), `Retry-After ${String(limited.headers['retry-after'])}`).to.equal(true);
      // Another supplier's key has its own bucket.
      expect((await svc.post(lead(), { 'x-api-key': await svc.key('supplier', 'sup-other') })).status).to.equal(201);
      // After Retry-After the same key is served again.
      await new Promise((resolve) => setTimeout(resolve, retryAfter * 1000));
      expect((await svc.post(lead(), { 'x-api-key': key })).status).to.equal(201);
    });

    it('holds under concurrency: of 20 posts at once only the burst (plus what refilled meanwhile) gets through', async function () {
      const key = await svc.key('supplier', 'sup-burst');
      const started = Date.now();
      const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(lead(), { 'x-api-key': key })));
      const refilled = Math.floor(((Date.now() - started) / 1000) * RATE);
      const passed = replies.filter((r) => r.status === 201).length;
      expect(passed).to.be.within(BURST, BURST + refilled);
      for (const reply of replies.filter((r) => r.status !== 201)) expectEnvelope(reply, 429, 'RATE_LIMITED');
    });
  });

  describe('per-key read rate limit (buckets apart from posting)', function () {
    it('READ_RATE_LIMIT_PER_SECOND and READ_RATE_LIMIT_BURST: 20/s and twice the rate by default, 0 turns it off, a bad value is refused by name', function () {
      expect(loadServiceConfig({}).readRateLimit).to.deep.equal({ ratePerSecond: 20, burst: 40 });
      expect(loadServiceConfig({ READ_RATE_LIMIT_PER_SECOND: '5' }).readRateLimit).to.deep.equal({ ratePerSecond: 5, burst: 10 });
      expect(loadServiceConfig({ READ_RATE_LIMIT_PER_SECOND: '0' }).readRateLimit).to.equal(null);
      expect(loadServiceConfig({ READ_RATE_LIMIT_PER_SECOND: '0', RATE_LIMIT_PER_SECOND: '7' }).rateLimit).to.deep.equal({ ratePerSecond: 7, burst: 14 });
      expect(() => loadServiceConfig({ READ_RATE_LIMIT_BURST: 'lots' })).to.throw(ConfigError, 'READ_RATE_LIMIT_BURST must be a whole number');
    });

    it('every read route spends the key\'s read bucket: the burst, then 429 RATE_LIMITED with Retry-After; its posts and other keys are unaffected', async function () {
      const key = await svc.key('supplier', 'sup-reader');
      const posted = await svc.post(lead(), { 'x-api-key': key });
      expect(posted.status, posted.text).to.equal(201);
      const reads = [`/functions/leads/${String(posted.body.lead_id)}`, '/functions/deliveries', '/functions/feedback', '/functions/reports/summary'];
      for (const [i, path] of reads.entries()) {
        const reply = await svc.request('GET', path, { 'x-api-key': key });
        // The lead view may not have caught up yet (404 until it has): either way the request is counted.
        expect(reply.status, `${path}: ${reply.text}`).to.be.oneOf([200, 404]);
        expect(reply.headers, path).to.include({ 'ratelimit-limit': String(READ_BURST), 'ratelimit-remaining': String(READ_BURST - 1 - i) });
      }
      for (const path of reads) {
        const limited = await svc.request('GET', path, { 'x-api-key': key });
        expectEnvelope(limited, 429, 'RATE_LIMITED');
        expect(limited.body).to.include({ acceptance: 'error', Response: 'Error', lead_id: null });
        expect(limited.headers).to.include({ 'ratelimit-limit': String(READ_BURST), 'ratelimit-remaining': '0' });
        expect(Number(limited.headers['retry-after'])).to.be.within(1, Math.ceil(1 / READ_RATE));
      }
      // Reading spent nothing of the post bucket: the rest of its burst still posts.
      for (let i = 1; i < BURST; i++) {
        const reply = await svc.post(lead(), { 'x-api-key': key });
        expect(reply.status, reply.text).to.equal(201);
        expect(reply.headers).to.include({ 'ratelimit-limit': String(BURST), 'ratelimit-remaining': String(BURST - 1 - i) });
      }
      // Another key reads from a bucket of its own.
      expect((await svc.request('GET', '/functions/reports/summary', { 'x-api-key': await svc.key('analyst', 'ann-reader') })).status).to.equal(200);
    });

    it('posting does not spend the read bucket: a key whose posts are limited still reads', async function () {
      const key = await svc.key('supplier', 'sup-poster');
      const replies = await Promise.all(Array.from({ length: BURST + 2 }, () => svc.post(lead(), { 'x-api-key': key })));
      expect(replies.some((r) => r.status === 429)).to.equal(true);
      const read = await svc.request('GET', '/functions/reports/summary', { 'x-api-key': key });
      expect(read.status, read.text).to.equal(200);
      expect(read.headers).to.include({ 'ratelimit-limit': String(READ_BURST), 'ratelimit-remaining': String(READ_BURST - 1) });
    });
  });

  describe('body and header limits', function () {
    let key: string;
    // A key of its own per test: the rate limit is on.
    beforeEach(async () => (key = await svc.key('supplier', `sup-body-${++serial}`)));

    /** A JSON object of exactly `size` bytes. */
    const bodyOf = (size: number): string => {
      const skeleton = JSON.stringify({ ...lead(), s1: '' });
      return skeleton.replace('"s1":""', `"s1":"${'x'.repeat(size - Buffer.byteLength(skeleton))}"`);
    };

    it(`BODY_LIMIT_BYTES=${BODY_LIMIT}: a body of exactly the limit is read; one byte more is 413 (declared or chunked) and the connection closes`, async function () {
      const atLimit = await svc.post(bodyOf(BODY_LIMIT), { 'x-api-key': key });
      expect(atLimit.status, atLimit.text).to.not.equal(413);
      expect(envelopeProblems(atLimit)).to.deep.equal([]);
      for (const headers of [{}, { 'transfer-encoding': 'chunked' }] as Array<Record<string, string>>) {
        const over = await svc.post(bodyOf(BODY_LIMIT + 1), { 'x-api-key': key, ...headers });
        expectEnvelope(over, 413, 'PAYLOAD_TOO_LARGE');
        expect(over.headers.connection).to.equal('close');
      }
    });

    it('a Content-Length over the limit is refused before the body is sent: no waiting for 10 MB that never come', async function () {
      const head = `POST /functions/leads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-KEY: ${key}\r\nContent-Length: ${10 * 1024 * 1024}\r\n\r\n{"a":`;
      const exchange = await rawExchange(svc.port, [head], { timeoutMs: REQUEST_TIMEOUT_MS + 5000 });
      expect(exchange.responses, exchange.trailing).to.have.length(1);
      expectEnvelope(asReply(exchange.responses[0]!), 413, 'PAYLOAD_TOO_LARGE');
      expect(exchange.closedByServer).to.equal(true);
    });

    it('a client that asks first (Expect: 100-continue) gets 413 and no leave to send an oversized body; a body within the limit is let in', async function () {
      const ask = (length: number) =>
        `POST /functions/leads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-KEY: ${key}\r\nExpect: 100-continue\r\nContent-Length: ${length}\r\n\r\n`;
      const over = await rawExchange(svc.port, [ask(BODY_LIMIT + 1)], { timeoutMs: REQUEST_TIMEOUT_MS + 5000 });
      expect(over.responses.map((r) => r.status), over.trailing).to.deep.equal([413]);
      expectEnvelope(asReply(over.responses[0]!), 413, 'PAYLOAD_TOO_LARGE');
      const body = JSON.stringify(lead());
      const within = await rawExchange(svc.port, [ask(Buffer.byteLength(body)), body], { gapMs: 200, end: true, timeoutMs: REQUEST_TIMEOUT_MS + 5000 });
      expect(within.responses.map((r) => r.status), within.trailing).to.deep.equal([100, 201]);
    });

    it('request headers over 16 KiB: 431 with the envelope, and the server keeps serving', async function () {
      const head = `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Filler: ${'f'.repeat(20 * 1024)}\r\n\r\n`;
      const exchange = await rawExchange(svc.port, [head], { timeoutMs: 5000 });
      expect(exchange.responses, exchange.trailing).to.have.length(1);
      expectEnvelope(asReply(exchange.responses[0]!), 431, 'PAYLOAD_TOO_LARGE');
      expect((await svc.request('GET', '/healthz')).status).to.equal(200);
    });
  });

  describe('slow clients', function () {
    it('HEADERS_TIMEOUT_MS and REQUEST_TIMEOUT_MS are checked at start: out of range or headers longer than the request is refused by name', function () {
      expect(loadServiceConfig({})).to.include({ headersTimeoutMs: 10_000, requestTimeoutMs: 30_000 });
      expect(() => loadServiceConfig({ HEADERS_TIMEOUT_MS: '5000', REQUEST_TIMEOUT_MS: '1000' })).to.throw(ConfigError, 'HEADERS_TIMEOUT_MS must not be more than REQUEST_TIMEOUT_MS');
      expect(() => loadServiceConfig({ REQUEST_TIMEOUT_MS: '5s' })).to.throw(ConfigError, 'REQUEST_TIMEOUT_MS must be a whole number');
    });

    let key: string;
    before(async () => (key = await svc.key('supplier', 'sup-slow')));

    const postHead = (length: number, apiKey = key) =>
      `POST /functions/leads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nX-API-KEY: ${apiKey}\r\nContent-Length: ${length}\r\n\r\n`;

    /**
     * Cut off: answered 408 REQUEST_TIMEOUT with the envelope (an `Error`: the same request sent in
     * time may succeed) and closed, or simply closed; never served.
     */
    function expectCutOff(exchange: RawExchange, deadlineMs: number, label: string): void {
      expect(exchange.closedByServer, `${label}: closed by the server`).to.equal(true);
      expect(exchange.elapsedMs, `${label}: not before its deadline`).to.be.at.least(deadlineMs - 50);
      expect(exchange.elapsedMs, `${label}: by its deadline (plus one sweep and some slack)`).to.be.below(deadlineMs + SWEEP_MS + 2500);
      expect(exchange.responses.length, `${label}: at most one answer`).to.be.at.most(1);
      for (const response of exchange.responses) {
        const reply = asReply(response);
        expectEnvelope(reply, 408, 'REQUEST_TIMEOUT');
        expect(reply.body).to.include({ acceptance: 'error', Response: 'Error', lead_id: null });
        expect(reply.headers.connection).to.equal('close');
      }
    }

    it(`slowloris (headers trickling in forever) is cut off after HEADERS_TIMEOUT_MS=${HEADERS_TIMEOUT_MS}`, async function () {
      const parts = ['POST /functions/leads HTTP/1.1\r\nHost: x\r\n', ...Array.from({ length: 100 }, (_, i) => `X-Slow-${i}: y\r\n`)];
      expectCutOff(await rawExchange(svc.port, parts, { gapMs: 100, timeoutMs: 10_000 }), HEADERS_TIMEOUT_MS, 'slowloris');
    });

    it(`a body trickling in, or shorter than its Content-Length, is cut off after REQUEST_TIMEOUT_MS=${REQUEST_TIMEOUT_MS}`, async function () {
      const body = JSON.stringify(lead());
      const [slow, short] = await Promise.all([
        rawExchange(svc.port, [postHead(body.length), ...body.split('')], { gapMs: 100, timeoutMs: 10_000 }),
        rawExchange(svc.port, [postHead(body.length + 100) + body], { timeoutMs: 10_000 }),
      ]);
      expectCutOff(slow, REQUEST_TIMEOUT_MS, 'slow body');
      expectCutOff(short, REQUEST_TIMEOUT_MS, 'short body');
      // The post route was reading those bodies when the deadline cut them off: its access log
      // lines (written once the aborted reads fail, just after the client sees the close) say 408
      // too, not a malformed body.
      const logged = () =>
        svc.logs
          .map((text) => JSON.parse(text) as { msg?: string; route?: string; status?: number; key_id?: string })
          .filter((line) => line.msg === 'request' && line.route === '/functions/leads' && line.key_id === key.split('_')[1]);
      const since = Date.now();
      while (logged().length < 2 && Date.now() - since < 5000) await new Promise((resolve) => setTimeout(resolve, 20));
      expect(logged().map((line) => line.status)).to.deep.equal([408, 408]);
    });

    it('40 slow connections do not hold up other clients: normal posts are answered while every slow one is still open', async function () {
      const normalKey = await svc.key('supplier', 'sup-normal');
      // Each slow body under a key of its own: 20 under one key would mostly be answered 429 at once.
      const slowKeys: string[] = [];
      for (let i = 0; i < 20; i++) slowKeys.push(await svc.key('supplier', `sup-slow-${i}`));
      const slowOnes: Array<Promise<RawExchange & { closedAt: number }>> = [];
      let open = 0;
      const body = JSON.stringify(lead());
      for (let i = 0; i < 40; i++) {
        const parts =
          i % 2 === 0
            ? ['POST /functions/leads HTTP/1.1\r\n', ...Array.from({ length: 100 }, (_, n) => `X-Slow-${n}: y\r\n`)]
            : [postHead(body.length, slowKeys[i >> 1]!), ...body.split('')];
        slowOnes.push(rawExchange(svc.port, parts, { gapMs: 100, timeoutMs: 10_000, onOpen: () => (open += 1) }).then((exchange) => ({ ...exchange, closedAt: Date.now() })));
      }
      await until(() => `the 40 slow connections open (${open} so far)`, () => open === 40);
      const normal = await Promise.all(Array.from({ length: BURST }, () => svc.post(lead(), { 'x-api-key': normalKey })));
      const answeredAt = Date.now();
      for (const reply of normal) expect(reply.status, reply.text).to.equal(201);
      const slow = await Promise.all(slowOnes);
      expect(slow.every((s) => s.closedByServer && s.responses.every((r) => r.status === 408)), 'every slow connection was cut off').to.equal(true);
      expect(answeredAt, 'the normal posts were answered before the first slow connection was cut off').to.be.below(Math.min(...slow.map((s) => s.closedAt)));
    });
  });
});

// Security:
//   - keys exist at rest only as hashes: after `leadpost keys create` and `keys rotate` and a
//     `leadpost serve` that used them is killed (so the WAL is left as it was), no file under the
//     data dir holds a key or its secret in any encoding — though the scan does find the hashes;
//   - keys are compared in constant time: every check goes through crypto.timingSafeEqual on two
//     32-byte digests, whatever was presented;
//   - no PII in the logs of a real `leadpost serve` (stdout and stderr), nor in /metrics;
//   - supplier isolation on every read route: another supplier's lead is 404, lists and reports
//     never show it, the buyer-only routes are 403;
//   - HSTS on every HTTPS response, errors included;
//   - no stack trace, file path or internal message in any response, even for thrown internal errors.
// test/post-lead/log-privacy.test.ts scans the in-process logs through every outcome; test/keys
// has the key ring's own checks.

import { expect } from 'chai';
import { createHash } from 'node:crypto';
import crypto from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { syncBuiltinESMExports } from 'node:module';
import { join } from 'node:path';
import sinon from 'sinon';
import { EventStoreUnavailableError } from '../../src/event-store/index.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { KeyRing } from '../../src/keys/key-ring.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { runChild } from '../support/child.js';
import { type Reply, TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client, rawExchange, toReply } from './support/client.js';
import { FaultyEventStore, FaultyReadModels } from './support/faults.js';
import { leadNumber } from './support/leads.js';
import { BIN, childEnv, createKey, ServerProcess, writeRouting } from './support/server-process.js';

const ROUTING = {
  buyers: [{ id: 'ca-buyer', price: 40, states: ['CA'] }],
  buckets: [{ id: 'unsold', default: true }],
};

/** Every file under `dir`, recursively, as bytes. */
function filesUnder(dir: string): Array<{ path: string; bytes: Buffer }> {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? filesUnder(path) : [{ path, bytes: readFileSync(path) }];
  });
}

/** A key's text, its secret, and the secret's bytes in every encoding a careless store might use. */
function keyForms(key: string): Array<[string, Buffer]> {
  const secret = key.slice('lp_'.length + 12 + 1);
  const raw = Buffer.from(secret, 'base64url');
  return [
    ['key', Buffer.from(key)],
    ['key as UTF-16', Buffer.from(key, 'utf16le')],
    ['secret', Buffer.from(secret)],
    ['secret bytes', raw],
    ['secret bytes as hex', Buffer.from(raw.toString('hex'))],
    ['secret bytes as base64', Buffer.from(raw.toString('base64'))],
  ];
}

const sha256Hex = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');

/** No stack frame, file path, error name or internal message: what an internal error must never show. */
function leaks(text: string): string[] {
  const patterns: Array<[string, RegExp]> = [
    ['a stack frame', /\bat\s+\S+\s+\(|\n\s+at\s/],
    ['a file:line:column', /\.(?:js|ts|mjs|cjs):\d+/],
    ['a file URL or path', /file:\/\/|\/work\/|\/tmp\/|node_modules|dist\/src|[A-Z]:\\/],
    ['an error name', /\b[A-Z]\w*Error\b|\bError:|Sqlite/],
    ['the internal message', /canary/i],
  ];
  return patterns.filter(([, pattern]) => pattern.test(text)).map(([name]) => name);
}

describe('reliability: security', function () {
  this.timeout(60_000);

  describe('keys at rest and logs of a real `leadpost serve`', function () {
    // Made in before(), not here: a describe body also runs when a filter (-g) skips every test.
    let dir: ReturnType<typeof tempDir>;
    let server: ServerProcess | undefined;
    const keys: string[] = [];
    const stderr: string[] = [];
    const lines: string[] = [];
    const people = [
      { first_name: 'Quillonna', last_name: 'Brackenfeld', email: 'Quillonna.B@Example.com', mobile: '(213) 468-3301', e164: '+12134683301' },
      { first_name: 'Ottavino', last_name: 'Grimsditch', email: 'ottavino.g@example.com', mobile: '213.468.3302', e164: '+12134683302' },
      { first_name: 'Maribelle', last_name: 'Vantongeren', email: 'maribelle.v@mailinator.com', mobile: '2134683303', e164: '+12134683303' },
    ];
    const replies: Reply[] = [];

    before(async function () {
      dir = tempDir('security');
      const routingFile = writeRouting(dir.path, ROUTING);
      const supplier = await createKey(dir.path, 'supplier', 'sup-sec');
      const admin = await createKey(dir.path, 'admin', 'root');
      const rotated = await runChild(['keys', 'rotate', supplier.id, '--json'], childEnv(dir.path), { script: BIN });
      expect(rotated.code, rotated.stderr).to.equal(0);
      const next = JSON.parse(rotated.lines.find((l) => l.startsWith('{'))!) as { key: string };
      keys.push(supplier.key, admin.key, next.key);
      server = await ServerProcess.start({ dataDir: dir.path, routingFile });
      const client = new Client(4);
      try {
        const [a, b, c] = people as [(typeof people)[0], (typeof people)[0], (typeof people)[0]];
        const lead = (p: typeof a, extra: Record<string, unknown> = {}) => leadNumber(9001, { first_name: p.first_name, last_name: p.last_name, email: p.email, mobile: p.mobile, ...extra }, 'sec');
        const post = async (body: unknown, key: string, headers: Record<string, string> = {}, path?: string) => {
          replies.push(await client.post(server!.httpsPort, body, { 'x-api-key': key, ...headers }, path));
        };
        await post(lead(a), supplier.key);
        await post(lead(a, { email: 'other.sec@example.com' }), next.key); // duplicate by mobile, with the rotated key
        await post(lead(b, { zip: 'not-a-zip' }), supplier.key); // invalid
        await post(lead(c), supplier.key); // disposable e-mail: verification failed
        await post(lead(b), 'lp_wrongwrongwr_' + 'x'.repeat(43)); // unauthorized
        await post(`${JSON.stringify(lead(b))}}`, supplier.key); // malformed
        await post(lead(b), supplier.key, { 'user-agent': `${b.first_name} ${b.email}` }, `/functions/leads?email=${encodeURIComponent(b.email)}&mobile=${encodeURIComponent(b.mobile)}`);
        for (const reply of replies.filter((r) => typeof r.body.lead_id === 'number')) {
          replies.push(await client.request(server.httpsPort, 'GET', `/functions/leads/${String(reply.body.lead_id)}`, { 'x-api-key': admin.key }));
        }
        replies.push(await client.request(server.httpsPort, 'GET', '/functions/reports/summary', { 'x-api-key': admin.key }));
        const metrics = await client.request(server.httpsPort, 'GET', '/metrics', { 'x-api-key': admin.key });
        replies.push(metrics);
      } finally {
        client.destroy();
      }
      // kill -9: the WAL and its index stay exactly as the server left them.
      const result = await server.kill();
      lines.push(...result.lines);
      stderr.push(result.stderr);
    });
    after(() => dir?.remove());

    it('the requests took the paths the scans are meant to cover', function () {
      expect(replies.slice(0, 7).map((r) => r.body.code)).to.deep.equal(['SOLD', 'DUPLICATE', 'INVALID', 'VERIFICATION_FAILED', 'UNAUTHORIZED', 'MALFORMED_JSON', 'SOLD']);
      expect(replies.filter((r) => (r.body.lead as { lead?: unknown } | undefined)?.lead).length, 'admin read the PII back').to.be.greaterThan(0);
    });

    it('no file under the data dir holds a key or its secret, in any encoding; the hashes are there', function () {
      const files = filesUnder(dir.path);
      expect(files.map((f) => f.path.slice(dir.path.length + 1))).to.include.members(['events.db', 'events.db-wal', 'readmodels.db']);
      const found: string[] = [];
      for (const key of keys) {
        for (const [form, needle] of keyForms(key)) {
          for (const file of files) if (file.bytes.includes(needle)) found.push(`${form} of ${key.slice(0, 16)}… in ${file.path}`);
        }
      }
      expect(found).to.deep.equal([]);
      // The scan reads what the store wrote: each secret's hash is there.
      const all = Buffer.concat(files.map((f) => f.bytes));
      for (const key of keys) expect(all.includes(sha256Hex(key.slice('lp_'.length + 12 + 1))), `hash of ${key.slice(0, 16)}…`).to.equal(true);
    });

    it('no log line (stdout or stderr) holds a name, e-mail, mobile, key or the client address', function () {
      const text = [...lines, ...stderr].join('\n').toLowerCase();
      expect(lines.filter((l) => l.includes('"request"')).length, 'the request logs are there to scan').to.be.at.least(7);
      const needles = people.flatMap((p) => [p.first_name, p.last_name, p.email, p.mobile, p.e164, p.e164.slice(2), encodeURIComponent(p.email)]);
      needles.push(...keys.flatMap((k) => [k, k.slice('lp_'.length + 12 + 1)]), '127.0.0.1');
      expect(needles.filter((n) => text.includes(n.toLowerCase()))).to.deep.equal([]);
    });

    it('/metrics holds no PII either', function () {
      const metrics = replies.at(-1)!;
      expect(metrics.status, metrics.text.slice(0, 200)).to.equal(200);
      expect(metrics.text, 'Prometheus text, so the scan reads real metrics').to.match(/^# (HELP|TYPE) /m);
      const text = metrics.text.toLowerCase();
      const needles = people.flatMap((p) => [p.first_name, p.last_name, p.email, p.e164, p.e164.slice(2)]);
      expect(needles.filter((n) => text.includes(n.toLowerCase()))).to.deep.equal([]);
    });
  });

  describe('constant-time key comparison', function () {
    let dir: ReturnType<typeof tempDir>;
    let store: EmbeddedEventStore;
    let ring: KeyRing;
    let spy: sinon.SinonSpy;
    let key: string;

    before(async function () {
      dir = tempDir('ct');
      store = await EmbeddedEventStore.open(dir.path);
      const { id, secret } = newKeyMaterial();
      await changeKeys(store, (state) => issueKey(state, { role: 'supplier', name: 'sup-ct', now: Date.now(), id, secret }));
      key = formatKey(id, secret);
      ring = await KeyRing.open(store, { pollMs: 60_000 });
      // The key ring imports timingSafeEqual by name: the spy reaches it once the builtin's named exports are synced.
      spy = sinon.spy(crypto, 'timingSafeEqual');
      syncBuiltinESMExports();
    });
    after(async function () {
      spy.restore();
      syncBuiltinESMExports();
      await ring.close();
      await store.close();
      dir?.remove();
    });
    beforeEach(() => spy.resetHistory());

    it('every presented key, right or wrong or malformed, is checked with exactly one timingSafeEqual of two 32-byte digests', function () {
      const other = newKeyMaterial();
      const secret = key.slice(-43);
      const presented: Array<[string, string | undefined, boolean]> = [
        ['the right key', key, true],
        ['a wrong secret of the right length', formatKey(key.slice(3, 15), other.secret), false],
        ['the secret with its last character changed', key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A'), false],
        ['an unknown id', formatKey(other.id, secret), false],
        ['no key', undefined, false],
        ['empty', '', false],
        ['too short', key.slice(0, 20), false],
        ['too long', `${key}x`, false],
        ['garbage of the right length', 'x'.repeat(key.length), false],
      ];
      for (const [label, value, valid] of presented) {
        spy.resetHistory();
        expect(ring.authenticate(value) !== null, label).to.equal(valid);
        expect(spy.callCount, `${label}: timingSafeEqual calls`).to.equal(1);
        const [a, b] = spy.firstCall.args as [Buffer, Buffer];
        expect([a.length, b.length], `${label}: compared lengths`).to.deep.equal([32, 32]);
      }
    });

    it('through the HTTPS server too: a post with a wrong key is refused after a timingSafeEqual check', async function () {
      const svc = await TestService.start();
      try {
        spy.resetHistory();
        const reply = await svc.post(leadNumber(1, {}, 'ct'), { 'x-api-key': key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A') });
        expect(reply.status).to.equal(401);
        expect(spy.callCount).to.be.at.least(1);
      } finally {
        await svc.stop();
      }
    });
  });

  describe('supplier isolation on every read route', function () {
    let svc: TestService;
    const k: Record<string, string> = {};
    const a: Record<string, number> = {};

    before(async function () {
      svc = await TestService.start({ routing: ROUTING });
      k.supA = await svc.key('supplier', 'sup-a');
      k.supB = await svc.key('supplier', 'sup-b');
      k.buyer = await svc.key('buyer', 'ca-buyer');
      const post = async (name: string, body: Record<string, unknown>, key = k.supA!) => (a[name] = (await svc.post(body, { 'x-api-key': key })).body.lead_id as number);
      await post('sold', leadNumber(1, { sid: 'sid-of-a' }, 'iso'));
      await post('unsold', leadNumber(2, { sid: 'sid-of-a', accident_state: 'TX', zip: '75001' }, 'iso'));
      await post('invalid', leadNumber(3, { sid: 'sid-of-a', zip: 'x' }, 'iso'));
      await post('test', leadNumber(4, { sid: 'sid-of-a', test: true }, 'iso'));
      const feedback = await svc.post({ type: 'conversion', reason: 'signed' }, { 'x-api-key': k.buyer! }, `/functions/leads/${a.sold}/feedback`);
      expect(feedback.status, feedback.text).to.equal(201);
      await svc.post(leadNumber(5, { sid: 'sid-of-b' }, 'iso'), { 'x-api-key': k.supB! });
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
    });
    after(async () => svc?.stop());

    const get = (path: string, key: string, headers: Record<string, string> = {}) => svc.request('GET', path, { 'x-api-key': key, ...headers });
    const ids = (reply: Reply) => ((reply.body.items ?? []) as Array<{ lead_id?: number }>).map((i) => i.lead_id);

    it("GET /functions/leads/{id}: another supplier's lead is 404 NOT_FOUND with the envelope, exactly like one that does not exist", async function () {
      for (const id of Object.values(a)) {
        const reply = await get(`/functions/leads/${id}`, k.supB!);
        expect(reply.status, `lead ${id}`).to.equal(404);
        expect(reply.body).to.include({ ok: false, code: 'NOT_FOUND', lead_id: null });
        expect(reply.text, `lead ${id}`).to.not.include('sid-of-a');
        expect((await get(`/functions/leads/${id}`, k.supA!)).status, 'the owner sees it').to.equal(200);
      }
    });

    it("GET /functions/deliveries and /functions/feedback never list another supplier's leads, whatever the filters", async function () {
      for (const path of ['/functions/deliveries', '/functions/deliveries?buyer=ca-buyer', '/functions/deliveries?status=pending', '/functions/deliveries?bucket=unsold', '/functions/deliveries?supplier=sup-a', '/functions/feedback', '/functions/feedback?type=conversion', '/functions/feedback?supplier=sup-a']) {
        const reply = await get(path, k.supB!);
        expect(reply.status, path).to.be.oneOf([200, 422]);
        expect(ids(reply).filter((id) => Object.values(a).includes(id!)), path).to.deep.equal([]);
        expect(reply.text, path).to.not.include('sid-of-a');
      }
      // The owner does see them: the filters are not simply empty.
      expect(ids(await get('/functions/deliveries', k.supA!))).to.include.members([a.sold, a.unsold]);
      expect(ids(await get('/functions/feedback', k.supA!))).to.include(a.sold);
    });

    it("GET /functions/reports/summary (JSON and CSV, any grouping) holds only the caller's own leads", async function () {
      // A supplier= parameter is no filter of a report: refused by name, revealing nothing.
      const filtered = await get('/functions/reports/summary?group_by=sid&supplier=sup-a', k.supB!);
      expect([filtered.status, filtered.body.errors]).to.deep.equal([422, [{ field: 'supplier', code: 'unknown_field', message: 'supplier is not a parameter of this list' }]]);
      expect(filtered.text).to.not.include('sid-of-a');
      for (const query of ['group_by=supplier', 'group_by=sid,s1,state,buyer', 'group_by=day&test=include']) {
        const reply = await get(`/functions/reports/summary?${query}`, k.supB!);
        expect(reply.status, query).to.equal(200);
        const received = ((reply.body.items ?? []) as Array<{ received: number }>).reduce((n, row) => n + row.received, 0);
        expect(received, query).to.equal(1);
        expect(reply.text, query).to.not.include('sid-of-a');
        const csv = await get(`/functions/reports/summary?${query}`, k.supB!, { accept: 'text/csv' });
        expect(csv.text, `${query} as CSV`).to.not.include('sid-of-a');
      }
      const own = await get('/functions/reports/summary?group_by=sid&test=include', k.supA!);
      expect(own.text).to.include('sid-of-a');
    });

    it('the buyer-side routes refuse a supplier: 403 FORBIDDEN on ack and feedback, for its own lead and for another', async function () {
      for (const key of [k.supA!, k.supB!]) {
        const ack = await svc.post('', { 'x-api-key': key }, `/functions/deliveries/${a.sold}/ack`);
        expect(ack.status, ack.text).to.equal(403);
        expect(ack.body.code).to.equal('FORBIDDEN');
        const feedback = await svc.post({ type: 'return', reason: 'fraud' }, { 'x-api-key': key }, `/functions/leads/${a.sold}/feedback`);
        expect(feedback.status, feedback.text).to.equal(403);
      }
    });
  });

  describe('HSTS and no internals in any response', function () {
    let svc: TestService;
    let events: FaultyEventStore;
    let readModels: FaultyReadModels;
    let supplier: string;
    let buyer: string;
    let soldId: number;

    before(async function () {
      svc = await TestService.start({
        routing: ROUTING,
        wrapStore: (store) => (events = new FaultyEventStore(store)),
        wrapReadModels: (store) => (readModels = new FaultyReadModels(store)),
      });
      supplier = await svc.key();
      buyer = await svc.key('buyer', 'ca-buyer');
      soldId = (await svc.post(leadNumber(1, {}, 'hsts'), { 'x-api-key': supplier })).body.lead_id as number;
    });
    after(async () => svc?.stop());
    afterEach(() => {
      events.heal();
      delete events.fault.error;
      Object.assign(readModels.fault, { commit: false, reads: false });
    });

    it('every HTTPS response carries HSTS (max-age of a year or more, includeSubDomains), success or error', async function () {
      const replies: Array<[string, Reply]> = [
        ['200 healthz', await svc.request('GET', '/healthz')],
        ['201 sold', await svc.post(leadNumber(2, {}, 'hsts'), { 'x-api-key': supplier })],
        ['200 read-back', await svc.request('GET', `/functions/leads/${soldId}`, { 'x-api-key': supplier })],
        ['400 malformed', await svc.post('{', { 'x-api-key': supplier })],
        ['401', await svc.post('{}', {})],
        ['403', await svc.post('{}', { 'x-api-key': buyer })],
        ['404', await svc.request('GET', '/nowhere')],
        ['405', await svc.request('DELETE', '/functions/leads')],
        ['413', await svc.post(`{"s1":"${'x'.repeat(70_000)}"}`, { 'x-api-key': supplier })],
        ['415', await svc.post('x', { 'x-api-key': supplier, 'content-type': 'text/plain' })],
        ['422', await svc.post(leadNumber(3, { zip: 'x' }, 'hsts'), { 'x-api-key': supplier })],
      ];
      events.fault.failAppend = () => true;
      replies.push(['503', await svc.post(leadNumber(4, {}, 'hsts'), { 'x-api-key': supplier })]);
      events.fault.error = () => new TypeError('canary');
      replies.push(['500', await svc.post(leadNumber(5, {}, 'hsts'), { 'x-api-key': supplier })]);
      for (const raw of [`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`, 'NONSENSE\r\n\r\n']) {
        const exchange = await rawExchange(svc.port, [raw], { timeoutMs: 5000 });
        const response = exchange.responses[0]!;
        replies.push([`${response.status} from the listener`, toReply(response.status, response.headers, response.text)]);
      }
      expect(replies.map(([label, reply]) => `${label}: ${reply.status}`)).to.have.length(15);
      for (const [label, reply] of replies) {
        const hsts = String(reply.headers['strict-transport-security'] ?? '');
        const maxAge = Number(/max-age=(\d+)/.exec(hsts)?.[1] ?? 0);
        expect(maxAge, `${label}: ${hsts}`).to.be.at.least(31_536_000);
        expect(hsts, label).to.include('includeSubDomains');
      }
      const plain = await svc.plainHttp('GET', '/healthz');
      expect(plain.headers['strict-transport-security'], 'never over plain HTTP (RFC 6797 §7.2)').to.equal(undefined);
    });

    it('an internal error thrown anywhere is 500 INTERNAL_ERROR without stack, path, error name or message — and it is logged', async function () {
      const internal = () => {
        const error = new TypeError("canary: cannot read properties of undefined (reading 'x') at /work/secret/path.js:12:34");
        error.stack = `${error.message}\n    at Object.<anonymous> (file:///work/leadpost/dist/src/secret.js:12:34)`;
        return error;
      };
      events.fault.error = internal;
      events.fault.failAppend = () => true;
      events.fault.failRead = (stream) => /^lead-\d+$/.test(stream);
      const replies: Array<[string, Reply]> = [
        ['POST lead (append throws)', await svc.post(leadNumber(6, {}, 'hsts'), { 'x-api-key': supplier })],
        ['POST feedback (read throws)', await svc.post({ type: 'conversion' }, { 'x-api-key': buyer }, `/functions/leads/${soldId}/feedback`)],
      ];
      events.heal();
      // The read-model store's own error type is an outage (503); anything else it throws is a bug.
      const stubs = [
        sinon.stub(readModels, 'get').callsFake(() => Promise.reject(internal())),
        sinon.stub(readModels, 'find').callsFake(() => Promise.reject(internal())),
        sinon.stub(readModels, 'aggregate').callsFake(() => Promise.reject(internal())),
      ];
      try {
        replies.push(['GET leads (read model throws)', await svc.request('GET', '/functions/leads', { 'x-api-key': supplier })]);
        replies.push(['GET deliveries (read model throws)', await svc.request('GET', '/functions/deliveries', { 'x-api-key': supplier })]);
        replies.push(['GET report (read model throws)', await svc.request('GET', '/functions/reports/summary', { 'x-api-key': supplier })]);
      } finally {
        for (const stub of stubs) stub.restore();
      }
      for (const [label, reply] of replies) {
        expect(reply.status, `${label}: ${reply.text}`).to.equal(500);
        expect(reply.body, label).to.include({ ok: false, code: 'INTERNAL_ERROR' });
        expect(leaks(reply.text), `${label}: ${reply.text}`).to.deep.equal([]);
        expect(leaks(JSON.stringify(reply.headers)), `${label} headers`).to.deep.equal([]);
        // Logged with its trace id, stack and all, for the engineer on call.
        expect(svc.logs.some((line) => line.includes(String(reply.body.trace_id)) && line.includes('canary')), `${label} logged`).to.equal(true);
      }
      // A store outage is not a bug: 503, and no internals either.
      events.fault.failAppend = () => true;
      events.fault.error = () => new EventStoreUnavailableError('canary: disk full at /var/lib/leadpost/events.db');
      const outage = await svc.post(leadNumber(7, {}, 'hsts'), { 'x-api-key': supplier });
      expect(outage.status).to.equal(503);
      expect(leaks(outage.text)).to.deep.equal([]);
    });
  });
});

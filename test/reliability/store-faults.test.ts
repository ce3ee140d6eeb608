// Store faults. While a store fails the service answers what the contract says
// (503 UNAVAILABLE, Retry-After, nothing half-written), and when the store comes
// back it serves again without a restart:
//   - the event store fails in process, through a decorator around the real embedded adapter: every
//     append, the reads of the support streams, only the lead's own append (after its contacts,
//     cap slot and idempotency key were taken), and an outage that starts mid-request and outlasts
//     the background release of the lead's contact claims;
//   - the data dir refuses writes at the operating-system level under a real `leadpost serve`:
//     full (RLIMIT_FSIZE lowered on the running process) and read-only (`chattr +i`), each skipped
//     with its reason where the machine cannot do it;
//   - the read-model store fails: posts still succeed, read routes answer 503 (never 500), and the
//     projections resume and converge to exact counts when it heals.

import { expect } from 'chai';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import type { EventStore } from '../../src/event-store/index.js';
import { envelopeProblems } from '../post-lead/helpers.js';
import { type Reply, TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { Client } from './support/client.js';
import {
  type EventStoreFault,
  FaultyEventStore,
  FaultyReadModels,
  fileSizeLimit,
  fileSizeLimitUnavailable,
  immutable,
  immutableUnavailable,
} from './support/faults.js';
import { type LeadOutcome, leadNumber, leadStreams, readLead, totalsOf, totalsOfRows } from './support/leads.js';
import { createKey, type CreatedKey, ServerProcess, writeRouting } from './support/server-process.js';

const ROUTING = {
  currency: 'USD',
  buyers: [{ id: 'ca-capped', price: 20, states: ['CA'], caps: [{ period: 'day', max: 1000 }] }],
  buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }],
};
/** The outage ends; a client that honours `Retry-After: 1` comes back this much later. */
const RETRY_AFTER_MS = 1000;
const CONVERGE_MS = 20_000;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let serial = 0;
interface Post {
  readonly body: Record<string, unknown>;
  readonly idempotencyKey?: string;
}
/** Half CA (sold), half TX (unsold); the first `keyed` with an Idempotency-Key. */
function posts(count: number, keyed: number, tag: string): Post[] {
  return Array.from({ length: count }, (_, i) => {
    serial += 1;
    const body = leadNumber(serial, i % 2 === 0 ? {} : { accident_state: 'TX', zip: '75001' }, tag);
    return i < keyed ? { body, idempotencyKey: `${tag}-${serial}` } : { body };
  });
}
const headersOf = (key: string, post: Post): Record<string, string> => ({
  'x-api-key': key,
  ...(post.idempotencyKey ? { 'idempotency-key': post.idempotencyKey } : {}),
});

function expectUnavailable(replies: readonly Reply[]): void {
  for (const reply of replies) {
    expect(reply.status, reply.text).to.equal(503);
    // The one 5xx the contract has: the envelope checker flags every 5xx, so that line is expected.
    expect(envelopeProblems(reply)).to.deep.equal(['status 503 >= 500']);
    expect(reply.body).to.include({ code: 'UNAVAILABLE', acceptance: 'error', Response: 'Error', lead_id: null });
    expect(reply.headers['retry-after']).to.equal('1');
  }
}

function expectAccepted(replies: readonly Reply[]): void {
  for (const reply of replies) {
    expect(reply.status, reply.text).to.equal(201);
    expect(['SOLD', 'UNSOLD']).to.include(reply.body.code);
    expect(reply.headers['idempotency-replayed'], 'a first answer, not a replay').to.equal(undefined);
  }
}

/** Every lead stream whole; returns the outcomes. */
async function wholeLeads(store: EventStore): Promise<Map<number, LeadOutcome>> {
  const outcomes = new Map<number, LeadOutcome>();
  const problems: string[] = [];
  for (const [id, events] of await leadStreams(store)) {
    const read = readLead(id, events);
    problems.push(...read.problems);
    if (read.outcome) outcomes.set(id, read.outcome);
  }
  expect(problems, 'partial lead streams').to.deep.equal([]);
  return outcomes;
}

describe('reliability: store faults', function () {
  this.timeout(60_000);

  describe('the event store fails (a decorator around the embedded adapter that throws)', function () {
    let svc: TestService;
    let faulty: FaultyEventStore;
    let key: string;

    before(async function () {
      // One id per block: every lead also appends to lead-id-blocks, so that stage fails too.
      svc = await TestService.start({ routing: ROUTING, wrapStore: (store) => (faulty = new FaultyEventStore(store)), env: { LEAD_ID_BLOCK_SIZE: '1' } });
      key = await svc.key();
    });
    after(async () => svc?.stop());
    afterEach(() => faulty.heal());

    /**
     * Posts while the fault is on (every answer 503, nothing recorded), heals it after `outageMs`,
     * then sends the very same posts again after Retry-After: each is accepted as a first answer,
     * not a DUPLICATE of itself or an IDEMPOTENCY_CONFLICT.
     */
    async function outage(fault: EventStoreFault, batch: Post[], outageMs = 0): Promise<void> {
      const before = await wholeLeads(svc.service.store);
      Object.assign(faulty.fault, fault);
      expectUnavailable(await Promise.all(batch.map((p) => svc.post(p.body, headersOf(key, p)))));
      expect([...(await wholeLeads(svc.service.store)).keys()], 'no lead recorded during the outage').to.deep.equal([...before.keys()]);
      // Fixed paces of the scenario, not waits for an event: the outage lasts outageMs, and the
      // client sends again after the Retry-After it was given, as a real one would.
      await sleep(outageMs);
      faulty.heal();
      await sleep(RETRY_AFTER_MS);
      const retries = await Promise.all(batch.map((p) => svc.post(p.body, headersOf(key, p))));
      expectAccepted(retries);
      const after = await wholeLeads(svc.service.store);
      for (const reply of retries) expect(after.get(reply.body.lead_id as number)?.code, `lead ${String(reply.body.lead_id)}`).to.equal(reply.body.code);
      expect(after.size).to.equal(before.size + batch.length);
    }

    it('every append fails: 503 UNAVAILABLE with Retry-After, nothing recorded; the same posts succeed once it heals, without a restart', async function () {
      await outage({ failAppend: () => true }, posts(8, 4, 'all-appends'));
      expect(faulty.refused).to.be.greaterThan(0);
    });

    it('reads of the support streams fail (id blocks, contacts, idempotency keys): 503, then recovery', async function () {
      await outage({ failRead: (stream) => stream !== 'api-keys' && !/^lead-\d+$/.test(stream) }, posts(8, 4, 'support-reads'));
    });

    it("only the lead's own append fails, after its contacts, cap slot and idempotency key were taken: all given back, the retry is accepted", async function () {
      await outage({ failAppend: (stream) => /^lead-\d+$/.test(stream) }, posts(8, 4, 'lead-append'));
    });

    it("the store goes down between a lead's two contact claims: the one taken is given back, the retry is not a DUPLICATE", async function () {
      // The mobile is claimed, then the store fails the e-mail claim and everything after it.
      let claims = 0;
      let down = false;
      const failAppend = (stream: string): boolean => {
        if (!down && stream.startsWith('contact-')) claims += 1;
        down ||= claims === 2;
        return down;
      };
      await outage({ failAppend }, posts(1, 0, 'between-claims'));
    });

    it("an Idempotency-Key's answer that fails to be recorded is recorded in the background: a retry with the key replays it, never a second lead", async function () {
      // The key's claim lands; the append of its answer (the key's second) fails once.
      const appends = new Map<string, number>();
      const failAppend = (stream: string): boolean => {
        if (!stream.startsWith('idempotency-')) return false;
        const n = (appends.get(stream) ?? 0) + 1;
        appends.set(stream, n);
        return n === 2;
      };
      Object.assign(faulty.fault, { failAppend });
      const [post] = posts(1, 1, 'answer-lost');
      const first = await svc.post(post!.body, headersOf(key, post!));
      expectAccepted([first]);
      const [stream] = [...appends.keys()];
      await until('the idempotent response recorded on a later try', async () => (await svc.service.store.readStream(stream!)).some((e) => e.type === 'IdempotentResponseRecorded'));
      expect((await svc.service.store.readStream(stream!)).map((e) => e.type)).to.deep.equal(['IdempotencyKeyClaimed', 'IdempotentResponseRecorded']);
      const again = await svc.post(post!.body, headersOf(key, post!));
      expect([again.status, again.body.lead_id, again.headers['idempotency-replayed']]).to.deep.equal([201, first.body.lead_id, 'true']);
    });

    it("a lead's append that lands but whose answer is lost: the post is answered from the lead's stream, and the lead keeps its claims", async function () {
      Object.assign(faulty.fault, { loseAnswer: (stream: string) => /^lead-\d+$/.test(stream) });
      const [sold, bucketed] = posts(2, 0, 'answer-lost-lead');
      const replies = await Promise.all([sold!, bucketed!].map((p) => svc.post(p.body, headersOf(key, p))));
      faulty.heal();
      expectAccepted(replies);
      const recorded = await wholeLeads(svc.service.store);
      for (const reply of replies) expect(recorded.get(reply.body.lead_id as number)?.code, `lead ${String(reply.body.lead_id)}`).to.equal(reply.body.code);
      // Its contacts stay claimed: the same consumer again is a duplicate of it.
      const again = await svc.post(sold!.body, headersOf(key, sold!));
      expect([again.status, again.body.code]).to.deep.equal([409, 'DUPLICATE']);
    });

    it('the store goes down mid-request and stays down longer than the claim releases used to retry (5 s): the retry is still not a DUPLICATE', async function () {
      this.timeout(30_000);
      // From the first failed lead append on, every append fails: the contact claims the lead took
      // cannot be given back until the store heals. They must still be given back then — a claim
      // of a lead that was never recorded blocks a retry as DUPLICATE (a Failure: the supplier
      // drops the lead) for CLAIM_IN_FLIGHT_MS. Without Idempotency-Keys: an abandoned key whose
      // release could not be written is answered 409 + Retry-After (retryable) until it goes stale.
      let down = false;
      await outage({ failAppend: (stream) => (down ||= /^lead-\d+$/.test(stream)) }, posts(4, 0, 'mid-request'), 5500);
    });
  });

  describe('the data dir refuses writes at the operating-system level (a `leadpost serve` process)', function () {
    this.timeout(90_000);
    // Made in before(), not here: a describe body also runs when a filter (-g) skips every test.
    let dir: ReturnType<typeof tempDir>;
    let server: ServerProcess | undefined;
    let supplier: CreatedKey;
    let analyst: CreatedKey;
    const client = new Client(16);
    const answered: Reply[] = [];

    before(async function () {
      dir = tempDir('os-faults');
      const routingFile = writeRouting(dir.path, ROUTING);
      [supplier, analyst] = await Promise.all([createKey(dir.path, 'supplier', 'sup-os'), createKey(dir.path, 'analyst', 'ann')]);
      server = await ServerProcess.start({ dataDir: dir.path, routingFile });
    });
    after(async function () {
      client.destroy();
      await server?.stop();
      dir?.remove();
    });

    const post = async (p: Post) => {
      const reply = await client.post(server!.httpsPort, p.body, headersOf(supplier.key, p));
      answered.push(reply);
      return reply;
    };

    /** Accepted before; 503 while `apply` is in force (reads still served); accepted again after `lift`, by the same process. */
    async function osFault(tag: string, apply: () => void, lift: () => void): Promise<void> {
      const pid = server!.pid;
      const warm = await Promise.all(posts(3, 1, `${tag}-warm`).map(post));
      expectAccepted(warm);
      const batch = posts(10, 4, tag);
      apply();
      try {
        expectUnavailable(await Promise.all(batch.map(post)));
        // Reads need no writes: a lead recorded before is still served.
        const view = await client.request(server!.httpsPort, 'GET', `/functions/leads/${String(warm[0]!.body.lead_id)}`, { 'x-api-key': supplier.key });
        expect(view.status, view.text).to.equal(200);
      } finally {
        lift();
      }
      // The client's own pace: it sends again after the Retry-After it was given.
      await sleep(RETRY_AFTER_MS);
      expectAccepted(await Promise.all(batch.map(post)));
      expect(server!.pid, 'the same process').to.equal(pid);
      expect(server!.lines.filter((l) => l.includes('"leadpost listening"')), 'no restart').to.have.length(1);

      const store = await EmbeddedEventStore.open(dir.path);
      let outcomes: Map<number, LeadOutcome>;
      try {
        outcomes = await wholeLeads(store);
      } finally {
        await store.close();
      }
      // Exactly the leads answered with a lead_id were recorded: the 503s left nothing behind.
      const named = answered.map((r) => r.body.lead_id).filter((id): id is number => typeof id === 'number');
      expect([...outcomes.keys()].sort((a, b) => a - b)).to.deep.equal([...new Set(named)].sort((a, b) => a - b));
      // The projections, which failed to commit while the disk refused writes, resume and converge.
      const expected = totalsOf(outcomes.values());
      const started = Date.now();
      let seen = totalsOfRows([]);
      while (Date.now() - started < CONVERGE_MS) {
        const report = await client.request(server!.httpsPort, 'GET', '/functions/reports/summary?group_by=supplier', { 'x-api-key': analyst.key });
        seen = totalsOfRows((report.body.items ?? []) as Array<Record<string, unknown>>);
        if (JSON.stringify(seen) === JSON.stringify(expected)) break;
        await sleep(200);
      }
      expect(seen).to.deep.equal(expected);
    }

    it('a full disk (RLIMIT_FSIZE of the running server lowered to 1 byte): 503 with Retry-After, nothing half-written, recovery without a restart', async function () {
      const reason = fileSizeLimitUnavailable();
      if (reason) {
        console.log(`      skipped: ${reason}`);
        this.skip();
      }
      await osFault('fsize', () => fileSizeLimit(server!.pid, 1), () => fileSizeLimit(server!.pid, 'unlimited'));
    });

    it('a read-only data dir (chattr +i on the dir and the database files): 503 with Retry-After, nothing half-written, recovery without a restart', async function () {
      const reason = immutableUnavailable();
      if (reason) {
        console.log(`      skipped: ${reason}`);
        this.skip();
      }
      // The -shm files stay writable: they are memory-mapped, and a refused page fault would be
      // SIGBUS, not an error SQLite could report — a read-only mount would not let SQLite map them
      // writable in the first place.
      const files = () => [dir.path, ...readdirSync(dir.path).filter((f) => /\.db(-wal)?$/.test(f)).map((f) => join(dir.path, f))];
      const locked = files();
      await osFault('read-only', () => immutable(locked, true), () => immutable(locked, false));
    });
  });

  describe('the read-model store fails (a decorator around the embedded adapter that throws)', function () {
    let svc: TestService;
    let faulty: FaultyReadModels;
    let supplier: string;
    let analyst: string;

    before(async function () {
      svc = await TestService.start({ routing: ROUTING, wrapReadModels: (store) => (faulty = new FaultyReadModels(store)) });
      supplier = await svc.key();
      analyst = await svc.key('analyst', 'ann');
    });
    after(async () => svc?.stop());
    afterEach(() => Object.assign(faulty.fault, { commit: false, reads: false }));

    async function converges(): Promise<void> {
      const expected = totalsOf((await wholeLeads(svc.service.store)).values());
      const head = await svc.service.store.headPosition();
      const positions = () => Object.fromEntries(svc.service.projections.all.map((runner) => [runner.projection.name, runner.position]));
      const atHead = () => Object.fromEntries(svc.service.projections.all.map((runner) => [runner.projection.name, head]));
      const started = Date.now();
      let seen = totalsOfRows([]);
      // Each projection retries its failed commits on its own backoff: the report can be whole
      // while another projection is still waiting for its next try.
      while (Date.now() - started < CONVERGE_MS) {
        const report = await svc.request('GET', '/functions/reports/summary?group_by=supplier', { 'x-api-key': analyst });
        seen = totalsOfRows((report.body.items ?? []) as Array<Record<string, unknown>>);
        if (JSON.stringify(seen) === JSON.stringify(expected) && JSON.stringify(positions()) === JSON.stringify(atHead())) break;
        await sleep(100);
      }
      expect(seen).to.deep.equal(expected);
      expect(positions()).to.deep.equal(atHead());
    }

    it('projection commits fail: posts still 201, each lead readable from its events; when it heals the projections resume and converge exactly', async function () {
      faulty.fault.commit = true;
      const replies = await Promise.all(posts(12, 3, 'rm-commit').map((p) => svc.post(p.body, headersOf(supplier, p))));
      expectAccepted(replies);
      const waited = Date.now();
      while (faulty.refusedCommits === 0 && Date.now() - waited < 5000) await sleep(20);
      expect(faulty.refusedCommits, 'the projections tried to commit and were refused').to.be.greaterThan(0);
      for (const reply of replies) {
        const view = await svc.request('GET', `/functions/leads/${String(reply.body.lead_id)}`, { 'x-api-key': supplier });
        expect(view.status, view.text).to.equal(200);
        expect((view.body.lead as { code: string }).code).to.equal(reply.body.code);
      }
      faulty.fault.commit = false;
      await converges();
    });

    it('the read-model store is down: posts still 201, and a lead reads back from its own stream; every list and report answers 503 UNAVAILABLE with Retry-After, never 500; all serve again when it heals', async function () {
      Object.assign(faulty.fault, { commit: true, reads: true });
      const replies = await Promise.all(posts(6, 2, 'rm-down').map((p) => svc.post(p.body, headersOf(supplier, p))));
      expectAccepted(replies);
      // One lead is folded from its stream in the event store: the read-model store is not asked.
      const one = await svc.request('GET', `/functions/leads/${String(replies[0]!.body.lead_id)}`, { 'x-api-key': supplier });
      expect(one.status, one.text).to.equal(200);
      expect((one.body.lead as { code?: unknown }).code).to.equal(replies[0]!.body.code);
      const routes = ['/functions/leads', '/functions/deliveries', '/functions/feedback', '/functions/reports/summary'];
      for (const path of routes) {
        const reply = await svc.request('GET', path, { 'x-api-key': supplier });
        expect(reply.status, `${path}: ${reply.text}`).to.equal(503);
        expect(reply.body, path).to.include({ ok: false, code: 'UNAVAILABLE' });
        expect(reply.body.trace_id).to.equal(reply.headers['x-trace-id']);
        expect(reply.headers['retry-after'], path).to.equal('1');
      }
      Object.assign(faulty.fault, { commit: false, reads: false });
      for (const path of routes) expect((await svc.request('GET', path, { 'x-api-key': supplier })).status, path).to.equal(200);
      await converges();
    });
  });
});

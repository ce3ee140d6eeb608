import { expect } from 'chai';
import Database from 'better-sqlite3';
import { type EventStore, EventStoreUnavailableError } from '../../src/event-store/port.js';
import { FailureRun } from '../../src/ops/failure-run.js';
import { ReadinessProbe } from '../../src/ops/readiness.js';
import { overriding } from '../support/overriding.js';
import { TestService, validLead } from '../support/service.js';

// /readyz and the instance's own appends: a store that still answers reads while every append
// fails (a full disk) must take the instance out of the load balancer, and let it back in once the
// appends work again.

const diskFull = () => {
  const cause = new Database.SqliteError('database or disk is full', 'SQLITE_FULL');
  return new EventStoreUnavailableError(`the event store failed: ${cause.message}`, { cause });
};

describe('readiness from the instance’s own appends', function () {
  this.timeout(30_000);

  describe('FailureRun', function () {
    let now = 0;
    const clock = () => now;
    beforeEach(() => (now = 1_000_000));

    it('is failing once every append for the window has failed, at least three of them, and names the last cause', function () {
      const health = new FailureRun(5000, clock);
      const error = diskFull();
      health.record('unavailable', error);
      now += 2000;
      health.record('unavailable', error);
      now += 2000;
      health.record('error', error);
      expect(health.failing(), 'four seconds of failures: not yet a run').to.equal(null);
      now += 1000;
      expect(health.failing()).to.deep.equal({ seconds: 5, failures: 3, cause: error });
    });

    it('two failures in the window are not a run, however long it lasts', function () {
      const health = new FailureRun(5000, clock);
      health.record('unavailable', diskFull());
      now += 4000;
      health.record('unavailable', diskFull());
      now += 1000;
      expect(health.failing()).to.equal(null);
    });

    it('any answer from the store ends a run: a success, or a conflict on a revision', function () {
      for (const answer of ['ok', 'conflict'] as const) {
        const health = new FailureRun(5000, clock);
        for (let i = 0; i < 6; i++, now += 1000) health.record('unavailable', diskFull());
        expect(health.failing(), answer).to.not.equal(null);
        health.record(answer);
        expect(health.failing(), answer).to.equal(null);
        // A failure after it starts a new run, not the old one's.
        health.record('unavailable', diskFull());
        expect(health.failing(), answer).to.equal(null);
      }
    });

    it('forgets a run after a quiet window with no failed append (half-open), and a new run needs its own window', function () {
      const health = new FailureRun(5000, clock);
      for (let i = 0; i < 6; i++, now += 1000) health.record('unavailable', diskFull());
      expect(health.failing()).to.not.equal(null);
      now += 5001;
      expect(health.failing(), 'no post was sent meanwhile: ready again, so that posts try').to.equal(null);
      health.record('unavailable', diskFull());
      health.record('unavailable', diskFull());
      health.record('unavailable', diskFull());
      expect(health.failing()).to.equal(null);
      now += 5000;
      health.record('unavailable', diskFull());
      expect(health.failing()).to.include({ seconds: 5, failures: 4 });
    });
  });

  describe('ReadinessProbe', function () {
    const base = {
      keyStore: { probe: async () => {} },
      events: { headPosition: async () => ({ commit: 1, prepare: 1 }) },
      readModels: { checkpoint: async () => null, acquireLease: async () => ({ name: 'readyz-write-probe', holder: 'readyz-write-probe', token: 1, expiresAt: Date.now() + 1000 }), leasesNamed: async () => [] },
      projections: async () => [{ projection: 'leads', build: 'v1', position: { commit: 1, prepare: 1 }, caughtUp: true, eventsBehind: 0, lagSeconds: 0 }],
      maxLagSeconds: 30,
      shuttingDown: () => false,
    };

    it('says the event store is not ready while its appends all fail though it reads, naming the cause from its code only', async function () {
      const run = { seconds: 6.2, failures: 41, cause: diskFull() };
      const result = await new ReadinessProbe({ ...base, appends: { failing: () => run } }).check();
      expect(result.ready).to.equal(false);
      expect(result.checks.event_store).to.deep.equal({ ok: false, detail: 'reads answer, but every append has failed for 6.2 s (41 appends): disk full (SQLITE_FULL)' });
      const codeless = await new ReadinessProbe({ ...base, appends: { failing: () => ({ ...run, cause: new Error('esdb://admin:secret@host') }) } }).check();
      expect(codeless.checks.event_store.detail).to.equal('reads answer, but every append has failed for 6.2 s (41 appends): failing');
      expect((await new ReadinessProbe({ ...base, appends: { failing: () => null } }).check()).ready).to.equal(true);
    });

    it('logs a check that times out with words, not an empty message', async function () {
      const lines: Array<Record<string, unknown>> = [];
      const logger = { warn: (fields: Record<string, unknown>) => lines.push(fields) } as unknown as import('pino').Logger;
      await new ReadinessProbe({ ...base, events: { headPosition: () => new Promise(() => {}) }, timeoutMs: 20, logger }).check();
      expect((lines[0]!.err as Error).message).to.equal('no answer within 20 ms');
    });
  });

  describe('in a running service', function () {
    let svc: TestService | undefined;
    afterEach(async () => {
      await svc?.stop();
      svc = undefined;
    });

    it('answers 503 naming event_store while every post’s append fails on a full disk, and 200 again once appends work', async function () {
      let full = false;
      svc = await TestService.start({
        env: { READY_APPEND_FAILURE_SECONDS: '1' },
        wrapStore: (store) => overriding<EventStore>(store, { append: (...args) => (full ? Promise.reject(diskFull()) : store.append(...args)) }),
      });
      const key = await svc.key();
      expect((await svc.request('GET', '/readyz')).status).to.equal(200);

      full = true;
      let readiness = await svc.request('GET', '/readyz');
      const deadline = Date.now() + 15_000;
      while (readiness.status === 200) {
        if (Date.now() > deadline) throw new Error('/readyz stayed 200 while every append failed');
        const post = await svc.post(validLead(), { 'x-api-key': key });
        expect(post.status).to.equal(503);
        readiness = await svc.request('GET', '/readyz');
      }
      expect(readiness.status).to.equal(503);
      expect(readiness.body.code).to.equal('UNAVAILABLE');
      expect(readiness.body.message).to.match(/event_store \(reads answer, but every append has failed for \d+(\.\d)? s \(\d+ appends\): disk full \(SQLITE_FULL\)\)/);
      expect(readiness.body.message).to.not.contain('database or disk is full');

      // Space freed: with no post sent (the load balancer took the instance out), it reports ready
      // again after a quiet window, and the posts it is then sent succeed.
      full = false;
      while ((await svc.request('GET', '/readyz')).status !== 200) {
        if (Date.now() > deadline + 15_000) throw new Error('/readyz did not come back after the appends could work again');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect((await svc.post(validLead(), { 'x-api-key': key })).status).to.equal(201);
      expect((await svc.request('GET', '/readyz')).status).to.equal(200);
    });
  });
});

import { expect } from 'chai';
import Database from 'better-sqlite3';
import { type EventStore, EventStoreUnavailableError } from '../../src/event-store/port.js';
import { PROBE_LEASE, ReadinessProbe } from '../../src/ops/readiness.js';
import { PROJECTIONS } from '../../src/projections/index.js';
import type { ProjectionStatus } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { type Lease, ReadModelUnavailableError } from '../../src/read-models/port.js';
import { LeaseKeeper } from '../../src/roles/lease-keeper.js';
import { ENVELOPE_FIELDS, TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { leaseOfProjection, projectionLease } from '../../src/roles/projector-leases.js';

/** What the probe's write answers with, in the stubs of a store. */
const PROBE_TAKEN: Lease = { name: PROBE_LEASE, holder: PROBE_LEASE, token: 1, expiresAt: Date.now() + 1000 };

const LEASE = { leads: leaseOfProjection('leads')!, deliveries: leaseOfProjection('deliveries')!, feedback: leaseOfProjection('feedback')!, reports: leaseOfProjection('reports')! };

// /healthz and /readyz through the real HTTPS server and embedded stores; the store is wrapped
// only to make it fail or stall the way a real outage would.

const status = (projection: string, lagSeconds: number): ProjectionStatus => ({
  projection,
  build: 'v1',
  position: { commit: 1, prepare: 1 },
  caughtUp: lagSeconds === 0,
  eventsBehind: lagSeconds === 0 ? 0 : 7,
  lagSeconds,
});

describe('health and readiness', function () {
  this.timeout(30_000);

  describe('in a running service', function () {
    let svc: TestService | undefined;
    afterEach(async () => {
      await svc?.stop();
      svc = undefined;
    });

    it('/healthz says the process is up, without a key', async function () {
      svc = await TestService.start();
      const reply = await svc.request('GET', '/healthz');
      expect(reply.status).to.equal(200);
      expect(reply.body).to.include({ ok: true, code: 'OK' });
      expect(reply.body.trace_id).to.match(/^[0-9a-f]{32}$/);
    });

    it('/readyz is 200 with every check named when both stores answer and the projections keep up', async function () {
      svc = await TestService.start();
      const reply = await svc.request('GET', '/readyz');
      expect(reply.status).to.equal(200);
      expect(reply.body).to.include({ ok: true, code: 'OK', message: 'ready' });
      const checks = reply.body.checks as Record<string, { ok: boolean; detail: string; items?: Array<{ projection: string }>; roles?: string[]; leases?: unknown[] }>;
      expect(checks).to.have.keys('shutdown', 'event_store', 'read_models', 'key_store', 'projections', 'roles');
      expect(Object.values(checks).every((check) => check.ok)).to.equal(true);
      expect(checks.projections!.items!.map((item) => item.projection)).to.include.members(['leads', 'deliveries', 'reports']);
      // One instance on its own runs every role and holds every lease: one per projection, and delivery's.
      expect(checks.roles!.roles).to.deep.equal(['api', 'projector', 'delivery']);
      expect(checks.roles!.detail).to.equal('api, projector (holds leads, deliveries, feedback, reports), delivery (holds the lease)');
      expect(checks.roles!.leases).to.deep.equal(svc.service.leases().map((l) => ({ ...l, held: true })));
    });

    it("/readyz names the retention sweep's lease too, where PII_RETENTION_DAYS is set: a lease of no role", async function () {
      svc = await TestService.start({ env: { PII_RETENTION_DAYS: '30' } });
      const detail = await until('the retention lease held', async () => {
        const roles = ((await svc!.request('GET', '/readyz')).body.checks as Record<string, { detail: string }>).roles!.detail;
        return roles.endsWith('retention (holds the lease)') ? roles : undefined;
      });
      expect(detail).to.equal('api, projector (holds leads, deliveries, feedback, reports), delivery (holds the lease), retention (holds the lease)');
    });

    it('/readyz is 503 UNAVAILABLE naming event_store when the event store stops answering, and 200 again when it is back', async function () {
      let down = false;
      svc = await TestService.start({
        wrapStore: (store) => ({
          ...bind(store),
          headPosition: () => (down ? Promise.reject(new EventStoreUnavailableError('disk gone')) : store.headPosition()),
        }),
      });
      down = true;
      const reply = await svc.request('GET', '/readyz');
      expect(reply.status).to.equal(503);
      expect(reply.body).to.include.keys(...ENVELOPE_FIELDS, 'checks');
      expect(reply.body).to.include({ ok: false, code: 'UNAVAILABLE', acceptance: 'error', Response: 'Error' });
      expect(reply.body.message).to.contain('event_store (unreachable)');
      expect(reply.body.message).to.not.contain('disk gone');
      expect(reply.headers['retry-after']).to.equal('5');
      down = false;
      expect((await svc.request('GET', '/readyz')).status).to.equal(200);
    });

    it('/readyz is 503 naming the projections once they fall further behind than READY_MAX_LAG_SECONDS', async function () {
      let stalled = false;
      svc = await TestService.start({
        env: { READY_MAX_LAG_SECONDS: '1' },
        // Once stalled, the subscriptions hand the projections nothing more: they never see the events appended below.
        wrapStore: (store) => ({ ...bind(store), subscribeToAll: (options) => stallable(store.subscribeToAll(options), () => stalled) }),
      });
      const key = await svc.key();
      // Ready while the projections keep up (waited for, not timed: a slow machine takes longer to catch up).
      await until('/readyz 200 with the projections caught up', async () => (await svc!.request('GET', '/readyz')).status === 200);
      stalled = true;
      await svc.post(validLead(), { 'x-api-key': key });
      // The lag grows with the wall clock while the subscription stays stalled: /readyz turns 503
      // once it passes 1 s, however long the machine took to get here.
      const reply = await until('/readyz to turn 503 with the projections over 1 s behind', async () => {
        const answer = await svc!.request('GET', '/readyz');
        return answer.status === 503 ? answer : false;
      });
      expect(reply.status).to.equal(503);
      expect(reply.body.code).to.equal('UNAVAILABLE');
      expect(reply.body.message).to.match(/^not ready: projections \(behind by more than 1 s: leads \d+(\.\d+)? s, /);
      const items = (reply.body.checks as { projections: { items: Array<{ projection: string; caught_up: boolean; events_behind: number }> } }).projections.items;
      expect(items.map((item) => item.projection)).to.include.members(['leads', 'deliveries', 'reports']);
      expect(items.every((item) => !item.caught_up && item.events_behind > 0)).to.equal(true);
    });
  });

  describe('ReadinessProbe', function () {
    const store = { headPosition: async () => ({ commit: 1, prepare: 1 }) };
    /** The projector leases' rows an instance without the projector role reads. */
    let projectorRows: Lease[] = [];
    const readModels = { checkpoint: async () => null, acquireLease: async () => PROBE_TAKEN, leasesNamed: async () => projectorRows };
    const keyStore = { probe: async () => {} };
    const lagging = [status('leads', 0), status('reports', 42.5)];
    /** The projector role, every projection's lease as `lease` says. */
    const projectorRole = (lease: { held: boolean; holder: string | null }) => ({
      running: ['projector', 'delivery'],
      leases: () => PROJECTIONS.map((projection) => ({ lease: projectionLease(projection), ...lease })),
    });

    it('says not ready while shutting down', async function () {
      let shuttingDown = false;
      const probe = new ReadinessProbe({ keyStore, events: store, readModels, projections: async () => [status('leads', 0)], maxLagSeconds: 30, shuttingDown: () => shuttingDown });
      expect((await probe.check()).ready).to.equal(true);
      shuttingDown = true;
      const result = await probe.check();
      expect(result.ready).to.equal(false);
      expect(result.checks.shutdown).to.deep.equal({ ok: false, detail: 'shutting down' });
    });

    it('time-boxes a store that hangs, so the probe answers quickly', async function () {
      const probe = new ReadinessProbe({
        keyStore,
        events: { headPosition: () => new Promise(() => {}) },
        readModels,
        projections: async () => [status('leads', 0)],
        maxLagSeconds: 30,
        shuttingDown: () => false,
        timeoutMs: 50,
      });
      const started = Date.now();
      const result = await probe.check();
      expect(Date.now() - started).to.be.lessThan(1000);
      expect(result.checks.event_store).to.deep.equal({ ok: false, detail: 'no answer within 50 ms' });
    });

    it('names each projection behind the threshold, and no projection at all is not ready either', async function () {
      const late = new ReadinessProbe({
        keyStore,
        events: store,
        readModels,
        projections: async () => [status('leads', 0), status('reports', 42.5)],
        maxLagSeconds: 30,
        shuttingDown: () => false,
      });
      const result = await late.check();
      expect(result.ready).to.equal(false);
      expect(result.checks.projections.detail).to.equal('behind by more than 30 s: reports 42.5 s');
      const none = new ReadinessProbe({ keyStore, events: store, readModels, projections: async () => [], maxLagSeconds: 30, shuttingDown: () => false });
      expect((await none.check()).checks.projections).to.include({ ok: false, detail: 'no projection is running' });
    });

    it('an instance with the projector role counts the lag as its own while no live instance holds the lease: run by no instance', async function () {
      const probe = (lease: { held: boolean; holder: string | null }) =>
        new ReadinessProbe({ keyStore, events: store, readModels, projections: async () => lagging, projectionsHere: () => false, roles: projectorRole(lease), maxLagSeconds: 30, shuttingDown: () => false });
      // The lease free or run out (a stopped holder gave it up; the store refused this one's renewal).
      const free = await probe({ held: false, holder: null }).check();
      expect(free.ready).to.equal(false);
      expect(free.checks.projections).to.include({ ok: false, detail: 'run by no instance, behind by more than 30 s: reports 42.5 s' });
      // Another live instance holds it: the lag is that instance's, reported only.
      const other = await probe({ held: false, holder: 'host:42:abcdef' }).check();
      expect(other.ready).to.equal(true);
      expect(other.checks.projections).to.include({ ok: true, detail: 'run by another instance, behind by more than 30 s: reports 42.5 s' });
      // Within the limit and nobody holding the lease: ready, and it says so.
      const caughtUp = new ReadinessProbe({
        keyStore,
        events: store,
        readModels,
        projections: async () => [status('leads', 0)],
        projectionsHere: () => false,
        roles: projectorRole({ held: false, holder: null }),
        maxLagSeconds: 30,
        shuttingDown: () => false,
      });
      expect((await caughtUp.check()).checks.projections).to.include({ ok: true, detail: 'run by no instance, within 30 s' });
      // Without the projector role (an api instance) the lag stays informational, lease or not: its
      // posts do not wait for the read models. It reads the leases' rows to say who runs them.
      const api = new ReadinessProbe({ keyStore, events: store, readModels, projections: async () => lagging, projectionsHere: () => false, roles: { running: ['api'], leases: () => [] }, maxLagSeconds: 30, shuttingDown: () => false });
      const rows = (expiresAt: number) => Object.values(LEASE).map((name) => ({ name, holder: 'host:42:abcdef', token: 1, expiresAt }));
      try {
        projectorRows = rows(Date.now() + 3_000);
        expect((await api.check()).checks.projections).to.include({ ok: true, detail: 'run by another instance, behind by more than 30 s: reports 42.5 s' });
        // The projector killed: its leases ran out, and no instance runs the projections.
        projectorRows = rows(Date.now() - 1);
        expect((await api.check()).checks.projections).to.include({ ok: true, detail: 'run by no instance, behind by more than 30 s: reports 42.5 s' });
        projectorRows = [];
        expect((await api.check()).checks.projections).to.include({ ok: true, detail: 'run by no instance, behind by more than 30 s: reports 42.5 s' });
      } finally {
        projectorRows = [];
      }
    });

    it('each projection is answered for by where its lease is: run here, by another live instance, or free (its lag then this instance\'s)', async function () {
      const leases = [
        { lease: LEASE.leads, held: true, holder: 'me:1:aaaaaa' },
        { lease: LEASE.deliveries, held: false, holder: 'other:2:bbbbbb' },
        { lease: LEASE.feedback, held: false, holder: null },
        { lease: LEASE.reports, held: false, holder: 'other:2:bbbbbb' },
      ];
      const probe = (statuses: ProjectionStatus[]) =>
        new ReadinessProbe({
          keyStore,
          events: store,
          readModels,
          projections: async () => statuses,
          projectionsHere: (projection) => projection === 'leads',
          roles: { running: ['projector', 'delivery'], leases: () => leases },
          maxLagSeconds: 30,
          shuttingDown: () => false,
        });
      const within = await probe([status('leads', 0), status('deliveries', 0), status('feedback', 0), status('reports', 0)]).check();
      expect(within.checks.projections).to.include({ ok: true, detail: 'running: leads; run by no instance: feedback; run by another instance: deliveries, reports; within 30 s' });
      expect(within.checks.roles.detail).to.equal('projector (holds leads; other:2:bbbbbb holds deliveries, reports; free: feedback), delivery');
      // Reports behind: another live instance runs it, so this one stays ready.
      const theirs = await probe([status('leads', 0), status('deliveries', 0), status('feedback', 0), status('reports', 42.5)]).check();
      expect(theirs.checks.projections).to.include({ ok: true, detail: 'behind by more than 30 s: reports 42.5 s (run by another instance)' });
      // Leads (run here) or feedback (free: no instance runs it) behind: this one's to answer for.
      const mine = await probe([status('leads', 31), status('deliveries', 0), status('feedback', 0), status('reports', 42.5)]).check();
      expect(mine.checks.projections).to.include({ ok: false, detail: 'behind by more than 30 s: leads 31 s (running), reports 42.5 s (run by another instance)' });
      const free = await probe([status('leads', 0), status('deliveries', 0), status('feedback', 40), status('reports', 0)]).check();
      expect(free.checks.projections).to.include({ ok: false, detail: 'behind by more than 30 s: feedback 40 s (run by no instance)' });
    });

    it('a lease left free by a stopped holder, as the store lease API and a lease keeper that saw it tell it: not ready, run by no instance', async function () {
      const dir = tempDir('readyz-free-lease');
      const readModelStore = EmbeddedReadModelStore.open(dir.path);
      try {
        // A holder that stopped cleanly: it took the lease and gave it up.
        await readModelStore.acquireLease(LEASE.reports, 'stopped:1:aaaaaa', 60_000);
        await readModelStore.releaseLease(LEASE.reports, 'stopped:1:aaaaaa');
        // This instance's keeper has seen the lease free, but could not take it (a store that
        // refuses its writes, as in test/roles/read-model-lock.test.ts): it only reads here.
        const seen: Lease[] = [];
        const keeper = new LeaseKeeper({
          leases: {
            acquireLease: async () => {
              const lease = await readModelStore.lease(LEASE.reports);
              seen.push(lease!);
              return lease!;
            },
            releaseLease: async () => {},
          },
          name: LEASE.reports,
          holder: 'here:2:bbbbbb',
          work: { start: async () => {}, stop: async () => {} },
        });
        await keeper.start();
        await keeper.stop();
        expect(seen[0]).to.include({ holder: 'stopped:1:aaaaaa' });
        expect(keeper.status()).to.deep.equal({ lease: LEASE.reports, held: false, holder: null });
        const probe = new ReadinessProbe({
          keyStore,
          events: store,
          readModels: readModelStore,
          projections: async () => [status('reports', 42.5)],
          projectionsHere: () => false,
          roles: { running: ['projector'], leases: () => [keeper.status()] },
          maxLagSeconds: 30,
          shuttingDown: () => false,
        });
        const result = await probe.check();
        expect(result.ready).to.equal(false);
        expect(result.checks.roles.detail).to.equal('projector (standby; free: reports)');
        expect(result.checks.projections.detail).to.equal('run by no instance, behind by more than 30 s: reports 42.5 s');
        // The store answers a write (the probe of a process that keeps leases), and the write landed:
        // a full or read-only disk fails it, as it fails the leases the process keeps.
        expect(result.checks.read_models).to.deep.equal({ ok: true, detail: 'reachable' });
        const probed = await readModelStore.lease(PROBE_LEASE);
        expect(probed?.expiresAt, 'the probe wrote its row').to.be.greaterThan(Date.now() - 5_000);
      } finally {
        await readModelStore.close();
        dir.remove();
      }
    });

    it('a process that keeps leases needs the read-model store to take a write; an api process only to answer a read', async function () {
      const asked: string[] = [];
      const refusing = {
        leasesNamed: async () => [],
        checkpoint: async () => (asked.push('read'), null),
        acquireLease: async (): Promise<Lease> => {
          asked.push('write');
          throw new Error('SQLITE_BUSY: database is locked');
        },
      };
      const leases = new ReadinessProbe({ keyStore, events: store, readModels: refusing, projections: async () => [status('leads', 0)], roles: projectorRole({ held: true, holder: 'me:1:a' }), maxLagSeconds: 30, shuttingDown: () => false });
      const result = await leases.check();
      expect(result.checks.read_models).to.deep.equal({ ok: false, detail: 'unreachable' });
      expect(asked).to.deep.equal(['write']);
      asked.length = 0;
      const api = new ReadinessProbe({ keyStore, events: store, readModels: refusing, projections: async () => [status('leads', 0)], roles: { running: ['api'], leases: () => [] }, maxLagSeconds: 30, shuttingDown: () => false });
      expect((await api.check()).checks.read_models).to.deep.equal({ ok: true, detail: 'reachable' });
      expect(asked).to.deep.equal(['read']);
    });

    it('asks the key store to take a write where the process serves the API (new data keys, erasures), else only to answer a reader; one that cannot is not ready, named key_store', async function () {
      const asked: boolean[] = [];
      const locked = { probe: async (write: boolean) => (asked.push(write), write ? Promise.reject(new Error('SQLITE_BUSY: database is locked')) : undefined) };
      const probe = (running: string[]) =>
        new ReadinessProbe({ keyStore: locked, events: store, readModels, projections: async () => [status('leads', 0)], roles: { running, leases: () => [] }, maxLagSeconds: 30, shuttingDown: () => false });
      const api = await probe(['api']).check();
      expect(api.ready).to.equal(false);
      expect(api.checks.key_store).to.deep.equal({ ok: false, detail: 'unreachable' });
      expect(asked).to.deep.equal([true]);
      const everything = await probe(['api', 'projector', 'delivery']).check();
      expect(everything.checks.key_store.ok).to.equal(false);
      asked.length = 0;
      const background = await probe(['projector', 'delivery']).check();
      expect(background.ready).to.equal(true);
      expect(background.checks.key_store).to.deep.equal({ ok: true, detail: 'reachable' });
      expect(asked).to.deep.equal([false]);
      // A key store that hangs is time-boxed like the others.
      const hanging = new ReadinessProbe({ keyStore: { probe: () => new Promise(() => {}) }, events: store, readModels, projections: async () => [status('leads', 0)], maxLagSeconds: 30, shuttingDown: () => false, timeoutMs: 50 });
      expect((await hanging.check()).checks.key_store).to.deep.equal({ ok: false, detail: 'no answer within 50 ms' });
    });

    it('says what a store that answers with an error has, from its code: a read-only or full disk is not "unreachable"', async function () {
      const failing = (code: string) => {
        const cause = new Database.SqliteError('attempt to write a readonly database', code);
        return { checkpoint: async () => null, leasesNamed: async () => [], acquireLease: () => Promise.reject(new ReadModelUnavailableError(`the read-model store failed: ${cause.message}`, { cause })) };
      };
      const detail = async (code: string) =>
        (await new ReadinessProbe({ keyStore, events: store, readModels: failing(code), projections: async () => [status('leads', 0)], roles: projectorRole({ held: true, holder: 'me:1:a' }), maxLagSeconds: 30, shuttingDown: () => false }).check())
          .checks.read_models.detail;
      expect(await detail('SQLITE_READONLY')).to.equal('read-only: check the permissions of its file and directory and that its filesystem is mounted read-write (SQLITE_READONLY)');
      expect(await detail('SQLITE_FULL')).to.equal('disk full (SQLITE_FULL)');
      expect(await detail('SQLITE_IOERR_WRITE')).to.equal('disk I/O error (SQLITE_IOERR_WRITE)');
      expect(await detail('SQLITE_MISUSE')).to.equal('failing (SQLITE_MISUSE)');
    });

    it('concurrent probes share one round of checks', async function () {
      let reads = 0;
      const probe = new ReadinessProbe({
        keyStore,
        events: { headPosition: async () => (reads++, { commit: 1, prepare: 1 }) },
        readModels,
        projections: async () => [status('leads', 0)],
        maxLagSeconds: 30,
        shuttingDown: () => false,
      });
      await Promise.all([probe.check(), probe.check(), probe.check()]);
      expect(reads).to.equal(1);
    });
  });
});

/** The port's methods bound to the store, so a test can replace one and keep the rest. */
function bind(store: EventStore): EventStore {
  return {
    append: store.append.bind(store),
    readStream: store.readStream.bind(store),
    readAll: store.readAll.bind(store),
    subscribeToAll: store.subscribeToAll.bind(store),
    headPosition: store.headPosition.bind(store),
    close: store.close.bind(store),
  };
}

/** The subscription, until `stalled` says so: from then on it hands over nothing more, until unsubscribed. */
function stallable(subscription: ReturnType<EventStore['subscribeToAll']>, stalled: () => boolean): ReturnType<EventStore['subscribeToAll']> {
  let stop: () => void = () => {};
  const stopped = new Promise<void>((resolve) => (stop = resolve));
  return {
    async *[Symbol.asyncIterator]() {
      for await (const event of subscription) {
        if (stalled()) {
          await stopped;
          return;
        }
        yield event;
      }
    },
    unsubscribe: async () => {
      stop();
      await subscription.unsubscribe();
    },
  };
}

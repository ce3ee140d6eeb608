import { expect } from 'chai';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { ALWAYS_OPEN_ROUTING, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, writeRouting } from '../reliability/support/server-process.js';

// Another process holds the write lock of readmodels.db for seconds (an operator's sqlite3 shell,
// a backup, a stuck process): `leadpost serve`, as its own process, in every role combination,
// must keep answering /healthz at once (the container's health check restarts it otherwise), and
// /readyz within its checks' time-box, 503 naming the read-model store where this process writes
// to it. Once the lock is gone, the process is ready again and holds its leases. An all-roles
// process that cannot take back the projector lease counts the projections' lag as its own.

/** How long the test holds the lock: longer than a lease's time (3 s), and than any check's (2 s). */
const LOCK_MS = 7_000;
const HEALTHZ_LIMIT_MS = 1_000;
/** A check's time-box is 2 s; the answer comes just after it (a loaded machine: some hundreds of ms more). */
const READYZ_LIMIT_MS = 3_000;

interface Timed {
  readonly ms: number;
  readonly status: number | 'no answer';
  readonly body: Record<string, unknown>;
}

describe('leadpost serve while another process holds the read-model store locked', function () {
  this.timeout(120_000);
  let dir: ReturnType<typeof tempDir>;
  let routingFile: string;
  let key: string;
  const client = new Client(8);
  const servers: ServerProcess[] = [];

  before(async function () {
    dir = tempDir('rm-lock');
    routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
    const events = await EmbeddedEventStore.open(dir.path);
    const { id, secret } = newKeyMaterial();
    await changeKeys(events, (state) => issueKey(state, { role: 'supplier', name: 'sup-1', now: Date.now(), id, secret }));
    await events.close();
    key = formatKey(id, secret);
  });
  afterEach(async function () {
    for (const server of servers.splice(0)) await server.kill();
  });
  after(function () {
    client.destroy();
    dir.remove();
  });

  /** A GET with its own deadline, so a process that does not answer is measured, not waited for. */
  const timed = async (server: ServerProcess, path: string, limitMs: number): Promise<Timed> => {
    const started = performance.now();
    const reply = await Promise.race([
      client.request(server.httpsPort, 'GET', path),
      new Promise<null>((resolve) => setTimeout(() => resolve(null), limitMs + 5_000).unref()),
    ]);
    return { ms: performance.now() - started, status: reply ? reply.status : 'no answer', body: reply ? reply.body : {} };
  };

  /** Locks readmodels.db as a second process would, for `ms`; /healthz and /readyz are asked meanwhile. */
  const underLock = async (server: ServerProcess, ms: number, during?: () => Promise<void>) => {
    const db = new Database(join(dir.path, 'readmodels.db'));
    const health: Timed[] = [];
    const ready: Timed[] = [];
    db.exec('BEGIN EXCLUSIVE');
    const started = Date.now();
    try {
      await during?.();
      // /healthz every 200 ms in one loop, /readyz back to back in another, for the whole lock.
      await Promise.all([
        (async () => {
          while (Date.now() - started < ms) {
            health.push(await timed(server, '/healthz', HEALTHZ_LIMIT_MS));
            await new Promise((resolve) => setTimeout(resolve, 200));
          }
        })(),
        (async () => {
          // Past the first lease's time: by then every renewal has met the lock.
          await new Promise((resolve) => setTimeout(resolve, 3_500));
          while (Date.now() - started < ms) ready.push(await timed(server, '/readyz', READYZ_LIMIT_MS));
        })(),
      ]);
    } finally {
      db.exec('ROLLBACK');
      db.close();
    }
    return { health, ready };
  };

  const start = async (roles: string, env: Record<string, string> = {}) => {
    const server = await ServerProcess.start({ dataDir: dir.path, routingFile, env: { LEADPOST_ROLES: roles, ...env } });
    servers.push(server);
    return server;
  };

  /** The slowest of the answers, and each one's time, for a failure's message. */
  const slowest = (answers: Timed[]) => Math.max(...answers.map((a) => a.ms));
  const summary = (answers: Timed[]) =>
    `${answers.length} answers, the slowest: ${[...answers]
      .sort((a, b) => b.ms - a.ms)
      .slice(0, 5)
      .map((a) => `${Math.round(a.ms)} ms ${a.status}${typeof a.body.message === 'string' ? ` (${a.body.message})` : ''}`)
      .join(', ')}`;

  const combinations: Array<{ roles: string; env?: Record<string, string>; writes: boolean }> = [
    { roles: 'projector,delivery', writes: true },
    { roles: 'projector', writes: true },
    { roles: 'delivery', writes: true },
    { roles: 'api', writes: false },
    { roles: 'api,projector,delivery', writes: true },
    { roles: 'api,projector,delivery', env: { LEADPOST_BACKGROUND_THREAD: '0' }, writes: true },
  ];
  for (const { roles, env, writes } of combinations) {
    const name = `${roles}${env ? ` (${Object.entries(env).map(([k, v]) => `${k}=${v}`).join(' ')})` : ''}`;
    it(`${name}: /healthz answers within ${HEALTHZ_LIMIT_MS} ms throughout, /readyz within its time-box${writes ? ', 503 naming read_models' : ''}; ready again after`, async function () {
      const server = await start(roles, env);
      const { health, ready } = await underLock(server, LOCK_MS);
      expect(health.length, summary(health)).to.be.greaterThan(5);
      expect(health.every((a) => a.status === 200), summary(health)).to.equal(true);
      expect(slowest(health), summary(health)).to.be.lessThan(HEALTHZ_LIMIT_MS);
      expect(ready.length, summary(ready)).to.be.greaterThan(0);
      expect(slowest(ready), summary(ready)).to.be.lessThan(READYZ_LIMIT_MS);
      if (writes) {
        for (const answer of ready) {
          expect(answer.status, summary(ready)).to.equal(503);
          expect(answer.body.message).to.match(/read_models \(/);
        }
      } else {
        // An api process only reads the read models, which a writer's lock does not stop.
        expect(ready.every((a) => a.status === 200), summary(ready)).to.equal(true);
      }
      // The lock gone: ready again, with the leases it keeps held again.
      const back = Date.now();
      for (;;) {
        const answer = await timed(server, '/readyz', READYZ_LIMIT_MS);
        const leases = ((answer.body.checks as { roles?: { leases?: Array<{ held: boolean }> } } | undefined)?.roles?.leases ?? []) as Array<{ held: boolean }>;
        if (answer.status === 200 && leases.every((lease) => lease.held)) break;
        if (Date.now() - back > 15_000) throw new Error(`not ready again within 15 s: ${JSON.stringify(answer.body)}`);
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
      const stopped = await server.stop();
      expect(stopped.code).to.equal(0);
      // Logs are JSON lines, also on stderr.
      expect(stopped.stderr.trim(), stopped.stderr).to.equal('');
    });
  }

  it('an all-roles process that lost the projection leases to the lock counts the lag as its own: 503, run by no instance', async function () {
    const server = await start('api,projector,delivery', { READY_MAX_LAG_SECONDS: '1' });
    const { ready } = await underLock(server, LOCK_MS, async () => {
      // The API appends to the event store, which the lock does not touch: a lead the projections cannot commit.
      const posted = await client.post(server.httpsPort, validLead(), { 'x-api-key': key });
      expect(posted.status).to.equal(201);
    });
    const last = ready.at(-1)!;
    expect(last.status).to.equal(503);
    const checks = last.body.checks as Record<string, { ok: boolean; detail: string }>;
    expect(checks.roles!.detail).to.contain('projector (standby; free: leads, deliveries, feedback, reports)');
    expect(checks.projections).to.include({ ok: false });
    expect(checks.projections!.detail).to.match(/^run by no instance, behind by more than 1 s: /);
    expect(last.body.message).to.contain('projections (run by no instance, behind by more than 1 s');
  });
});

import { expect } from 'chai';
import { Writable } from 'node:stream';
import type { Logger } from 'pino';
import { createLogger } from '../../src/http/logger.js';
import sinon from 'sinon';
import { PROJECTIONS } from '../../src/projections/index.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { type Fence, ReadModelUnavailableError } from '../../src/read-models/port.js';
import { OLDER_PROJECTOR_LEASES, ProjectorLeases, leaseOfProjection, projectionLease } from '../../src/roles/projector-leases.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';

// The projection leases balanced over several projector processes, each a ProjectorLeases on a
// connection of its own to one real embedded read-model store, with a short lease (500 ms, a beat
// every 50 ms) and work that only records what runs where. With N members and 4 projections each
// ends up holding between floor(4/N) and ceil(4/N), stays so, and a member that leaves (cleanly,
// or by dying) hands its share to the others. No projection ever runs in two members at once.

const TTL_MS = 500;
const BEAT_MS = 50;
const P = PROJECTIONS.length;

/** What runs where, shared by the members of a test; a projection started where another runs it is a fault. */
class Running {
  readonly where = new Map<string, string>();
  readonly faults: string[] = [];
  changes = 0;

  work(holder: string) {
    return {
      run: async (name: string, fence: Fence) => {
        const other = this.where.get(name);
        if (other !== undefined && other !== holder) this.faults.push(`${name} started by ${holder} while ${other} runs it`);
        if (fence.lease !== leaseOfProjection(name) || fence.holder !== holder) this.faults.push(`${name} run under ${JSON.stringify(fence)}`);
        this.where.set(name, holder);
        this.changes++;
      },
      pause: async (name: string) => {
        if (this.where.get(name) === holder) this.where.delete(name);
        this.changes++;
      },
    };
  }

  /** How many projections each holder runs, highest first (holders running none are not listed). */
  shares(): number[] {
    const counts = new Map<string, number>();
    for (const holder of this.where.values()) counts.set(holder, (counts.get(holder) ?? 0) + 1);
    return [...counts.values()].sort((a, b) => b - a);
  }

  count(holder: string): number {
    return [...this.where.values()].filter((h) => h === holder).length;
  }
}

describe('projector leases: one lease per projection, balanced over the projector processes', function () {
  this.timeout(30_000);
  const dir = tempDir('projector-leases');
  let running: Running;
  let opened: Array<{ store: EmbeddedReadModelStore; leases: ProjectorLeases; stopped: boolean }>;
  let reader: EmbeddedReadModelStore;
  let n = 0;

  /** A member on a connection of its own; `dead` makes every call of its store fail from then on, as a killed process's do. */
  const member = async (holder: string, logger?: Logger) => {
    const store = EmbeddedReadModelStore.open(dir.path);
    const state = { dead: false };
    const dying = overriding(store, {
      acquireLease: (...args: Parameters<EmbeddedReadModelStore['acquireLease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.acquireLease(...args)),
      releaseLease: (...args: Parameters<EmbeddedReadModelStore['releaseLease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.releaseLease(...args)),
      lease: (...args: Parameters<EmbeddedReadModelStore['lease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.lease(...args)),
      leasesNamed: (...args: Parameters<EmbeddedReadModelStore['leasesNamed']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.leasesNamed(...args)),
    });
    const leases = new ProjectorLeases({ leases: dying, holder, projections: running.work(holder), ttlMs: TTL_MS, heartbeatMs: BEAT_MS, ...(logger ? { logger } : {}) });
    const entry = { store, leases, stopped: false };
    opened.push(entry);
    await leases.start();
    return {
      holder,
      leases,
      kill: () => {
        state.dead = true;
      },
      stop: async () => {
        entry.stopped = true;
        await leases.stop();
      },
    };
  };

  /** Every live member renews its membership each beat: waits for five more beats of each, seen in the store. */
  const fiveBeats = async () => {
    const members = async () => (await reader.leasesNamed('projector-process-')).filter((lease) => lease.expiresAt > Date.now());
    const from = Math.max(...(await members()).map((lease) => lease.expiresAt));
    await until('five more beats of every member', async () => (await members()).every((lease) => lease.expiresAt > from + 5 * BEAT_MS));
  };

  /** Waits until the shares are `expected` with every projection running once, then for several more beats of every member, and checks nothing moved. */
  const settlesAt = async (expected: number[]) => {
    await until(
      () => `shares ${JSON.stringify(expected)}`,
      () => JSON.stringify(running.shares()) === JSON.stringify(expected) && running.where.size === P && running,
      10_000,
    );
    const changes = running.changes;
    await fiveBeats();
    expect(running.changes, `no projection moved once the shares were ${JSON.stringify(expected)}`).to.equal(changes);
    expect(running.shares()).to.deep.equal(expected);
    expect(running.faults).to.deep.equal([]);
  };

  beforeEach(function () {
    running = new Running();
    opened = [];
    n++;
    reader = EmbeddedReadModelStore.open(dir.path);
  });
  afterEach(async function () {
    for (const entry of opened.reverse()) {
      if (!entry.stopped) await entry.leases.stop();
      await entry.store.close();
    }
    // The next test starts from a store with no live lease.
    for (const lease of await reader.leasesNamed('projector')) if (lease.expiresAt > 0) await reader.releaseLease(lease.name, lease.holder);
    await reader.close();
  });
  after(() => dir.remove());

  it('1, 2, 3 and 5 members: 4, then 2 + 2, then 2 + 1 + 1, then 1 + 1 + 1 + 1 + 0, each staying so', async function () {
    const a = await member(`a:${n}:000001`);
    // Alone, it takes every lease at its first beat.
    expect(running.count(a.holder)).to.equal(P);
    expect(a.leases.statuses().map((s) => [s.lease, s.held])).to.deep.equal(PROJECTIONS.map((p) => [projectionLease(p), true]));
    await settlesAt([4]);
    await member(`b:${n}:000002`);
    await settlesAt([2, 2]);
    await member(`c:${n}:000003`);
    await settlesAt([2, 1, 1]);
    await member(`d:${n}:000004`);
    await settlesAt([1, 1, 1, 1]);
    const e = await member(`e:${n}:000005`);
    await settlesAt([1, 1, 1, 1]);
    expect(running.count(e.holder)).to.equal(0);
    // Each says who holds what it does not.
    const statuses = e.leases.statuses();
    expect(statuses.every((s) => !s.held && s.holder !== null && s.holder === running.where.get(s.lease.replace(/^projector-(.+)-v\d+$/, '$1')))).to.equal(true);
  });

  it('5 members started one after another settle at 1 + 1 + 1 + 1 + 0', async function () {
    for (let i = 1; i <= 5; i++) await member(`m:${n}:00000${i}`);
    await settlesAt([1, 1, 1, 1]);
  });

  it('a member that stops hands its leases over at once: 2 + 2 → 4', async function () {
    await member(`a:${n}:000001`);
    const b = await member(`b:${n}:000002`);
    await settlesAt([2, 2]);
    const stopped = Date.now();
    await b.stop();
    // Given up, not left to run out.
    await until('the other member runs all four', () => running.count(`a:${n}:000001`) === P);
    expect(Date.now() - stopped).to.be.below(TTL_MS + 10 * BEAT_MS);
    await settlesAt([4]);
  });

  it('a member that dies (stops renewing, releases nothing) hands its leases over once they run out: 2 + 1 + 1 → 2 + 2', async function () {
    await member(`a:${n}:000001`);
    await member(`b:${n}:000002`);
    const c = await member(`c:${n}:000003`);
    await settlesAt([2, 1, 1]);
    const hers = PROJECTIONS.map((p) => p.name).filter((name) => running.where.get(name) === c.holder);
    c.kill();
    // Its leases stay its own in the store until they run out; then the others take them.
    await until('the others run what the dead member ran', () => hers.every((name) => ![c.holder, undefined].includes(running.where.get(name))));
    await settlesAt([2, 2]);
  });

  it("an older release's single projector lease, held by another: no member takes a projection lease until it runs out", async function () {
    const older = await reader.acquireLease('projector', `old:${n}:aaaaaa`, 1500);
    const a = await member(`a:${n}:000001`);
    const b = await member(`b:${n}:000002`);
    expect(running.where.size).to.equal(0);
    // They say who runs the projections meanwhile.
    for (const status of [...a.leases.statuses(), ...b.leases.statuses()]) expect(status).to.include({ held: false, holder: `old:${n}:aaaaaa` });
    // Beats go on, none taking a lease, while the old one is held.
    await fiveBeats();
    expect(Date.now(), 'the old lease still held').to.be.below(older.expiresAt);
    expect(running.changes).to.equal(0);
    for (const projection of PROJECTIONS) expect((await reader.lease(projectionLease(projection)))?.expiresAt ?? 0).to.be.below(Date.now());
    // Run out: they share them.
    await settlesAt([2, 2]);
    expect(running.changes).to.be.at.least(P);
  });

  it("an older release that takes its lease of one projection while members run: that projection is given up to it, the others run on; taken back once it stops", async function () {
    await member(`a:${n}:000001`);
    await member(`b:${n}:000002`);
    await settlesAt([2, 2]);
    const [first] = PROJECTIONS;
    await reader.acquireLease(`projector-${first!.name}`, `old:${n}:aaaaaa`, 60_000);
    await until(`${first!.name} runs nowhere here`, () => !running.where.has(first!.name));
    // The others stay where they ran, and its own lease stays free for as long as the older holds its.
    await fiveBeats();
    expect(running.where.size).to.equal(P - 1);
    expect((await reader.lease(projectionLease(first!)))?.expiresAt ?? 0).to.be.below(Date.now());
    await reader.releaseLease(`projector-${first!.name}`, `old:${n}:aaaaaa`);
    await settlesAt([2, 2]);
  });

  it('an older release started beside this one is logged once, as a warning naming its process, whatever the beats', async function () {
    const lines: Array<Record<string, unknown>> = [];
    const logger = createLogger({ level: 'info', destination: new Writable({ write: (chunk: Buffer, _encoding, done) => (lines.push(JSON.parse(chunk.toString('utf8')) as Record<string, unknown>), done()) }) });
    await member(`a:${n}:000001`, logger);
    await settlesAt([4]);
    await reader.acquireLease('projector', `old:${n}:aaaaaa`, 60_000);
    await until('the warning', () => lines.some((line) => line.holder === `old:${n}:aaaaaa`));
    await fiveBeats();
    const warnings = lines.filter((line) => line.holder === `old:${n}:aaaaaa`);
    expect(warnings).to.have.length(1);
    expect(warnings[0]).to.include({ level: 40 });
    expect(String(warnings[0]!.msg)).to.match(/^a process of an older release of leadpost runs beside this one on these stores/);
    await reader.releaseLease('projector', `old:${n}:aaaaaa`);
  });

  it("an older lease held by a step of this release, beside this release's own leases, is not an older release", async function () {
    // A step that needs every instance stopped takes every lease, this release's first.
    for (const name of [...PROJECTIONS.map(projectionLease), ...OLDER_PROJECTOR_LEASES]) await reader.acquireLease(name, `step:${n}:cccccc`, 1500);
    const a = await member(`a:${n}:000001`);
    for (const status of a.leases.statuses()) expect(status).to.include({ held: false, holder: `step:${n}:cccccc` });
    // Once they run out, the member takes them all.
    await settlesAt([4]);
    for (const status of a.leases.statuses()) expect(status.lease).to.match(/^projector-[a-z]+-v\d+$/);
  });

  it('a member starting removes the rows of members gone over a minute ago, and keeps the others', async function () {
    const at = (ms: number) => sinon.useFakeTimers({ now: Date.now() - ms, toFake: ['Date'] });
    let clock = at(120_000);
    await reader.acquireLease(`projector-process-gone:${n}:aaaaaa`, `gone:${n}:aaaaaa`, TTL_MS);
    clock.restore();
    clock = at(30_000);
    await reader.acquireLease(`projector-process-recent:${n}:bbbbbb`, `recent:${n}:bbbbbb`, TTL_MS);
    clock.restore();
    const a = await member(`a:${n}:000001`);
    const names = (await reader.leasesNamed('projector-process-')).map((lease) => lease.name);
    expect(names).to.not.include(`projector-process-gone:${n}:aaaaaa`);
    expect(names).to.include(`projector-process-recent:${n}:bbbbbb`);
    expect(names).to.include(`projector-process-${a.holder}`);
    // Gone members count for nothing: alone among the live, it holds every lease.
    expect(running.count(a.holder)).to.equal(P);
  });
});

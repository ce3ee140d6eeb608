import { expect } from 'chai';
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
  const member = async (holder: string) => {
    const store = EmbeddedReadModelStore.open(dir.path);
    const state = { dead: false };
    const dying = overriding(store, {
      acquireLease: (...args: Parameters<EmbeddedReadModelStore['acquireLease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.acquireLease(...args)),
      releaseLease: (...args: Parameters<EmbeddedReadModelStore['releaseLease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.releaseLease(...args)),
      lease: (...args: Parameters<EmbeddedReadModelStore['lease']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.lease(...args)),
      leasesNamed: (...args: Parameters<EmbeddedReadModelStore['leasesNamed']>) => (state.dead ? Promise.reject(new ReadModelUnavailableError('killed')) : store.leasesNamed(...args)),
    });
    const leases = new ProjectorLeases({ leases: dying, holder, projections: running.work(holder), ttlMs: TTL_MS, heartbeatMs: BEAT_MS });
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

  it("older releases' leases (one without a version per projection, the single one) and members: this release's members run their own builds beside them and count none of them", async function () {
    // An older release's processes, as they hold their leases during a rolling upgrade.
    const older = `old:${n}:aaaaaa`;
    for (const name of OLDER_PROJECTOR_LEASES) await reader.acquireLease(name, older, 60_000);
    await reader.acquireLease(`projector-member-${older}`, older, 60_000);
    const a = await member(`a:${n}:000001`);
    await member(`b:${n}:000002`);
    // Two members here, the older member not among them: 2 + 2 of this release's leases.
    await settlesAt([2, 2]);
    expect(running.count(older)).to.equal(0);
    for (const projection of PROJECTIONS) expect((await reader.lease(projectionLease(projection)))?.holder).to.be.oneOf([a.holder, `b:${n}:000002`]);
    // The older leases are left to their holder.
    for (const name of OLDER_PROJECTOR_LEASES) expect((await reader.lease(name))?.holder, name).to.equal(older);
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

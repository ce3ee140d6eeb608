import { expect } from 'chai';
import sinon from 'sinon';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { type Fence, type Lease, ReadModelUnavailableError } from '../../src/read-models/port.js';
import { LeaseKeeper } from '../../src/roles/lease-keeper.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';

// The keeper of one lease, on the real embedded store with a short lease (500 ms, a beat every
// 50 ms): the work runs only while the lease is held, stops at once when a renewal fails or finds
// another holder, stops when no renewal comes back in time, and passes to a standby when it stops.
// What is asserted is the order of things (no wall-clock bounds), so a loaded machine cannot fail it.

const TTL_MS = 500;
const BEAT_MS = 50;

/** Work that records when it runs, under which fence, in one order shared by every Work of a test. */
class Work {
  readonly log: string[] = [];
  running: Fence | null = null;
  lost: (() => void) | null = null;

  constructor(
    private readonly name = 'work',
    private readonly order: string[] = [],
  ) {}

  async start(fence: Fence, lost: () => void): Promise<void> {
    this.running = fence;
    this.lost = lost;
    this.log.push(`start ${fence.token}`);
    this.order.push(`${this.name} start`);
  }

  async stop(): Promise<void> {
    this.log.push(`stop ${this.running?.token}`);
    this.order.push(`${this.name} stop`);
    this.running = null;
  }
}

async function until(what: string, probe: () => boolean, withinMs = 3000): Promise<number> {
  const started = Date.now();
  while (!probe()) {
    if (Date.now() - started > withinMs) throw new Error(`${what}: not within ${withinMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return Date.now() - started;
}

describe('lease keeper', function () {
  const dir = tempDir('lease-keeper');
  let first: EmbeddedReadModelStore;
  let second: EmbeddedReadModelStore;
  let lease: string;
  let n = 0;
  const keepers: LeaseKeeper[] = [];
  const keeper = (store: Pick<EmbeddedReadModelStore, 'acquireLease' | 'releaseLease'>, holder: string, work: Work) => {
    const made = new LeaseKeeper({ leases: store, name: lease, holder, work, ttlMs: TTL_MS, heartbeatMs: BEAT_MS });
    keepers.push(made);
    return made;
  };

  beforeEach(function () {
    // Two connections, as two processes have.
    first = EmbeddedReadModelStore.open(dir.path);
    second = EmbeddedReadModelStore.open(dir.path);
    lease = `work-${++n}`;
  });
  afterEach(async function () {
    for (const k of keepers.splice(0)) await k.stop();
    await first.close();
    await second.close();
  });
  after(() => dir.remove());

  it('one of two runs the work; when it stops it gives the lease up and the standby starts at the next beat', async function () {
    const [a, b] = [new Work(), new Work()];
    const keeperA = keeper(first, 'host:1:a', a);
    await keeperA.start();
    const keeperB = keeper(second, 'host:2:b', b);
    await keeperB.start();
    expect(a.running).to.include({ lease, holder: 'host:1:a' });
    expect(b.running).to.equal(null);
    expect(keeperA.status()).to.deep.equal({ lease, held: true, holder: 'host:1:a' });
    expect(keeperB.status()).to.deep.equal({ lease, held: false, holder: 'host:1:a' });
    // Renewed past its first time to live, still the same holder and token.
    const firstExpiry = (await first.lease(lease))!.expiresAt;
    for (let renewed = false; !renewed; ) {
      renewed = (await first.lease(lease))!.expiresAt > firstExpiry + TTL_MS;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(await first.lease(lease)).to.include({ holder: 'host:1:a', token: a.running!.token });
    expect(a.log).to.deep.equal([`start ${a.running!.token}`]);
    expect(b.log).to.deep.equal([]);
    await keeperA.stop();
    expect(a.running).to.equal(null);
    // Given up, not left to run out: the standby need not wait for its time.
    expect((await second.lease(lease))!.expiresAt).to.equal(0);
    await until('the standby runs the work', () => b.running !== null);
    expect(b.running!.token).to.be.above(Number(a.log[0]!.split(' ')[1]));
    expect(keeperB.status()).to.deep.equal({ lease, held: true, holder: 'host:2:b' });
  });

  it('a renewal that fails stops the work at once; it starts again once a renewal succeeds', async function () {
    const work = new Work();
    let failing = false;
    /** At each failed renewal: was the work running when it was asked? */
    const runningWhenAsked: boolean[] = [];
    const flaky = overriding(first, {
      acquireLease: async (name: string, holder: string, ttlMs: number): Promise<Lease> => {
        if (failing) {
          runningWhenAsked.push(work.running !== null);
          throw new ReadModelUnavailableError('injected: the read-model store is unreachable');
        }
        return first.acquireLease(name, holder, ttlMs);
      },
    });
    await keeper(flaky, 'host:1:a', work).start();
    expect(work.running).to.not.equal(null);
    failing = true;
    await until('two failed renewals', () => runningWhenAsked.length >= 2);
    // Stopped by the first failure, not left running until the lease would run out.
    expect(runningWhenAsked.slice(0, 2)).to.deep.equal([true, false]);
    failing = false;
    await until('the work runs again', () => work.running !== null);
  });

  it('a renewal that never comes back stops the work when the lease runs out, and a standby takes it then', async function () {
    const order: string[] = [];
    const [a, b] = [new Work('a', order), new Work('b', order)];
    let hang = false;
    const cutOff = overriding(first, {
      acquireLease: (name: string, holder: string, ttlMs: number): Promise<Lease> => (hang ? new Promise<Lease>(() => {}) : first.acquireLease(name, holder, ttlMs)),
    });
    await keeper(cutOff, 'host:1:a', a).start();
    await keeper(second, 'host:2:b', b).start();
    hang = true;
    // Its renewal never answers, yet it stops (the standby is kept off meanwhile only by the lease's
    // time, and its writes by the fence: a loaded machine may run its timers late).
    await until('the cut-off holder stops', () => a.running === null);
    await until('the standby runs the work', () => b.running !== null);
    expect(order.filter((step) => step.startsWith('a '))).to.deep.equal(['a start', 'a stop']);
    expect(b.running!.token).to.equal(Number(a.log[0]!.split(' ')[1]) + 1);
  });

  it('a renewal that finds another holder stops the work at once, and so does a write that finds the lease gone', async function () {
    const work = new Work();
    let stolen = false;
    /** At each renewal that found the thief: was the work running when it was asked? */
    const runningWhenAsked: boolean[] = [];
    const store = overriding(first, {
      acquireLease: async (name: string, holder: string, ttlMs: number): Promise<Lease> => {
        if (!stolen) return first.acquireLease(name, holder, ttlMs);
        runningWhenAsked.push(work.running !== null);
        return { name, holder: 'thief:9:z', token: 99, expiresAt: Date.now() + ttlMs };
      },
    });
    await keeper(store, 'host:1:a', work).start();
    stolen = true;
    await until('two renewals that found the thief', () => runningWhenAsked.length >= 2);
    expect(runningWhenAsked.slice(0, 2)).to.deep.equal([true, false]);
    stolen = false;
    await until('the work runs again', () => work.running !== null);
    // The work's own write found the lease gone (a fenced commit refused): it stops, though every renewal succeeds.
    work.lost!();
    await until('the work stops', () => work.running === null);
  });

  it('not wanted, a free lease is not asked for (its holder is still read); once wanted, it is taken at the next beat', async function () {
    const [a, b] = [new Work(), new Work()];
    let wanted = false;
    const asked: string[] = [];
    let reads = 0;
    const counting = overriding(first, {
      acquireLease: (name: string, holder: string, ttlMs: number): Promise<Lease> => {
        asked.push(holder);
        return first.acquireLease(name, holder, ttlMs);
      },
      lease: (name: string): Promise<Lease | null> => {
        reads++;
        return first.lease(name);
      },
    });
    const gated = new LeaseKeeper({ leases: counting, name: lease, holder: 'host:1:a', work: a, ttlMs: TTL_MS, heartbeatMs: BEAT_MS, wanted: () => wanted });
    keepers.push(gated);
    await gated.start();
    // Held by another meanwhile: the status says by whom, though this keeper never asked.
    const other = keeper(second, 'host:2:b', b);
    await other.start();
    await until('the status names the other holder', () => gated.status().holder === 'host:2:b');
    await other.stop();
    await until('the status says the lease is free', () => gated.status().holder === null);
    // Beats go on, each reading the lease instead of asking for it.
    const readsWhenFree = reads;
    await until('three more beats', () => reads >= readsWhenFree + 3);
    expect(asked).to.deep.equal([]);
    expect(a.running).to.equal(null);
    wanted = true;
    await until('the work runs once wanted', () => a.running !== null);
    expect(gated.status()).to.deep.equal({ lease, held: true, holder: 'host:1:a' });
    // Held, it is renewed whatever `wanted` says.
    wanted = false;
    const renewals = asked.length;
    await until('renewed while held', () => asked.length > renewals + 2);
    expect(a.running).to.not.equal(null);
  });

  it('giving up stops the work and releases the lease at once; the keeper stays a standby, and takes it again when wanted and free', async function () {
    const order: string[] = [];
    const [a, b] = [new Work('a', order), new Work('b', order)];
    let wanted = true;
    const giving = new LeaseKeeper({ leases: first, name: lease, holder: 'host:1:a', work: a, ttlMs: TTL_MS, heartbeatMs: BEAT_MS, wanted: () => wanted });
    keepers.push(giving);
    await giving.start();
    const standby = keeper(second, 'host:2:b', b);
    await standby.start();
    expect(a.running).to.not.equal(null);
    wanted = false;
    await giving.giveUp();
    expect(a.running).to.equal(null);
    expect(giving.status().held).to.equal(false);
    // Released, not left to run out: the other takes it at its next beat, well within the lease's time.
    expect((await second.lease(lease))!.expiresAt).to.equal(0);
    await until('the standby runs the work', () => b.running !== null, TTL_MS);
    expect(order).to.deep.equal(['a start', 'a stop', 'b start']);
    await until('the status names the new holder', () => giving.status().holder === 'host:2:b');
    // Still beating: wanted again and the lease free again, it takes it back.
    wanted = true;
    await standby.stop();
    await until('the first runs the work again', () => a.running !== null);
    expect(order).to.deep.equal(['a start', 'a stop', 'b start', 'b stop', 'a start']);
  });
});

describe('lease keeper: a store slow to answer (stubbed clock)', function () {
  // The default lease (3 s, a beat a second) on a clock the test moves, and a store whose every
  // answer takes 1.2 s: counted from each answer, the beats came 2.2 s apart and the work stopped
  // at every other beat; counted from each asking, it runs on.
  it('keeps the work running while each renewal answers within the lease less a beat', async function () {
    const timers = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const token = 7;
      const slow = {
        acquireLease: (name: string, holder: string, ttlMs: number) =>
          new Promise<Lease>((resolve) => setTimeout(() => resolve({ name, holder, token, expiresAt: Date.now() + ttlMs }), 1200)),
        releaseLease: async () => {},
      };
      const work = new Work();
      const keeper = new LeaseKeeper({ leases: slow, name: 'slow', holder: 'me', work });
      const started = keeper.start();
      await timers.tickAsync(1200);
      await started;
      expect(work.log).to.deep.equal(['start 7']);
      await timers.tickAsync(30_000);
      expect(work.log).to.deep.equal(['start 7']);
      // A renewal that answers past the lease's time still stops it.
      slow.acquireLease = () => new Promise<Lease>(() => {});
      await timers.tickAsync(4000);
      expect(work.log).to.deep.equal(['start 7', 'stop 7']);
      const stopping = keeper.stop();
      await timers.tickAsync(5000);
      await stopping;
    } finally {
      timers.restore();
    }
  });
});

import { expect } from 'chai';
import { decide, initialLeadState } from '../../src/commands/post-lead/decider.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { type Position, comparePositions } from '../../src/event-store/index.js';
import { leadStream } from '../../src/events/lead-events.js';
import { PROJECTIONS, Projections, dropBuildsOlderThan, switchBuild, versionBuild } from '../../src/projections/index.js';
import { rebuildProjections } from '../../src/projections/rebuild.js';
import { checkpointName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { type ReadModelStore, ReadModelUnavailableError } from '../../src/read-models/port.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { leadCommand } from './lead-commands.js';

// The projections of one instance, as the service runs them, each under its own lease.

describe('projections: waiting for a position', function () {
  it('a wait outlives the projection leases going to another instance: it ends once that instance has committed the position', async function () {
    const dir = tempDir('projections-wait');
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const lease = 'projector-wait';
    const here = new Projections(events, readModels);
    const there = new Projections(events, readModels);
    try {
      for (let i = 0; i < 10; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
      const head = await events.headPosition();
      await here.start();
      await there.start();
      // Taken for a millisecond: every commit this instance makes is refused, and its runners stop,
      // as when another process took the lease; the lease keeper then pauses the projections.
      const mine = await readModels.acquireLease(lease, 'here', 1);
      await until('the 1 ms lease run out', () => Date.now() > mine.expiresAt, 1000, 1);
      let lost = 0;
      for (const { name } of PROJECTIONS) {
        await here.run(name, { lease, holder: 'here', token: mine.token }, () => {
          lost++;
          void here.pause(name);
        });
      }
      const waiting = here.waitFor(head);
      const early = await Promise.race([waiting.then(() => 'ended'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
      expect(early).to.equal('waiting');
      expect(lost).to.be.at.least(1);
      // The instance that took over runs them to the head.
      const theirs = await readModels.acquireLease(lease, 'there', 60_000);
      for (const { name } of PROJECTIONS) await there.run(name, { lease, holder: 'there', token: theirs.token });
      await waiting;
      for (const projection of PROJECTIONS) {
        const reached = await readModels.checkpoint(checkpointName(projection, versionBuild(projection)));
        expect(comparePositions(reached!, head), projection.name).to.be.at.least(0);
      }
    } finally {
      await here.stop();
      await there.stop();
      await readModels.close();
      await events.close();
      dir.remove();
    }
  });

  it('runs one projection here while another instance runs the others: position and waitFor take each from where it runs', async function () {
    const dir = tempDir('projections-split');
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const others = EmbeddedReadModelStore.open(dir.path);
    const here = new Projections(events, readModels, undefined, 50);
    const there = new Projections(events, others, undefined, 50);
    const fence = async (store: EmbeddedReadModelStore, name: string, holder: string) => ({ lease: `projector-${name}`, holder, token: (await store.acquireLease(`projector-${name}`, holder, 60_000)).token });
    try {
      for (let i = 0; i < 5; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
      await here.start();
      await there.start();
      await here.run('leads', await fence(readModels, 'leads', 'here'));
      expect([here.runs('leads'), here.runs('reports'), here.active]).to.deep.equal([true, false, true]);
      expect(here.all.map((runner) => runner.projection.name)).to.deep.equal(['leads']);
      const first = await events.headPosition();
      await here.runner('leads')!.waitFor(first);
      // Leads is at the head here, the others nowhere: the position is the lowest, theirs.
      expect(comparePositions(here.position(), first)).to.be.below(0);
      const waiting = here.waitFor(first);
      const early = await Promise.race([waiting.then(() => 'ended'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
      expect(early).to.equal('waiting');
      // The other instance runs the rest (under their own leases) and stores their checkpoints.
      for (const { name } of PROJECTIONS.filter((p) => p.name !== 'leads')) await there.run(name, await fence(others, name, 'there'));
      await waiting;
      expect(comparePositions(here.position(), first)).to.be.at.least(0);
      // Statuses mix the runner here with the checkpoints stored there.
      const statuses = await here.statuses(first);
      expect(statuses.map((s) => [s.projection, s.caughtUp])).to.deep.equal(PROJECTIONS.map((p) => [p.name, true]));
      // More events: a wait here ends once both this runner and the other instance have them.
      for (let i = 5; i < 8; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
      const second = await events.headPosition();
      await here.waitFor(second);
      for (const projection of PROJECTIONS) {
        const reached = await readModels.checkpoint(checkpointName(projection, versionBuild(projection)));
        expect(comparePositions(reached!, second), projection.name).to.be.at.least(0);
      }
      // Paused here, leads is read from its checkpoint like the others.
      await here.pause('leads');
      expect([here.runs('leads'), here.active, here.all.length]).to.deep.equal([false, false, 0]);
      expect(comparePositions(here.position(), second)).to.be.at.least(0);
    } finally {
      await here.stop();
      await there.stop();
      await others.close();
      await readModels.close();
      await events.close();
      dir.remove();
    }
  });

  it("a commit refused by one projection's fence stops that projection only: the others run on", async function () {
    const dir = tempDir('projections-one-fence');
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const here = new Projections(events, readModels);
    try {
      for (let i = 0; i < 5; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
      await here.start();
      const lost: string[] = [];
      for (const { name } of PROJECTIONS) {
        // Reports' lease is taken for a millisecond, as when another process took it over: its commits are refused.
        const ttl = name === 'reports' ? 1 : 60_000;
        const lease = await readModels.acquireLease(`projector-${name}`, 'here', ttl);
        await until('the lease as wanted', () => name !== 'reports' || Date.now() > lease.expiresAt, 1000, 1);
        await here.run(name, { lease: `projector-${name}`, holder: 'here', token: lease.token }, () => {
          lost.push(name);
          void here.pause(name);
        });
      }
      const head = await events.headPosition();
      await until('reports stopped by its fence', () => lost.includes('reports') && !here.runs('reports'));
      for (const name of PROJECTIONS.map((p) => p.name).filter((name) => name !== 'reports')) await here.runner(name)!.waitFor(head);
      expect(lost).to.deep.equal(['reports']);
      expect(PROJECTIONS.map((p) => here.runs(p.name))).to.deep.equal(PROJECTIONS.map((p) => p.name !== 'reports'));
      expect(await readModels.checkpoint(checkpointName(PROJECTIONS.find((p) => p.name === 'reports')!, versionBuild(PROJECTIONS.find((p) => p.name === 'reports')!)))).to.equal(null);
    } finally {
      await here.stop();
      await readModels.close();
      await events.close();
      dir.remove();
    }
  });
});

describe('projections: following a switch to a build behind the one served', function () {
  const leads = PROJECTIONS.find((p) => p.name === 'leads')!;

  /** Leads from+1 … to, each in its stream; the head after them. */
  async function postLeads(events: EmbeddedEventStore, from: number, to: number) {
    for (let i = from; i < to; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
    return events.headPosition();
  }

  /** Runs every projection in `instance`, each under its lease. */
  async function runAll(instance: Projections, leases: EmbeddedReadModelStore): Promise<void> {
    for (const { name } of PROJECTIONS) await instance.run(name, { lease: `projector-${name}`, holder: 'p', token: (await leases.acquireLease(`projector-${name}`, 'p', 60_000)).token });
  }

  /**
   * Reads what `instance` serves, every millisecond until `done`: its position must never go back,
   * and lead 300, shown once, must stay shown. What it finds wrong goes to `problems`.
   */
  async function watchReads(name: string, instance: Projections, readModels: EmbeddedReadModelStore, done: (position: Position) => boolean, problems: string[]): Promise<void> {
    let last = instance.position();
    await until(`the ${name} reading the new build`, async () => {
      const position = instance.position();
      if (comparePositions(position, last) < 0) problems.push(`${name}: position ${JSON.stringify(position)} after ${JSON.stringify(last)}`);
      last = position;
      if ((await readModels.get(instance.collection('leads'), '300')) === null) problems.push(`${name}: lead 300 missing from ${instance.collection('leads')}`);
      return done(position);
    }, 10_000, 1);
  }

  interface DataDir {
    readonly events: EmbeddedEventStore;
    readonly readModels: EmbeddedReadModelStore;
    /** An instance's projections over these stores (or `over`), looking for switches every `pollMs`: stopped after the test. */
    instance(pollMs: number, over?: ReadModelStore): Projections;
  }

  /** Runs `test` on the stores of a fresh data dir, then stops the instances it made and removes the dir. */
  async function inDataDir(name: string, test: (dir: DataDir) => Promise<void>): Promise<void> {
    const dir = tempDir(name);
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const made: Projections[] = [];
    const instance = (pollMs: number, over: ReadModelStore = readModels) => {
      made.push(new Projections(events, over, undefined, pollMs));
      return made.at(-1)!;
    };
    try {
      await test({ events, readModels, instance });
    } finally {
      for (const projections of made) await projections.stop();
      await readModels.close();
      await events.close();
      dir.remove();
    }
  }

  it('reads move to the new build only once it holds all the old one showed: no lead read a moment before goes missing, the position never goes back', async function () {
    this.timeout(30_000);
    await inDataDir('projections-switch', async ({ events, readModels, instance }) => {
      // The instance running the projections notices a switch within 400 ms, the one reading them within 20.
      const projector = instance(400);
      const reader = instance(20);
      await postLeads(events, 0, 5);
      await projector.start();
      await reader.start();
      await runAll(projector, readModels);
      const next = `${versionBuild(leads)}_r${Date.now()}`;
      await rebuildProjections(events, readModels, [leads], { build: () => next });
      // Posted after the rebuild's last read: folded into the build served, not the new one.
      const head = await postLeads(events, 5, 300);
      await projector.waitFor(head);
      await reader.waitFor(head);
      // The switch as a replay makes it in the moment after its check, the served build ahead.
      await switchBuild(readModels, leads, next);

      const problems: string[] = [];
      const caughtUp = (projections: Projections) => (position: Position) => projections.build('leads') === next && comparePositions(position, head) >= 0;
      await Promise.all([watchReads('reader', reader, readModels, caughtUp(reader), problems), watchReads('projector', projector, readModels, caughtUp(projector), problems)]);
      expect(problems.slice(0, 3)).to.deep.equal([]);
    });
  });

  it('an instance stopping while a switch waits for its new build to catch up stops at once, with the new build\'s runner', async function () {
    this.timeout(15_000);
    await inDataDir('projections-switch-stop', async ({ events, readModels: store, instance }) => {
      const next = `${versionBuild(leads)}_r${Date.now()}`;
      let refused = 0;
      // The new build's commits fail, as a store failing would make them: it never catches up.
      const failing = overriding(store, {
        commit: (projection, checkpoint, writes, fence) => {
          if (projection !== checkpointName(leads, next) || refused < 0) return store.commit(projection, checkpoint, writes, fence);
          refused++;
          return Promise.reject(new ReadModelUnavailableError('injected: the store fails'));
        },
      });
      const projector = instance(20, failing);
      await postLeads(events, 0, 5);
      await projector.start();
      await runAll(projector, store);
      refused = -1;
      await rebuildProjections(events, store, [leads], { build: () => next });
      refused = 0;
      await projector.waitFor(await postLeads(events, 5, 10));
      await switchBuild(store, leads, next);
      await until('the switch waiting on its new build', () => refused > 0);

      // Without the stop cutting the wait short, this waits out the switch's 30 s.
      await projector.stop();
      expect(projector.all).to.deep.equal([]);
    });
  });

  it('with no projector to catch the new build up, an instance starting reads the build before it; a later replay removes that one only once every instance can do without it', async function () {
    this.timeout(30_000);
    await inDataDir('projections-switch-down', async ({ events, readModels, instance }) => {
      const first = versionBuild(leads);
      const projector = instance(50);
      const reader = instance(300);
      const late = instance(300);
      await postLeads(events, 0, 5);
      await projector.start();
      await reader.start();
      await runAll(projector, readModels);
      const behind = `${first}_r${Date.now()}`;
      await rebuildProjections(events, readModels, [leads], { build: () => behind });
      const head = await postLeads(events, 5, 300);
      await projector.waitFor(head);
      await reader.waitFor(head);
      // The projector goes down, and a replay switches to its build, behind the one served: nobody folds it on.
      await projector.stop();
      await switchBuild(readModels, leads, behind);

      await late.start();
      expect(late.build('leads'), 'an instance started now reads the build before').to.equal(first);
      expect(comparePositions(late.position(), head)).to.be.at.least(0);
      expect(await readModels.get(late.collection('leads'), '300')).to.not.equal(null);

      // Another replay, at the head, is switched to, and removes the builds older than the one before it.
      const next = `${first}_r${Date.now() + 1}`;
      await rebuildProjections(events, readModels, [leads], { build: () => next });
      await switchBuild(readModels, leads, next);
      const problems: string[] = [];
      let dropped: string[] | undefined;
      void dropBuildsOlderThan(readModels, leads, behind).then((builds) => (dropped = builds));
      const followed = (projections: Projections) => () => projections.build('leads') === next && dropped !== undefined;
      await Promise.all([watchReads('reader', reader, readModels, followed(reader), problems), watchReads('late', late, readModels, followed(late), problems)]);
      expect(problems.slice(0, 3)).to.deep.equal([]);
      expect(dropped).to.deep.equal([first]);
    });
  });

  it('two switches in a row that no projector followed: an instance starting reads the furthest along of the builds before', async function () {
    this.timeout(30_000);
    await inDataDir('projections-switch-twice', async ({ events, readModels, instance }) => {
      const first = versionBuild(leads);
      // A projector that has not looked for a switch before it went down.
      const projector = instance(60_000);
      const late = instance(300);
      await postLeads(events, 0, 5);
      await projector.start();
      await runAll(projector, readModels);
      const [second, third] = [`${first}_r${Date.now()}`, `${first}_r${Date.now() + 1}`];
      await rebuildProjections(events, readModels, [leads], { build: () => second });
      await rebuildProjections(events, readModels, [leads], { build: () => third });
      const head = await postLeads(events, 5, 300);
      await projector.waitFor(head);
      await projector.stop();
      await switchBuild(readModels, leads, second);
      await switchBuild(readModels, leads, third);

      await late.start();
      expect(late.build('leads'), 'the build the projector took furthest').to.equal(first);
      expect(comparePositions(late.position(), head)).to.be.at.least(0);
      expect(await readModels.get(late.collection('leads'), '300')).to.not.equal(null);
    });
  });
});

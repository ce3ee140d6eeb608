import { expect } from 'chai';
import { decide, initialLeadState } from '../../src/commands/post-lead/decider.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { type EventStore, type RecordedEvent, comparePositions } from '../../src/event-store/index.js';
import { EVENT_CODEC, codedEventStore } from '../../src/events/codec/index.js';
import { leadStream } from '../../src/events/lead-events.js';
import type { Logger } from 'pino';
import { PROJECTIONS, leadsProjection } from '../../src/projections/projections.js';
import { LAG_SAMPLE, ProjectionRunner, checkpointName, collectionName, estimateEventsBehind } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { type ReadModelStore, ReadModelUnavailableError } from '../../src/read-models/port.js';
import { returned } from '../support/lead-events.js';
import { leadCommand } from './lead-commands.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { rebuildProjections } from '../../src/projections/rebuild.js';
import { READ_MODELS_FILE } from '../../src/read-models/embedded-schema.js';

// Projections over a fixed history of 40 leads: a rebuild equals the first build, a second run
// over the same events changes nothing, and a run stopped mid-way resumes without double counting.

async function snapshot(readModels: ReadModelStore, build: string): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const projection of PROJECTIONS) {
    for (const base of projection.collections) {
      const docs = await readModels.find(collectionName(base, build), { sort: { field: '_id', direction: 'asc' }, limit: 10_000 });
      out[base] = docs;
    }
  }
  return out;
}

async function runAll(events: EventStore, readModels: ReadModelStore, build: string, options: { batchSize?: number } = {}): Promise<void> {
  const head = await events.headPosition();
  for (const projection of PROJECTIONS) {
    const runner = new ProjectionRunner(events, readModels, projection, build, { batchSize: options.batchSize ?? 500, flushMs: 5 });
    runner.start();
    await runner.waitFor(head);
    await runner.stop();
  }
}

describe('projection runner', function () {
  const dir = tempDir('projections');
  let events: EventStore;
  let readModels: ReadModelStore;

  before(async function () {
    events = await EmbeddedEventStore.open(dir.path);
    readModels = EmbeddedReadModelStore.open(dir.path);
    for (let i = 0; i < 40; i++) {
      const decided = decide(leadCommand(i), initialLeadState);
      await events.append(leadStream(i + 1), decided, { expectedRevision: 'no_stream' });
    }
    await runAll(events, readModels, 'first');
  });
  after(async () => {
    await readModels.close();
    await events.close();
    dir.remove();
  });

  it('builds the lead view, deliveries and report buckets from the events', async function () {
    const built = await snapshot(readModels, 'first');
    expect(built.leads).to.have.length(40);
    // Sold or unsold non-test leads get a delivery row: not duplicates (i % 7 == 6), not tests (i % 10 == 9).
    const expected = Array.from({ length: 40 }, (_, i) => i).filter((i) => i % 7 !== 6 && i % 10 !== 9);
    expect(built.deliveries).to.have.length(expected.length);
    const received = (built.report_buckets as Array<{ received: number }>).reduce((n, b) => n + b.received, 0);
    expect(received).to.equal(40);
  });

  it('running a projection twice over the same events changes nothing', async function () {
    const before = await snapshot(readModels, 'first');
    for (const projection of PROJECTIONS) {
      await readModels.resetCheckpoint(checkpointName(projection, 'first'));
      // The second run really starts from the first event.
      expect(await readModels.checkpoint(checkpointName(projection, 'first'))).to.equal(null);
    }
    await runAll(events, readModels, 'first');
    expect(await snapshot(readModels, 'first')).to.deep.equal(before);
  });

  it('a rebuild into new collections equals the first build', async function () {
    await runAll(events, readModels, 'second');
    expect(await snapshot(readModels, 'second')).to.deep.equal(await snapshot(readModels, 'first'));
  });

  it('stopped mid-way and restarted, it resumes without double counting', async function () {
    const all = await events.readAll();
    const middle = all[Math.floor(all.length / 2)]!.position;
    for (const projection of PROJECTIONS) {
      const first = new ProjectionRunner(events, readModels, projection, 'third', { batchSize: 7, flushMs: 5 });
      first.start();
      await first.waitFor(middle);
      await first.stop();
    }
    const halfway = await snapshot(readModels, 'third');
    expect(halfway.leads!.length).to.be.above(0).and.below(40);
    for (const projection of PROJECTIONS) {
      // The restart resumes from the middle, not from the start.
      const reached = await readModels.checkpoint(checkpointName(projection, 'third'));
      expect(reached && comparePositions(reached, middle), projection.name).to.be.at.least(0);
    }
    await runAll(events, readModels, 'third', { batchSize: 7 });
    expect(await snapshot(readModels, 'third')).to.deep.equal(await snapshot(readModels, 'first'));
  });

  it('an index added to a projection reaches a build already in service when it is opened again, without a new version or a rebuild', async function () {
    const head = await events.headPosition();
    // The build as an older release made it, with fewer indexes.
    const older = { ...leadsProjection, indexes: { leads: leadsProjection.indexes.leads!.slice(0, 1) } };
    const first = new ProjectionRunner(events, readModels, older, 'grown', { batchSize: 500, flushMs: 5 });
    first.start();
    await first.waitFor(head);
    await first.stop();
    const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
    const indexes = () =>
      raw.prepare<[string], string>("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name LIKE 'ix_%'").pluck().all(`rm_${collectionName('leads', 'grown')}`);
    try {
      expect(indexes()).to.have.length(1);
      const reopened = new ProjectionRunner(events, readModels, leadsProjection, 'grown', { batchSize: 500, flushMs: 5 });
      // It resumes where the build was, rather than folding the events again.
      expect(comparePositions(await reopened.prepare(), head)).to.equal(0);
      expect(indexes()).to.have.length(leadsProjection.indexes.leads!.length);
    } finally {
      raw.close();
    }
  });

  it('rebuilt side by side, from one read: equal to one-at-a-time builds, indexed only once caught up, and following appends made meanwhile', async function () {
    const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
    const indexes = (collection: string) =>
      raw.prepare<[string], string>("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name LIKE 'ix_%' ORDER BY name").pluck().all(`rm_${collection}`);
    try {
      let appended: Promise<unknown> | undefined;
      let checkedDuring = 0;
      // The rebuild's look at the head waits for the append below, as if it had landed just before.
      const store = overriding(events, { headPosition: async () => (await appended, events.headPosition()) });
      const rebuilt = await rebuildProjections(store, readModels, PROJECTIONS, {
        batchSize: 20,
        build: () => 'side',
        onProgress: ({ projection, done }) => {
          const bases = PROJECTIONS.find((p) => p.name === projection)!.collections;
          for (const base of bases) {
            if (done) expect(indexes(collectionName(base, 'side')), `${base} after`).to.have.length(PROJECTIONS.find((p) => p.name === projection)!.indexes[base]!.length);
            else {
              expect(indexes(collectionName(base, 'side')), `${base} during`).to.deep.equal([]);
              checkedDuring++;
            }
          }
          if (!appended) {
            appended = events.append(leadStream(2000), decide(leadCommand(1), initialLeadState).map((e) => ({ ...e, data: { ...e.data, lead_id: 2000 } })));
          }
        },
      });
      expect(checkedDuring).to.be.above(0);
      const head = await events.headPosition();
      expect(rebuilt.map((r) => [r.projection.name, r.build, r.position])).to.deep.equal(PROJECTIONS.map((p) => [p.name, 'side', head]));
      await runAll(events, readModels, 'reference');
      const side = await snapshot(readModels, 'side');
      expect(side).to.deep.equal(await snapshot(readModels, 'reference'));
      expect(side.leads!.map((doc) => (doc as { _id: string })._id)).to.include('2000');
      // The same indexes as a build that made them up front.
      for (const projection of PROJECTIONS) {
        for (const base of projection.collections) expect(indexes(collectionName(base, 'side')).map((n) => n.replace('_side', ''))).to.deep.equal(indexes(collectionName(base, 'reference')).map((n) => n.replace('_reference', '')));
      }
    } finally {
      raw.close();
    }
  });

  it('rebuilt side by side, a lead whose receipt came before the rebuild\'s start is read back from its stream once for every projection', async function () {
    // The rebuild starts after lead 2's post (a checkpoint there), so none of its runners has seen
    // its LeadReceived; its feedback and its return each need it (feedback and reports).
    const posted = await events.headPosition();
    for (const projection of PROJECTIONS) await readModels.commit(checkpointName(projection, 'late'), posted, []);
    await events.append(leadStream(2), returned(2, 'buyer-1', 11, 'bad_phone', '2026-11-21T10:00:00.000Z'));
    const reads: string[] = [];
    const store = overriding(events, { readStream: (stream, options) => (reads.push(stream), events.readStream(stream, options)) });
    await rebuildProjections(store, readModels, PROJECTIONS, { build: () => 'late' });
    expect(reads).to.deep.equal([leadStream(2)]);
    const bucket = (await readModels.find(collectionName('report_buckets', 'late'), { sort: { field: '_id', direction: 'asc' }, limit: 10 }))[0];
    expect(bucket).to.include({ supplier: 'sup-1', buyer: 'buyer-1', returned: 1, returned_cents: 1100 });
    expect(await readModels.get(collectionName('feedback', 'late'), (await events.readStream(leadStream(2))).at(-2)!.id)).to.include({ supplier: 'sup-1', type: 'return' });
  });

  it('rebuilt through a store that pipelines its commits: equal to a build made one commit at a time, with commits in flight together', async function () {
    // Later events of leads whose documents earlier batches wrote, so that a batch finds documents
    // still being stored by the commit thread.
    for (const lead of [2, 3, 5]) {
      const at = '2026-11-21T10:00:00.000Z';
      await events.append(leadStream(lead), [
        { type: 'LeadDeliveryAttempted', data: { lead_id: lead, buyer: 'buyer-0', attempt: 1, started_at: at, timeout_ms: 5000 } },
        { type: 'LeadDelivered', data: { lead_id: lead, buyer: 'buyer-0', via: 'webhook', attempt: 1, status: 200, latency_ms: 12, delivered_at: at } },
      ]);
    }
    const threaded = EmbeddedReadModelStore.open(dir.path, { commitThread: true });
    try {
      expect(threaded.pipelinedCommits).to.equal(true);
      let inFlight = 0;
      let mostInFlight = 0;
      const counting = overriding(threaded, {
        commit: (...args: Parameters<ReadModelStore['commit']>) => {
          mostInFlight = Math.max(mostInFlight, ++inFlight);
          return threaded.commit(...args).finally(() => inFlight--);
        },
      });
      await rebuildProjections(events, counting, PROJECTIONS, { batchSize: 7, build: () => 'piped' });
      expect(mostInFlight).to.be.at.least(2);
    } finally {
      await threaded.close();
    }
    await runAll(events, readModels, 'piped_reference', { batchSize: 7 });
    const piped = await snapshot(readModels, 'piped');
    expect(piped).to.deep.equal(await snapshot(readModels, 'piped_reference'));
    expect(piped.deliveries!.find((d) => (d as { _id: string })._id === '5')).to.include({ status: 'delivered', attempts: 1 });
  });

  it('rebuilt through a store that pipelines its commits, one of which fails: the rebuild fails with its error, and no rejection is left unhandled', async function () {
    const threaded = EmbeddedReadModelStore.open(dir.path, { commitThread: true });
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    const mochaHandlers = process.listeners('unhandledRejection');
    process.removeAllListeners('unhandledRejection');
    process.on('unhandledRejection', onUnhandled);
    try {
      let commits = 0;
      const failing = overriding(threaded, {
        commit: (...args: Parameters<ReadModelStore['commit']>) => (++commits === 3 ? Promise.reject(new ReadModelUnavailableError('the disk is full')) : threaded.commit(...args)),
      });
      const error = await rebuildProjections(events, failing, PROJECTIONS, { batchSize: 7, build: () => 'failing' }).then(
        () => null,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(ReadModelUnavailableError);
      // Node reports an unhandled rejection once the microtasks of the turn have run.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).to.deep.equal([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      for (const handler of mochaHandlers) process.on('unhandledRejection', handler);
      await threaded.close();
    }
  });

  it('follows live appends after catching up, and reports its lag', async function () {
    const runner = new ProjectionRunner(events, readModels, PROJECTIONS[0]!, 'first', { flushMs: 5 });
    runner.start();
    await runner.waitFor(await events.headPosition());
    expect((await runner.status()).caughtUp).to.equal(true);
    const appended = await events.append(leadStream(1000), decide(leadCommand(0), initialLeadState).map((e) => ({ ...e, data: { ...e.data, lead_id: 1000 } })));
    await runner.waitFor(appended.position);
    expect(await readModels.get(collectionName('leads', 'first'), '1000')).to.include({ lead_id: 1000 });
    const status = await runner.status();
    expect(status).to.include({ caughtUp: true, eventsBehind: 0, lagSeconds: 0, projection: 'leads' });
    await runner.stop();
    // Stopped, it falls behind: the events it has not seen and how long the oldest has waited.
    await events.append(leadStream(1001), [{ type: 'LeadReceived', data: { lead_id: 1001 } }, { type: 'LeadEnriched', data: { lead_id: 1001 } }]);
    const behind = await runner.status();
    expect(behind).to.include({ caughtUp: false, eventsBehind: 2 });
    expect(behind.lagSeconds).to.be.within(0, 5);
  });

  it('on a store that pipelines its commits, a timed commit that fails is made again from the checkpoint, with no later event to start it', async function () {
    const threaded = EmbeddedReadModelStore.open(dir.path, { commitThread: true });
    let failures = 0;
    const failingOnce = overriding(threaded, {
      commit: (...args: Parameters<ReadModelStore['commit']>) => (failures++ === 0 ? Promise.reject(new ReadModelUnavailableError('the disk is busy')) : threaded.commit(...args)),
    });
    const runner = new ProjectionRunner(events, failingOnce, PROJECTIONS[0]!, 'retimed', { flushMs: 5 });
    try {
      // The whole log goes in the first batch, by the timer: its commit fails, and nothing follows.
      runner.start();
      await runner.waitFor(await events.headPosition());
      expect(failures).to.be.at.least(2);
      expect(await threaded.checkpoint(checkpointName(PROJECTIONS[0]!, 'retimed'))).to.deep.equal(await events.headPosition());
    } finally {
      await runner.stop();
      await threaded.close();
    }
  });

  it('fenced by a lease another process has taken: the commit changes nothing, and the runner stops and says so', async function () {
    const lease = 'projector-fence-test';
    const taken = await readModels.acquireLease(lease, 'old:1:a', 60_000);
    let lost = 0;
    const runner = new ProjectionRunner(events, readModels, PROJECTIONS[0]!, 'fenced', { flushMs: 5, fence: { lease, holder: 'old:1:a', token: taken.token }, onLeaseLost: () => lost++ });
    runner.start();
    await runner.waitFor(await events.headPosition());
    const reached = await readModels.checkpoint(checkpointName(PROJECTIONS[0]!, 'fenced'));
    // The lease passes to another process (a second connection, as another process has) while this runner still runs.
    const other = EmbeddedReadModelStore.open(dir.path);
    try {
      await readModels.releaseLease(lease, 'old:1:a');
      expect((await other.acquireLease(lease, 'new:2:b', 60_000)).holder).to.equal('new:2:b');
    } finally {
      await other.close();
    }
    await events.append(leadStream(1002), decide(leadCommand(1), initialLeadState).map((e) => ({ ...e, data: { ...e.data, lead_id: 1002 } })));
    const started = Date.now();
    while (lost === 0 && Date.now() - started < 5000) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(lost).to.equal(1);
    expect(await readModels.get(collectionName('leads', 'fenced'), '1002')).to.equal(null);
    expect(await readModels.checkpoint(checkpointName(PROJECTIONS[0]!, 'fenced'))).to.deep.equal(reached);
    // Stopped for good: it does not resubscribe and try again, and stop() is quiet.
    await runner.stop();
    expect(lost).to.equal(1);
  });
});

describe('an event a projection cannot read', function () {
  it('stops it where it is, and each new try comes after twice the wait before, although the events before it are handled again each time', async function () {
    const dir = tempDir('projection-poison');
    const raw = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const tries: Array<{ at: number; retryInMs: unknown }> = [];
    const logger = {
      warn: (fields: { retry_in_ms?: unknown }, message: string) => void (message === 'projection stopped; resubscribing' && tries.push({ at: Date.now(), retryInMs: fields.retry_in_ms })),
    } as unknown as Logger;
    const runner = new ProjectionRunner(codedEventStore(raw, EVENT_CODEC), readModels, leadsProjection, 'poisoned', { flushMs: 5, logger });
    try {
      for (let i = 0; i < 3; i++) await raw.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState));
      // Written without the codec: version 0, whose upcaster refuses data of another layout.
      await raw.append('idempotency-poison', [{ type: 'IdempotentResponseRecorded', data: { outcome: {} } }]);
      await raw.append(leadStream(4), decide(leadCommand(3), initialLeadState));
      runner.start();
      const started = Date.now();
      while (tries.length < 4 && Date.now() - started < 10_000) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(tries).to.have.length.of.at.least(4);
      expect(tries.slice(0, 4).map((t) => t.retryInMs)).to.deep.equal([100, 200, 400, 800]);
      // And it does wait that long (a busy machine only makes the waits longer).
      const waits = tries.slice(1, 4).map((t, i) => t.at - tries[i]!.at);
      for (const [i, wait] of waits.entries()) expect(wait, `waits ${waits.join(', ')} ms`).to.be.at.least(100 * 2 ** i - 5);
      // Nothing after it is in the read model: it is not passed over.
      expect(await readModels.get(collectionName('leads', 'poisoned'), '4')).to.equal(null);
    } finally {
      await runner.stop();
      await readModels.close();
      await raw.close();
      dir.remove();
    }
  });
});

describe('projection lag', function () {
  const dir = tempDir('projection-lag');
  after(() => dir.remove());

  it('a status far behind reads one page of at most LAG_SAMPLE events, and estimates the rest from positions', async function () {
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    try {
      // 1,200 appends of 1 to 7 events (4,800 in all): a backlog of uneven commits.
      const sizes = Array.from({ length: 1200 }, (_, i) => (i % 7) + 1);
      await Promise.all(
        sizes.map((size, i) => events.append(`lag-${i}`, Array.from({ length: size }, (_, k) => ({ type: 'Noted', data: { k } })), { expectedRevision: 'no_stream' })),
      );
      const total = sizes.reduce((a, b) => a + b, 0);
      let reads = 0;
      let eventsRead = 0;
      const counting = overriding(events, {
        readAll: async (options?: Parameters<EventStore['readAll']>[0]) => {
          reads++;
          const page = await events.readAll(options);
          eventsRead += page.length;
          return page;
        },
        readStream: async (...args: Parameters<EventStore['readStream']>) => {
          reads++;
          const stream = await events.readStream(...args);
          eventsRead += stream.length;
          return stream;
        },
      });
      const runner = new ProjectionRunner(counting, readModels, PROJECTIONS[0]!, 'lag');
      await runner.prepare();
      const status = await runner.status();
      expect(reads).to.equal(1);
      expect(eventsRead).to.be.at.most(LAG_SAMPLE);
      expect(status.caughtUp).to.equal(false);
      expect(status.eventsBehind).to.be.within(total * 0.8, total * 1.2);
      expect(status.lagSeconds).to.be.within(0, 60);
    } finally {
      await readModels.close();
      await events.close();
    }
  });

  it('estimateEventsBehind: exact for a short backlog, the sample rate beyond it, "more" when the sample has no rate', function () {
    const at = (commit: number, prepare = 0) => ({ position: { commit, prepare } }) as RecordedEvent;
    // `count` events from commit 10 on, `perCommit` to a commit.
    const sample = (count: number, perCommit: number) => Array.from({ length: count }, (_, i) => at(10 + Math.floor(i / perCommit), i % perCommit));
    expect(estimateEventsBehind([], { commit: 9, prepare: 0 })).to.equal(0);
    expect(estimateEventsBehind(sample(40, 2), { commit: 29, prepare: 1 })).to.equal(40);
    // 100 events in commits 10 to 59, 950 commits more to the head: about 1,900 more at 2 per commit.
    expect(estimateEventsBehind(sample(LAG_SAMPLE, 2), { commit: 1009, prepare: 1 })).to.be.within(1980, 2040);
    // The whole sample inside one commit: no rate, only that more are behind.
    expect(estimateEventsBehind(sample(LAG_SAMPLE, LAG_SAMPLE), { commit: 500, prepare: 0 })).to.equal(LAG_SAMPLE + 1);
  });

});

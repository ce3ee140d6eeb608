import { expect } from 'chai';
import { v4 as uuidv4 } from 'uuid';
import {
  type EventStore,
  type Position,
  type RecordedEvent,
  START,
  WrongExpectedRevisionError,
  comparePositions,
} from '../../src/event-store/index.js';
import { runChild } from '../support/child.js';

export interface ContractOptions {
  /** Environment that makes `append-child.js` open the same store from another process. */
  readonly childEnv: () => NodeJS.ProcessEnv;
}

const event = (type: string, data: Record<string, unknown> = {}) => ({ type, data, metadata: { trace_id: 'abc' } });

async function rejection(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected the promise to reject');
}

async function take(store: EventStore, from: Position, prefix: string, count: number, timeoutMs = 5000): Promise<RecordedEvent[]> {
  const subscription = store.subscribeToAll({ fromPosition: from });
  const seen: RecordedEvent[] = [];
  const timer = setTimeout(() => void subscription.unsubscribe(), timeoutMs);
  for await (const recorded of subscription) {
    if (!recorded.streamId.startsWith(prefix)) continue;
    seen.push(recorded);
    if (seen.length === count) break;
  }
  clearTimeout(timer);
  return seen;
}

/**
 * The behaviour every EventStore adapter must have. Streams get a fresh prefix per test, and
 * `$all` checks only look at the test's own streams, so the suite also runs on a shared server.
 */
export function eventStoreContract(name: string, open: () => Promise<EventStore>, options: ContractOptions): void {
  describe(`EventStore contract: ${name}`, function () {
    let store: EventStore;
    let prefix: string;
    const stream = (suffix: string) => `${prefix}${suffix}`;

    beforeEach(async function () {
      store = await open();
      prefix = `t${uuidv4().replaceAll('-', '')}-`;
    });
    afterEach(async function () {
      await store.close();
    });

    describe('append and read a stream', function () {
      it('numbers revisions from 0 and reads them back in order, with data and metadata', async function () {
        const result = await store.append(stream('a'), [event('One', { n: 1 }), event('Two', { n: 2 }), event('Three', { n: 3 })], {
          expectedRevision: 'no_stream',
        });
        expect(result.nextExpectedRevision).to.equal(2);
        const events = await store.readStream(stream('a'));
        expect(events.map((e) => [e.revision, e.type, e.data])).to.deep.equal([
          [0, 'One', { n: 1 }],
          [1, 'Two', { n: 2 }],
          [2, 'Three', { n: 3 }],
        ]);
        expect(events[0]!.metadata).to.deep.equal({ trace_id: 'abc' });
        expect(events[0]!.streamId).to.equal(stream('a'));
        expect(events[0]!.id).to.match(/^[0-9a-f-]{36}$/);
        expect(events[2]!.position).to.deep.equal(result.position);
        expect(Math.abs(events[0]!.created - Date.now())).to.be.below(60_000);
      });

      it('keeps the id the caller gives', async function () {
        const id = uuidv4();
        await store.append(stream('a'), [{ id, type: 'One', data: {} }]);
        expect((await store.readStream(stream('a')))[0]!.id).to.equal(id);
      });

      it('continues revisions across appends and reads from a revision with a max count', async function () {
        await store.append(stream('a'), [event('E0'), event('E1')], { expectedRevision: 'no_stream' });
        const second = await store.append(stream('a'), [event('E2'), event('E3')], { expectedRevision: 1 });
        expect(second.nextExpectedRevision).to.equal(3);
        const tail = await store.readStream(stream('a'), { fromRevision: 1, maxCount: 2 });
        expect(tail.map((e) => [e.revision, e.type])).to.deep.equal([
          [1, 'E1'],
          [2, 'E2'],
        ]);
      });

      it('reads a stream of many commits, interleaved with other streams, from any revision', async function () {
        // Commits of 1, 2 and 3 events, with another stream's commit between each pair.
        let revision = -1;
        for (let commit = 0; commit < 12; commit++) {
          const count = (commit % 3) + 1;
          const events = Array.from({ length: count }, (_, i) => event(`E${revision + 1 + i}`));
          await store.append(stream('long'), events, { expectedRevision: revision < 0 ? 'no_stream' : revision });
          revision += count;
          await store.append(stream(`other-${commit}`), [event('X')], { expectedRevision: 'no_stream' });
        }
        const all = await store.readStream(stream('long'));
        expect(all.map((e) => e.type)).to.deep.equal(Array.from({ length: revision + 1 }, (_, r) => `E${r}`));
        for (let from = 0; from <= revision + 1; from++) {
          const tail = await store.readStream(stream('long'), { fromRevision: from });
          expect(tail.map((e) => e.revision), `from ${from}`).to.deep.equal(all.slice(from).map((e) => e.revision));
          expect(tail.map((e) => e.type)).to.deep.equal(all.slice(from).map((e) => e.type));
        }
        const middle = await store.readStream(stream('long'), { fromRevision: 7, maxCount: 4 });
        expect(middle.map((e) => e.type)).to.deep.equal(['E7', 'E8', 'E9', 'E10']);
      });

      it('reads a stream that does not exist as empty', async function () {
        expect(await store.readStream(stream('missing'))).to.deep.equal([]);
      });

      it("an append of no events writes nothing and answers the stream's revision as it is (-1 when missing) and the head", async function () {
        await store.append(stream('other'), [event('X')]);
        const head = await store.headPosition();
        for (const expectedRevision of ['any', 'no_stream'] as const) {
          expect(await store.append(stream('empty'), [], { expectedRevision })).to.deep.equal({ nextExpectedRevision: -1, position: head });
        }
        expect(await store.readStream(stream('empty'))).to.deep.equal([]);
        await store.append(stream('empty'), [event('E0'), event('E1')], { expectedRevision: 'no_stream' });
        const headAfter = await store.headPosition();
        for (const expectedRevision of ['any', 'stream_exists', 1] as const) {
          expect(await store.append(stream('empty'), [], { expectedRevision })).to.deep.equal({ nextExpectedRevision: 1, position: headAfter });
        }
        const checks: Array<[string, 'no_stream' | 'stream_exists' | number, number | 'no_stream']> = [
          [stream('missing'), 'stream_exists', 'no_stream'],
          [stream('missing'), 0, 'no_stream'],
          [stream('empty'), 'no_stream', 1],
          [stream('empty'), 0, 1],
        ];
        for (const [streamId, expected, actual] of checks) {
          const error = await rejection(store.append(streamId, [], { expectedRevision: expected }));
          expect(error).to.be.instanceOf(WrongExpectedRevisionError);
          expect(error).to.include({ streamId, expected, actual });
        }
        expect(await store.readStream(stream('empty'))).to.have.length(2);
        expect(await store.headPosition()).to.deep.equal(headAfter);
      });

      it('refuses data or metadata JSON cannot hold with a TypeError naming the event, and writes nothing', async function () {
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        const unstorable = [{ data: undefined }, { data: { amount: 10n } }, { data: cyclic }, { data: {}, metadata: { trace: 1n } }];
        for (const bad of unstorable) {
          // A good event beside the bad one: the append is refused whole.
          const error = await rejection(store.append(stream('json'), [event('Good'), { type: 'Bad', ...bad }]));
          expect(error).to.be.instanceOf(TypeError);
          expect(error.message).to.contain(`cannot append Bad to ${stream('json')}`);
        }
        expect(await store.readStream(stream('json'))).to.deep.equal([]);
      });
    });

    describe('expected revision', function () {
      it('no_stream fails on an existing stream, with expected and actual, and writes nothing', async function () {
        await store.append(stream('a'), [event('E0'), event('E1')], { expectedRevision: 'no_stream' });
        const error = await rejection(store.append(stream('a'), [event('X'), event('Y')], { expectedRevision: 'no_stream' }));
        expect(error).to.be.instanceOf(WrongExpectedRevisionError);
        expect(error).to.include({ streamId: stream('a'), expected: 'no_stream', actual: 1 });
        expect(error.message).to.contain(stream('a'));
        expect(await store.readStream(stream('a'))).to.have.length(2);
      });

      it("stream_exists fails on a missing stream with actual 'no_stream'", async function () {
        const error = await rejection(store.append(stream('b'), [event('X')], { expectedRevision: 'stream_exists' }));
        expect(error).to.be.instanceOf(WrongExpectedRevisionError);
        expect(error).to.include({ expected: 'stream_exists', actual: 'no_stream' });
        expect(await store.readStream(stream('b'))).to.deep.equal([]);
      });

      it('stream_exists succeeds once the stream exists', async function () {
        await store.append(stream('b'), [event('E0')]);
        const result = await store.append(stream('b'), [event('E1')], { expectedRevision: 'stream_exists' });
        expect(result.nextExpectedRevision).to.equal(1);
      });

      it('a revision number must be the last revision exactly', async function () {
        await store.append(stream('c'), [event('E0'), event('E1'), event('E2')]);
        for (const wrong of [0, 1, 3]) {
          const error = await rejection(store.append(stream('c'), [event('X')], { expectedRevision: wrong }));
          expect(error).to.include({ expected: wrong, actual: 2 });
        }
        const ok = await store.append(stream('c'), [event('E3')], { expectedRevision: 2 });
        expect(ok.nextExpectedRevision).to.equal(3);
      });

      it('a revision number on a missing stream fails with no_stream', async function () {
        const error = await rejection(store.append(stream('d'), [event('X')], { expectedRevision: 0 }));
        expect(error).to.include({ expected: 0, actual: 'no_stream' });
      });

      it('a revision no stream can be at (negative, fractional) fails with the actual one, and writes nothing', async function () {
        await store.append(stream('n'), [event('E0')]);
        const checks: Array<[string, number, number | 'no_stream']> = [
          [stream('missing'), -1, 'no_stream'],
          [stream('n'), -1, 0],
          [stream('n'), 0.5, 0],
        ];
        for (const [streamId, expected, actual] of checks) {
          const error = await rejection(store.append(streamId, [event('X')], { expectedRevision: expected }));
          expect(error).to.be.instanceOf(WrongExpectedRevisionError);
          expect(error).to.include({ streamId, expected, actual });
        }
        expect(await store.readStream(stream('n'))).to.have.length(1);
        expect(await store.readStream(stream('missing'))).to.deep.equal([]);
      });

      it('any appends whatever the state', async function () {
        await store.append(stream('e'), [event('E0')], { expectedRevision: 'any' });
        const result = await store.append(stream('e'), [event('E1')], { expectedRevision: 'any' });
        expect(result.nextExpectedRevision).to.equal(1);
      });

      it('a failed append in the same moment as good ones fails alone', async function () {
        await store.append(stream('f'), [event('E0')]);
        const results = await Promise.allSettled([
          store.append(stream('g1'), [event('A')], { expectedRevision: 'no_stream' }),
          store.append(stream('f'), [event('Bad')], { expectedRevision: 'no_stream' }),
          store.append(stream('g2'), [event('B')], { expectedRevision: 'no_stream' }),
        ]);
        expect(results.map((r) => r.status)).to.deep.equal(['fulfilled', 'rejected', 'fulfilled']);
        expect(await store.readStream(stream('f'))).to.have.length(1);
      });

      it('many concurrent appenders racing on one stream: exactly one wins each revision', async function () {
        const racers = 20;
        for (let revision = 0; revision < 10; revision++) {
          const expectedRevision = revision === 0 ? ('no_stream' as const) : revision - 1;
          const results = await Promise.allSettled(
            Array.from({ length: racers }, (_, racer) => store.append(stream('race'), [event('Raced', { racer })], { expectedRevision })),
          );
          const winners = results.filter((r) => r.status === 'fulfilled');
          expect(winners, `revision ${revision}`).to.have.length(1);
          for (const loser of results.filter((r) => r.status === 'rejected')) {
            expect((loser as PromiseRejectedResult).reason).to.be.instanceOf(WrongExpectedRevisionError);
          }
        }
        const events = await store.readStream(stream('race'));
        expect(events.map((e) => e.revision)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      });
    });

    describe('$all', function () {
      it('reads in commit order, a multi-event append contiguous, strictly after a position', async function () {
        const head = await store.headPosition();
        await store.append(stream('x'), [event('X0'), event('X1'), event('X2')]);
        await store.append(stream('y'), [event('Y0')]);
        await store.append(stream('x'), [event('X3')]);
        const mine = (await store.readAll({ fromPosition: head })).filter((e) => e.streamId.startsWith(prefix));
        expect(mine.map((e) => e.type)).to.deep.equal(['X0', 'X1', 'X2', 'Y0', 'X3']);
        for (let i = 1; i < mine.length; i++) expect(comparePositions(mine[i]!.position, mine[i - 1]!.position)).to.be.above(0);

        const after = (await store.readAll({ fromPosition: mine[1]!.position })).filter((e) => e.streamId.startsWith(prefix));
        expect(after.map((e) => e.type)).to.deep.equal(['X2', 'Y0', 'X3']);
        const two = await store.readAll({ fromPosition: mine[1]!.position, maxCount: 2 });
        expect(two.map((e) => e.type)).to.deep.equal(['X2', 'Y0']);
        expect(await store.headPosition()).to.deep.equal(mine[4]!.position);
      });

      it('reads in pages of any size from any position, commits of any size, nothing lost or repeated', async function () {
        const head = await store.headPosition();
        // Big commits then small ones, so that a reader guessing commits per page from the last page guesses wrong.
        const sizes = [20, 20, 20, 20, 20, 20, 7, 6, ...Array.from({ length: 40 }, () => 1), 5, 1, 2, 1, 1, 3];
        for (const [i, size] of sizes.entries()) {
          await store.append(stream(`c${i % 3}`), Array.from({ length: size }, (_, k) => event(`C${i}.${k}`)));
        }
        const mine = (events: RecordedEvent[]) => events.filter((e) => e.streamId.startsWith(prefix));
        const all = mine(await store.readAll({ fromPosition: head }));
        expect(all).to.have.length(sizes.reduce((a, b) => a + b, 0));
        for (const pageSize of [1, 3, 7, 30]) {
          for (const start of [head, all[8]!.position, all[127]!.position]) {
            // A second connection, which has read nothing yet, so that no cache of the first one serves the pages.
            const reader = await open();
            const seen: RecordedEvent[] = [];
            let from = start;
            for (;;) {
              const page = await reader.readAll({ fromPosition: from, maxCount: pageSize });
              expect(page.length, `page of ${pageSize}`).to.be.at.most(pageSize);
              seen.push(...mine(page));
              if (page.length < pageSize || comparePositions(page.at(-1)!.position, all.at(-1)!.position) >= 0) break;
              from = page.at(-1)!.position;
            }
            await reader.close();
            const expected = all.filter((e) => comparePositions(e.position, start) > 0).map((e) => e.type);
            expect(seen.map((e) => e.type), `pages of ${pageSize}`).to.deep.equal(expected);
          }
        }
      });

      it('reads from the start when given no position', async function () {
        await store.append(stream('s'), [event('S0')]);
        const first = await store.readAll({ maxCount: 1 });
        expect(first).to.have.length(1);
        expect(comparePositions(first[0]!.position, START)).to.be.above(0);
      });

      it('a subscription catches up, then goes live, and ends on unsubscribe', async function () {
        const head = await store.headPosition();
        await store.append(stream('sub'), [event('Old0'), event('Old1')]);
        const subscription = store.subscribeToAll({ fromPosition: head });
        const seen: string[] = [];
        const done = (async () => {
          for await (const recorded of subscription) {
            if (!recorded.streamId.startsWith(prefix)) continue;
            seen.push(recorded.type);
            if (seen.length === 2) await store.append(stream('sub'), [event('New0'), event('New1')]);
            if (seen.length === 4) await subscription.unsubscribe();
          }
        })();
        await done;
        expect(seen).to.deep.equal(['Old0', 'Old1', 'New0', 'New1']);
      });

      it('a subscription from a position starts strictly after it', async function () {
        await store.append(stream('p'), [event('P0'), event('P1'), event('P2')]);
        const events = await store.readStream(stream('p'));
        const seen = await take(store, events[0]!.position, prefix, 2);
        expect(seen.map((e) => e.type)).to.deep.equal(['P1', 'P2']);
      });
    });

    describe('a second process', function () {
      it('sees appends made by another process in a live subscription within a second', async function () {
        const head = await store.headPosition();
        const started = Date.now();
        const subscriptionDone = take(store, head, prefix, 12, 10_000);
        const child = await runChild(['streams', stream('other-'), '3', '4'], options.childEnv());
        expect(child.code).to.equal(0);
        const childFinished = Date.now();
        const seen = await subscriptionDone;
        expect(seen).to.have.length(12);
        expect(new Set(seen.map((e) => e.streamId))).to.have.property('size', 3);
        expect(Date.now() - childFinished).to.be.below(1000);
        expect(Date.now() - started).to.be.below(10_000);
      });

      it('races another process for the same revisions: exactly one append wins each', async function () {
        const revisions = 30;
        const child = runChild(['race', stream('shared'), String(revisions)], options.childEnv());
        const ready = await child.ready;
        ready.go();
        let won = 0;
        for (let revision = 0; revision < revisions; revision++) {
          try {
            await store.append(stream('shared'), [event('Raced', { by: 'parent', revision })], {
              expectedRevision: revision === 0 ? 'no_stream' : revision - 1,
            });
            won++;
          } catch (error) {
            expect(error).to.be.instanceOf(WrongExpectedRevisionError);
          }
        }
        const result = await child;
        expect(result.code).to.equal(0);
        const childWon = result.lines.filter((l) => l.startsWith('won ')).length;
        const events = await store.readStream(stream('shared'));
        // Each revision was appended at most once, and each process's acknowledged appends are all there.
        expect(events.map((e) => e.revision)).to.deep.equal(events.map((_, i) => i));
        expect(events).to.have.length(revisions);
        expect(won + childWon).to.equal(revisions);
        expect(events.filter((e) => (e.data as { by: string }).by === 'parent')).to.have.length(won);
        expect(events.filter((e) => (e.data as { by: string }).by === 'child')).to.have.length(childWon);
      });
    });
  });
}

import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import type { Position } from '../../src/event-store/port.js';
import { type AggregateOptions, type Group, type GroupValue, LeaseLostError, type ReadDoc, type ReadModelStore, type ReadWrite } from '../../src/read-models/port.js';
import { rejection } from '../support/rejection.js';

const at = (commit: number, prepare = commit): Position => ({ commit, prepare });


/** A name no other test (or earlier run on a shared server) uses: collections and projections alike. */
export const uniqueName = (label: string): string => `t${randomBytes(6).toString('hex')}_${label}`;

const ids = (docs: readonly ReadDoc[]) => docs.map((d) => d._id);

/** Asks for the lease until `holder` has it; fails after `withinMs`. */
export async function takenWithin(store: ReadModelStore, lease: string, holder: string, ttlMs: number, withinMs: number) {
  const started = Date.now();
  for (;;) {
    const taken = await store.acquireLease(lease, holder, ttlMs);
    if (taken.holder === holder) return { lease: taken, afterMs: Date.now() - started };
    if (Date.now() - started > withinMs) throw new Error(`${holder} did not get ${lease} within ${withinMs} ms (held by ${taken.holder})`);
    await new Promise((resolve) => setImmediate(resolve));
  }
}

/**
 * The behaviour every ReadModelStore adapter must have. Every test uses its own collections and
 * projections, so the suite also runs against a shared server.
 */
export function readModelStoreContract(name: string, open: () => Promise<ReadModelStore>): void {
  describe(`ReadModelStore contract: ${name}`, function () {
    let store: ReadModelStore;
    let coll: string;
    let projection: string;

    beforeEach(async function () {
      store = await open();
      coll = uniqueName('docs');
      projection = uniqueName('proj');
    });
    afterEach(async function () {
      await store.drop(coll);
      await store.resetCheckpoint(projection);
      await store.close();
    });

    const commit = (position: number, ...writes: ReadWrite[]) => store.commit(projection, at(position), writes);

    describe('writes', function () {
      it('put stores a document that get returns with its _id and nothing internal', async function () {
        expect(await store.get(coll, 'a')).to.equal(null);
        await commit(1, { op: 'put', collection: coll, id: 'a', position: at(1), doc: { n: 1, nested: { x: 'y' }, list: [1, 2] } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 1, nested: { x: 'y' }, list: [1, 2] });
      });

      it('put replaces the whole document', async function () {
        await commit(1, { op: 'put', collection: coll, id: 'a', position: at(1), doc: { n: 1, old: true } });
        await commit(2, { op: 'put', collection: coll, id: 'a', position: at(2), doc: { n: 2 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 2 });
      });

      it('set creates a missing document and merges top-level fields into an existing one', async function () {
        await commit(1, { op: 'set', collection: coll, id: 'a', position: at(1), set: { status: 'new', count: 1 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', status: 'new', count: 1 });
        await commit(2, { op: 'set', collection: coll, id: 'a', position: at(2), set: { status: 'sold', delivery: { to: 'b1' }, gone: null } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', status: 'sold', count: 1, delivery: { to: 'b1' }, gone: null });
      });

      it('a document made by put, set or inc has none of the fields passed as undefined', async function () {
        // The inc in the same commit would find a field held as undefined and refuse it as not a number.
        const incNone = (id: string): ReadWrite => ({ op: 'inc', collection: coll, id, position: at(1, 2), inc: { none: 1 } });
        await commit(
          1,
          { op: 'put', collection: coll, id: 'p', position: at(1), doc: { a: 1, none: undefined } },
          incNone('p'),
          { op: 'set', collection: coll, id: 's', position: at(1), set: { a: 1, none: undefined } },
          incNone('s'),
          { op: 'inc', collection: coll, id: 'i', position: at(1), inc: { n: 1 }, setOnInsert: { a: 1, none: undefined } },
        );
        expect(await store.get(coll, 'p')).to.deep.equal({ _id: 'p', a: 1, none: 1 });
        expect(await store.get(coll, 's')).to.deep.equal({ _id: 's', a: 1, none: 1 });
        expect(await store.get(coll, 'i')).to.deep.equal({ _id: 'i', a: 1, n: 1 });
      });

      it('set leaves a field passed as undefined unchanged', async function () {
        await commit(1, { op: 'set', collection: coll, id: 'a', position: at(1), set: { keep: 1 } });
        await commit(2, { op: 'set', collection: coll, id: 'a', position: at(2), set: { keep: undefined, other: 2 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', keep: 1, other: 2 });
      });

      it('inc creates the document with setOnInsert, then adds (missing fields count as 0)', async function () {
        const inc = (position: number, by: Record<string, number>): ReadWrite => ({
          op: 'inc',
          collection: coll,
          id: 'bucket',
          position: at(position),
          inc: by,
          setOnInsert: { hour: '2024-01-01T10', supplier: 's1' },
        });
        await commit(1, inc(1, { received: 1, revenue_cents: 250 }));
        expect(await store.get(coll, 'bucket')).to.deep.equal({ _id: 'bucket', hour: '2024-01-01T10', supplier: 's1', received: 1, revenue_cents: 250 });
        await commit(2, inc(2, { received: 1, sold: 1, revenue_cents: -50 }));
        expect(await store.get(coll, 'bucket')).to.deep.equal({
          _id: 'bucket',
          hour: '2024-01-01T10',
          supplier: 's1',
          received: 2,
          sold: 1,
          revenue_cents: 200,
        });
      });

      it('push appends to an array field, creating the document and the field', async function () {
        await commit(1, { op: 'push', collection: coll, id: 'a', position: at(1), field: 'attempts', value: { code: 500 } });
        await commit(2, { op: 'push', collection: coll, id: 'a', position: at(2), field: 'attempts', value: { code: 200 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', attempts: [{ code: 500 }, { code: 200 }] });
      });

      it('applies several writes to one document in one commit, in order', async function () {
        await commit(
          3,
          { op: 'put', collection: coll, id: 'a', position: at(1), doc: { n: 0, tags: [] } },
          { op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 5 } },
          { op: 'push', collection: coll, id: 'a', position: at(2, 3), field: 'tags', value: 'x' },
          { op: 'set', collection: coll, id: 'a', position: at(3), set: { done: true } },
          { op: 'put', collection: coll, id: 'b', position: at(3), doc: { other: 1 } },
        );
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 5, tags: ['x'], done: true });
        expect(await store.get(coll, 'b')).to.deep.equal({ _id: 'b', other: 1 });
      });

      it('rejects an invalid collection name, field or write', async function () {
        const bad: ReadWrite[] = [
          { op: 'put', collection: 'Bad-Name', id: 'a', position: at(1), doc: {} },
          { op: 'put', collection: 'checkpoints', id: 'a', position: at(1), doc: {} },
          { op: 'set', collection: coll, id: 'a', position: at(1), set: { 'a.b': 1 } },
          { op: 'set', collection: coll, id: 'a', position: at(1), set: { $where: 1 } },
          { op: 'set', collection: coll, id: 'a', position: at(1), set: { _pos: 'x' } },
          { op: 'inc', collection: coll, id: 'a', position: at(1), inc: { n: Number.NaN } },
          { op: 'inc', collection: coll, id: 'a', position: at(1), inc: { n: 1 }, setOnInsert: { n: 0 } },
          { op: 'put', collection: coll, id: '', position: at(1), doc: {} },
          { op: 'put', collection: coll, id: 'a', position: at(-1), doc: {} },
        ];
        for (const write of bad) expect(await rejection(commit(1, write)), JSON.stringify(write)).to.be.instanceOf(TypeError);
        expect(await rejection(store.get('Bad-Name', 'a'))).to.be.instanceOf(TypeError);
        expect(await store.checkpoint(projection)).to.equal(null);
      });

      it('rejects inc on a field holding a non-number and push on a non-array, without moving the checkpoint', async function () {
        await commit(1, { op: 'put', collection: coll, id: 'a', position: at(1), doc: { n: 'five', list: 'nope' } });
        const inc = await rejection(commit(2, { op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 1 } }));
        expect(inc).to.be.instanceOf(Error);
        const push = await rejection(commit(2, { op: 'push', collection: coll, id: 'a', position: at(2), field: 'list', value: 1 }));
        expect(push).to.be.instanceOf(Error);
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 'five', list: 'nope' });
      });
    });

    describe('the position guard', function () {
      it('applying the same commit twice changes nothing the second time', async function () {
        const writes: ReadWrite[] = [
          { op: 'inc', collection: coll, id: 'a', position: at(5), inc: { n: 1 }, setOnInsert: { kind: 'x' } },
          { op: 'push', collection: coll, id: 'a', position: at(6), field: 'log', value: 'six' },
          { op: 'put', collection: coll, id: 'b', position: at(6), doc: { v: 1 } },
          { op: 'set', collection: coll, id: 'c', position: at(7), set: { v: 2 } },
        ];
        await store.commit(projection, at(7), writes);
        const first = [await store.get(coll, 'a'), await store.get(coll, 'b'), await store.get(coll, 'c')];
        await store.commit(projection, at(7), writes);
        expect([await store.get(coll, 'a'), await store.get(coll, 'b'), await store.get(coll, 'c')]).to.deep.equal(first);
        expect(first[0]).to.deep.equal({ _id: 'a', kind: 'x', n: 1, log: ['six'] });
      });

      it('ignores a write at or below the position the document has seen', async function () {
        await commit(10, { op: 'put', collection: coll, id: 'a', position: at(10, 4), doc: { v: 'ten' } });
        await commit(11, { op: 'put', collection: coll, id: 'a', position: at(9), doc: { v: 'nine' } });
        await commit(11, { op: 'set', collection: coll, id: 'a', position: at(10, 4), set: { v: 'same' } });
        await commit(11, { op: 'inc', collection: coll, id: 'a', position: at(10, 3), inc: { n: 1 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 'ten' });
        await commit(12, { op: 'set', collection: coll, id: 'a', position: at(10, 5), set: { v: 'newer' } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 'newer' });
      });

      it('compares positions numerically, not as text (9 < 10, 99 < 100)', async function () {
        await commit(9, { op: 'inc', collection: coll, id: 'a', position: at(9), inc: { n: 1 } });
        await commit(10, { op: 'inc', collection: coll, id: 'a', position: at(10), inc: { n: 1 } });
        await commit(100, { op: 'inc', collection: coll, id: 'a', position: at(100, 99), inc: { n: 1 } });
        await commit(100, { op: 'inc', collection: coll, id: 'a', position: at(100, 100), inc: { n: 1 } });
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 4 });
      });

      it('applies only the first of two writes to one document at the same position', async function () {
        await commit(
          1,
          { op: 'set', collection: coll, id: 'a', position: at(1), set: { v: 1 } },
          { op: 'set', collection: coll, id: 'a', position: at(1), set: { w: 2 } },
        );
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 1 });
      });
    });

    describe('checkpoints', function () {
      it('is null before the first commit, then the last committed position', async function () {
        expect(await store.checkpoint(projection)).to.equal(null);
        await store.commit(projection, at(3, 2), []);
        expect(await store.checkpoint(projection)).to.deep.equal(at(3, 2));
        await commit(8, { op: 'set', collection: coll, id: 'a', position: at(8), set: { v: 1 } });
        expect(await store.checkpoint(projection)).to.deep.equal(at(8));
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 1 });
      });

      it('keeps one checkpoint per projection', async function () {
        const other = uniqueName('proj');
        await store.commit(projection, at(5), []);
        await store.commit(other, at(7), []);
        expect(await store.checkpoint(projection)).to.deep.equal(at(5));
        expect(await store.checkpoint(other)).to.deep.equal(at(7));
        await store.resetCheckpoint(other);
      });

      it('keeps positions beyond 32 bits exactly', async function () {
        const big = at(2 ** 40 + 3, 2 ** 40 + 1);
        await store.commit(projection, big, [{ op: 'set', collection: coll, id: 'a', position: big, set: { v: 1 } }]);
        expect(await store.checkpoint(projection)).to.deep.equal(big);
      });

      it('resetCheckpoint forgets the checkpoint but not the documents', async function () {
        await commit(4, { op: 'set', collection: coll, id: 'a', position: at(4), set: { v: 1 } });
        await store.resetCheckpoint(projection);
        expect(await store.checkpoint(projection)).to.equal(null);
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 1 });
        await store.resetCheckpoint(uniqueName('never'));
      });
    });

    describe('find', function () {
      const seed = async (docs: Record<string, Record<string, unknown>>) =>
        commit(
          1,
          ...Object.entries(docs).map(([id, doc]): ReadWrite => ({ op: 'put', collection: coll, id, position: at(1), doc })),
        );

      beforeEach(async function () {
        await store.ensureIndexes(coll, [['status', 'created_at'], ['created_at'], ['delivery.status']]);
        await seed({
          a: { status: 'sold', created_at: '2024-01-03', price: 10, test: false, delivery: { status: 'ok' } },
          b: { status: 'sold', created_at: '2024-01-01', price: 25.5, test: true, delivery: { status: 'failed' } },
          c: { status: 'rejected', created_at: '2024-01-02', price: 0, test: false, buyer: null },
          d: { status: 'unsold', created_at: '2024-01-02', price: 5, test: 1 },
          e: { status: 'sold', created_at: '2024-01-05', price: '10', delivery: { status: 'ok' } },
        });
      });

      const find = (filter: Parameters<ReadModelStore['find']>[1]['filter'], direction: 'asc' | 'desc' = 'asc', field = 'created_at') =>
        store.find(coll, { filter, sort: { field, direction }, limit: 100 }).then(ids);

      it('filters by equality on strings, numbers and booleans, keeping types apart', async function () {
        expect(await find({ status: 'sold' })).to.deep.equal(['b', 'a', 'e']);
        expect(await find({ price: 10 })).to.deep.equal(['a']);
        expect(await find({ price: '10' })).to.deep.equal(['e']);
        expect(await find({ test: true })).to.deep.equal(['b']);
        expect(await find({ test: false })).to.deep.equal(['c', 'a']);
        expect(await find({ test: 1 })).to.deep.equal(['d']);
        expect(await find({ status: 'sold', price: 10 })).to.deep.equal(['a']);
        expect(await find({ status: 'nobody' })).to.deep.equal([]);
      });

      it('matches null equality on null and on missing fields', async function () {
        expect(await find({ buyer: null })).to.deep.equal(['b', 'c', 'd', 'a', 'e']);
        expect(await find({ test: null })).to.deep.equal(['e']);
        expect(await find({ delivery: null, status: 'rejected' })).to.deep.equal(['c']);
      });

      it('filters on dotted fields', async function () {
        expect(await find({ 'delivery.status': 'ok' })).to.deep.equal(['a', 'e']);
        expect(await find({ 'delivery.status': 'failed' })).to.deep.equal(['b']);
        expect(await find({ 'delivery.status': null })).to.deep.equal(['c', 'd']);
      });

      it('filters by ranges on strings and numbers, each only within its type', async function () {
        expect(await find({ created_at: { $gte: '2024-01-02', $lt: '2024-01-05' } })).to.deep.equal(['c', 'd', 'a']);
        expect(await find({ created_at: { $lte: '2024-01-02' } })).to.deep.equal(['b', 'c', 'd']);
        expect(await find({ price: { $gte: 5, $lte: 10 } })).to.deep.equal(['d', 'a']);
        expect(await find({ price: { $lt: 1000 } })).to.deep.equal(['b', 'c', 'd', 'a']);
        expect(await find({ price: { $lt: 'zzz' } })).to.deep.equal(['e']);
        expect(await find({ created_at: { $gte: '2024-01-02', $lt: undefined } })).to.deep.equal(['c', 'd', 'a', 'e']);
      });

      it('filters by $in over mixed values, including null', async function () {
        expect(await find({ status: { $in: ['rejected', 'unsold'] } })).to.deep.equal(['c', 'd']);
        expect(await find({ price: { $in: [0, '10', 99] } })).to.deep.equal(['c', 'e']);
        expect(await find({ buyer: { $in: [null] }, status: 'sold' })).to.deep.equal(['b', 'a', 'e']);
        expect(await find({ test: { $in: [true, 1] } })).to.deep.equal(['b', 'd']);
        expect(await find({ status: { $in: [] } })).to.deep.equal([]);
      });

      it('filters and sorts on _id', async function () {
        expect(await find({ _id: 'c' })).to.deep.equal(['c']);
        expect(await find({ _id: { $in: ['a', 'e', 'zz'] } }, 'desc', '_id')).to.deep.equal(['e', 'a']);
        expect(await find({ _id: { $gte: 'b', $lt: 'd' } }, 'asc', '_id')).to.deep.equal(['b', 'c']);
        const page = await store.find(coll, { sort: { field: '_id', direction: 'desc' }, after: { value: 'c', id: 'c' }, limit: 10 });
        expect(ids(page)).to.deep.equal(['b', 'a']);
      });

      it('sorts ascending and descending with ties broken by _id in the same direction', async function () {
        expect(await find(undefined, 'asc')).to.deep.equal(['b', 'c', 'd', 'a', 'e']);
        expect(await find(undefined, 'desc')).to.deep.equal(['e', 'a', 'd', 'c', 'b']);
        expect(await find({ price: { $gte: 0 } }, 'desc', 'price')).to.deep.equal(['b', 'a', 'd', 'c']);
      });

      it('returns documents without internal fields and honours the limit', async function () {
        const docs = await store.find(coll, { filter: { status: 'sold' }, sort: { field: 'created_at', direction: 'asc' }, limit: 2 });
        expect(docs).to.deep.equal([
          { _id: 'b', status: 'sold', created_at: '2024-01-01', price: 25.5, test: true, delivery: { status: 'failed' } },
          { _id: 'a', status: 'sold', created_at: '2024-01-03', price: 10, test: false, delivery: { status: 'ok' } },
        ]);
        expect(await store.find(coll, { sort: { field: 'created_at', direction: 'asc' }, limit: 0 })).to.deep.equal([]);
      });

      it('returns nothing from a collection that does not exist', async function () {
        const none = uniqueName('none');
        expect(await store.find(none, { filter: { a: 1 }, sort: { field: 'a', direction: 'asc' }, limit: 5 })).to.deep.equal([]);
        expect(await store.get(none, 'a')).to.equal(null);
      });

      it('rejects invalid field names and operators', async function () {
        const sort = { field: 'created_at', direction: 'asc' } as const;
        for (const filter of [{ '$where': 'x' }, { 'a..b': 1 }, { "a') OR 1=1 --": 1 }, { _pos: 'x' }, { a: { $ne: 1 } }, { a: { x: 1 } }, { a: [1] }]) {
          expect(await rejection(store.find(coll, { filter: filter as never, sort, limit: 5 })), JSON.stringify(filter)).to.be.instanceOf(TypeError);
        }
        expect(await rejection(store.find(coll, { sort: { field: 'bad field', direction: 'asc' }, limit: 5 }))).to.be.instanceOf(TypeError);
        expect(await rejection(store.find(coll, { sort, limit: -1 }))).to.be.instanceOf(TypeError);
      });

      it('binds values rather than splicing them into a query', async function () {
        const nasty = `x' OR '1'='1`;
        await seed({ n: { status: nasty, created_at: '2024-02-01' } });
        expect(await find({ status: nasty })).to.deep.equal(['n']);
        expect(await find({ status: `' OR 1=1 --` })).to.deep.equal([]);
      });
    });

    describe('keyset pagination', function () {
      // 25 documents over 8 distinct sort values, so that pages split inside runs of ties.
      beforeEach(async function () {
        const writes: ReadWrite[] = [];
        for (let i = 0; i < 25; i++) {
          writes.push({ op: 'put', collection: coll, id: `doc${String(i).padStart(2, '0')}`, position: at(1), doc: { rank: i % 8, group: i % 2 === 0 ? 'even' : 'odd' } });
        }
        await store.ensureIndexes(coll, [['rank'], ['group', 'rank']]);
        await store.commit(projection, at(1), writes);
      });

      const expected = async (direction: 'asc' | 'desc', filter?: Record<string, string>) => {
        const all = await store.find(coll, { ...(filter ? { filter } : {}), sort: { field: 'rank', direction }, limit: 1000 });
        return all;
      };

      for (const direction of ['asc', 'desc'] as const) {
        it(`pages of 10 (${direction}) return every document exactly once, in order`, async function () {
          const pages: ReadDoc[][] = [];
          let after: { value: number; id: string } | undefined;
          for (;;) {
            const page = await store.find(coll, { sort: { field: 'rank', direction }, ...(after ? { after } : {}), limit: 10 });
            if (page.length === 0) break;
            pages.push(page);
            const last = page[page.length - 1]!;
            after = { value: last.rank as number, id: last._id };
          }
          expect(pages.map((p) => p.length)).to.deep.equal([10, 10, 5]);
          const seen = pages.flat();
          expect(new Set(ids(seen)).size).to.equal(25);
          expect(ids(seen)).to.deep.equal(ids(await expected(direction)));
          const sign = direction === 'asc' ? 1 : -1;
          for (let i = 1; i < seen.length; i++) {
            const [prev, cur] = [seen[i - 1]!, seen[i]!];
            const order = Math.sign((cur.rank as number) - (prev.rank as number)) || (cur._id > prev._id ? 1 : -1);
            expect(order, `${prev._id} then ${cur._id}`).to.equal(sign);
          }
        });
      }

      it('pages within a filter', async function () {
        const seen: string[] = [];
        let after: { value: number; id: string } | undefined;
        for (let guard = 0; guard < 10; guard++) {
          const page = await store.find(coll, { filter: { group: 'odd' }, sort: { field: 'rank', direction: 'desc' }, ...(after ? { after } : {}), limit: 5 });
          if (page.length === 0) break;
          seen.push(...ids(page));
          const last = page[page.length - 1]!;
          after = { value: last.rank as number, id: last._id };
        }
        expect(seen).to.have.length(12);
        expect(seen).to.deep.equal(ids(await expected('desc', { group: 'odd' })));
      });

      it('descending, documents without the sort field come last and are not lost across pages', async function () {
        await commit(2, { op: 'put', collection: coll, id: 'norank', position: at(2), doc: { group: 'odd' } });
        const first = await store.find(coll, { filter: { group: 'odd' }, sort: { field: 'rank', direction: 'desc' }, limit: 12 });
        const last = first[first.length - 1]!;
        const rest = await store.find(coll, {
          filter: { group: 'odd' },
          sort: { field: 'rank', direction: 'desc' },
          after: { value: last.rank as number, id: last._id },
          limit: 12,
        });
        expect(ids(rest)).to.deep.equal(['norank']);
      });

      it('descending, a page that runs past the last value goes on into the documents without the field, by id', async function () {
        await commit(
          2,
          ...['nr1', 'nr3', 'nr2'].map((id): ReadWrite => ({ op: 'put', collection: coll, id, position: at(2), doc: { group: 'odd', rank: null } })),
          { op: 'put', collection: coll, id: 'nr0', position: at(2), doc: { group: 'odd' } },
        );
        const page = (after: ReadDoc, limit: number, filter: Record<string, unknown> = { group: 'odd' }) =>
          store.find(coll, { filter: filter as never, sort: { field: 'rank', direction: 'desc' }, after: { value: after.rank as number, id: after._id }, limit }).then(ids);
        const first = await store.find(coll, { filter: { group: 'odd' }, sort: { field: 'rank', direction: 'desc' }, limit: 10 });
        expect(ids(first)).to.deep.equal(['doc23', 'doc15', 'doc07', 'doc21', 'doc13', 'doc05', 'doc19', 'doc11', 'doc03', 'doc17']);
        // The cursor sits inside a run of ties (rank 1: doc17, doc09, doc01).
        expect(await page(first.at(-1)!, 4)).to.deep.equal(['doc09', 'doc01', 'nr3', 'nr2']);
        expect(await page(first.at(-1)!, 10)).to.deep.equal(['doc09', 'doc01', 'nr3', 'nr2', 'nr1', 'nr0']);
        // A filter on the sort field itself keeps out what it excludes, nulls included.
        expect(await page(first[4]!, 10, { group: 'odd', rank: { $gte: 2 } })).to.deep.equal(['doc05', 'doc19', 'doc11', 'doc03']);
      });
    });

    describe('aggregate', function () {
      // Rows of single leads as the reports keep them: an hour, a click id (sometimes none), a source.
      const docs: Record<string, Record<string, unknown>> = {
        a: { hour: '2026-11-21T01', s1: 'a', sid: 'x', n: 1, cents: 150 },
        b: { hour: '2026-11-21T05', s1: 'B', sid: 'x', n: 2 },
        c: { hour: '2026-11-21T23', s1: 'Z', sid: 'y', n: 4, cents: 25 },
        d: { hour: '2026-11-22T00', s1: null, sid: 'x', n: 8, cents: 'ten' },
        e: { hour: '2026-11-22T07', sid: 'y', n: 16 },
        f: { hour: '2026-11-22T09', s1: 'é', sid: null, n: 32 },
        g: { hour: '2026-11-23T12', s1: 'a', sid: 'y', n: 64, cents: 1 },
      };
      const DAYS = [
        { from: '2026-11-21T05', label: 'day-1' },
        { from: '2026-11-22T05', label: 'day-2' },
        { from: '2026-11-23T05', label: 'day-3' },
      ];
      beforeEach(async function () {
        await store.ensureIndexes(coll, [['s1'], ['sid', 's1']]);
        await commit(1, ...Object.entries(docs).map(([id, doc]): ReadWrite => ({ op: 'put', collection: coll, id, position: at(1), doc })));
      });

      const aggregate = (options: Partial<AggregateOptions> & Pick<AggregateOptions, 'key'>) => store.aggregate(coll, { sum: ['n', 'cents'], limit: 100, ...options });
      const flat = (groups: Group[]) => groups.map((g) => [...g.key, g.sums.n, g.sums.cents]);

      it('sums numeric fields per group, null (or missing) first, strings in code-point order', async function () {
        expect(flat(await aggregate({ key: [{ field: 's1' }] }))).to.deep.equal([
          [null, 24, 0],
          ['B', 2, 0],
          ['Z', 4, 25],
          ['a', 65, 151],
          ['é', 32, 0],
        ]);
      });

      it('groups by several parts, in key order part by part', async function () {
        expect(flat(await aggregate({ key: [{ field: 'sid' }, { field: 's1' }], filter: { hour: { $lt: '2026-11-23' } } }))).to.deep.equal([
          [null, 'é', 32, 0],
          ['x', null, 8, 0],
          ['x', 'B', 2, 0],
          ['x', 'a', 1, 150],
          ['y', null, 16, 0],
          ['y', 'Z', 4, 25],
        ]);
      });

      it('labels a field by the step its value falls in, null below the first', async function () {
        expect(flat(await aggregate({ key: [{ field: 'hour', steps: DAYS }] }))).to.deep.equal([
          [null, 1, 150],
          ['day-1', 14, 25],
          ['day-2', 48, 0],
          ['day-3', 64, 1],
        ]);
        // Labels need not ascend with their steps; groups still come in label order.
        const back = [{ from: '2026-11-21T00', label: 'q' }, { from: '2026-11-22T00', label: 'p' }, { from: '2026-11-22T08', label: 'q' }];
        expect(flat(await aggregate({ key: [{ field: 'hour', steps: back }, { field: 'sid' }] }))).to.deep.equal([
          ['p', 'x', 8, 0],
          ['p', 'y', 16, 0],
          ['q', null, 32, 0],
          ['q', 'x', 3, 150],
          ['q', 'y', 68, 26],
        ]);
      });

      it('filters first; an empty key is one group of everything, or none when nothing matches', async function () {
        expect(flat(await aggregate({ key: [{ field: 'sid' }], filter: { hour: { $gte: '2026-11-22' }, s1: { $in: ['é', 'a', null] } } }))).to.deep.equal([
          [null, 32, 0],
          ['x', 8, 0],
          ['y', 80, 1],
        ]);
        expect(flat(await aggregate({ key: [] }))).to.deep.equal([[127, 176]]);
        expect(await aggregate({ key: [], filter: { sid: 'nobody' } })).to.deep.equal([]);
        expect(await aggregate({ key: [{ field: 's1' }], limit: 0 })).to.deep.equal([]);
        expect(await store.aggregate(uniqueName('none'), { key: [{ field: 's1' }], sum: ['n'], limit: 5 })).to.deep.equal([]);
      });

      it('pages with a cursor: every group once, in order, whatever the page size', async function () {
        // Many groups share each value of the first part, and nulls come first in both parts.
        const writes: ReadWrite[] = [];
        for (let i = 0; i < 60; i++) {
          const doc = { hour: `2026-11-2${i % 3}T1${i % 10}`, s1: i % 7 === 0 ? null : `c${i % 5}`, sid: i % 4 === 0 ? null : `s${i % 6}`, n: i };
          writes.push({ op: 'put', collection: coll, id: `p${i}`, position: at(2), doc });
        }
        await commit(2, ...writes);
        for (const key of [[{ field: 's1' }, { field: 'sid' }], [{ field: 'hour', steps: DAYS }, { field: 's1' }], [{ field: 's1' }]]) {
          const all = await aggregate({ key, limit: 1000 });
          expect(all.length).to.be.above(1);
          for (const limit of [1, 2, 5]) {
            const seen: Group[] = [];
            let after: GroupValue[] | undefined;
            for (let guard = 0; guard < 500; guard++) {
              const page = await aggregate({ key, limit, ...(after ? { after } : {}) });
              expect(page.length).to.be.at.most(limit);
              if (page.length === 0) break;
              seen.push(...page);
              after = page.at(-1)!.key;
            }
            expect(seen, `${JSON.stringify(key)} by ${limit}`).to.deep.equal(all);
          }
        }
        const total = (await aggregate({ key: [{ field: 's1' }, { field: 'sid' }], limit: 1000 })).reduce((n, g) => n + g.sums.n!, 0);
        expect(total).to.equal(127 + (59 * 60) / 2);
      });

      it('rejects bad fields, steps and cursors', async function () {
        const bad: Array<Partial<AggregateOptions> & Pick<AggregateOptions, 'key'>> = [
          { key: [{ field: 'a;b' }] },
          { key: [{ field: 's1' }], sum: ['$n'] },
          { key: [{ field: 'hour', steps: [] }] },
          { key: [{ field: 'hour', steps: [{ from: 'b', label: '1' }, { from: 'a', label: '2' }] }] },
          { key: [{ field: 's1' }], after: ['a', 'b'] },
          { key: [{ field: 's1' }], after: [1 as never] },
          { key: [{ field: 's1' }], limit: -1 },
        ];
        for (const options of bad) expect(await rejection(aggregate(options)), JSON.stringify(options)).to.be.instanceOf(TypeError);
      });
    });

    describe('indexes and drop', function () {
      it('ensureIndexes is idempotent, also before the collection has documents', async function () {
        await store.ensureIndexes(coll, [['a'], ['a', 'b.c'], ['b.c', '_id']]);
        await store.ensureIndexes(coll, [['a'], ['a', 'b.c'], ['b.c', '_id']]);
        await commit(1, { op: 'put', collection: coll, id: 'x', position: at(1), doc: { a: 1, b: { c: 'z' } } });
        expect(ids(await store.find(coll, { filter: { a: 1, 'b.c': 'z' }, sort: { field: 'a', direction: 'asc' }, limit: 5 }))).to.deep.equal(['x']);
        expect(await rejection(store.ensureIndexes(coll, [[]]))).to.be.instanceOf(TypeError);
        expect(await rejection(store.ensureIndexes(coll, [['a;b']]))).to.be.instanceOf(TypeError);
      });

      it('an index on the documents where a field is set (partial) leaves every query its full answer', async function () {
        const partial = [{ fields: ['buyer', 'at'], whereSet: 'buyer' }, { fields: ['state', 'due'], whereSet: 'due' }] as const;
        await store.ensureIndexes(coll, partial);
        await store.ensureIndexes(coll, partial);
        const docs: Record<string, Record<string, unknown>> = {
          a: { buyer: 'b1', at: '3', state: 'pending', due: '2' },
          b: { buyer: null, at: '2', state: 'pending', due: null },
          c: { at: '1', state: 'pending', due: '1' },
          d: { buyer: 'b1', at: '1', state: 'done' },
          e: { buyer: 'b2', at: '4', state: 'pending', due: '3' },
        };
        await commit(1, ...Object.entries(docs).map(([id, doc]): ReadWrite => ({ op: 'put', collection: coll, id, position: at(1), doc })));
        const find = (filter: Parameters<ReadModelStore['find']>[1]['filter'], field: string) =>
          store.find(coll, { filter, sort: { field, direction: 'asc' }, limit: 10 }).then(ids);
        expect(await find({ buyer: 'b1' }, 'at')).to.deep.equal(['d', 'a']);
        expect(await find({ buyer: { $in: ['b1', 'b2'] } }, 'at')).to.deep.equal(['d', 'a', 'e']);
        // The documents left out of the index are found by the queries it does not serve.
        expect(await find({ buyer: null }, 'at')).to.deep.equal(['c', 'b']);
        expect(await find({}, 'at')).to.deep.equal(['c', 'd', 'b', 'a', 'e']);
        expect(await find({ state: 'pending', due: { $lte: '2' } }, 'due')).to.deep.equal(['c', 'a']);
        expect(await find({ state: 'pending' }, 'due')).to.deep.equal(['b', 'c', 'a', 'e']);
        // A document that gains or loses the field moves in or out of the index.
        await commit(2, { op: 'set', collection: coll, id: 'b', position: at(2), set: { buyer: 'b1' } }, { op: 'set', collection: coll, id: 'a', position: at(2), set: { buyer: null } });
        expect(await find({ buyer: 'b1' }, 'at')).to.deep.equal(['d', 'b']);
        expect(await rejection(store.ensureIndexes(coll, [{ fields: ['a'], whereSet: '_id' }]))).to.be.instanceOf(TypeError);
        expect(await rejection(store.ensureIndexes(coll, [{ fields: ['a'], whereSet: 'a;b' }]))).to.be.instanceOf(TypeError);
      });

      it('drop removes the documents and the checkpoints of the projections that wrote them', async function () {
        const bystander = uniqueName('proj');
        const otherColl = uniqueName('other');
        await store.ensureIndexes(coll, [['a']]);
        await commit(3, { op: 'put', collection: coll, id: 'x', position: at(3), doc: { a: 1 } });
        await store.commit(bystander, at(4), [{ op: 'put', collection: otherColl, id: 'y', position: at(4), doc: { a: 2 } }]);
        await store.drop(coll);
        expect(await store.get(coll, 'x')).to.equal(null);
        expect(await store.find(coll, { sort: { field: 'a', direction: 'asc' }, limit: 5 })).to.deep.equal([]);
        expect(await store.checkpoint(projection)).to.equal(null);
        expect(await store.checkpoint(bystander)).to.deep.equal(at(4));
        expect(await store.get(otherColl, 'y')).to.deep.equal({ _id: 'y', a: 2 });
        // A rebuild into the dropped collection starts clean and works as the first build did.
        await commit(3, { op: 'put', collection: coll, id: 'x', position: at(3), doc: { a: 5 } });
        expect(await store.get(coll, 'x')).to.deep.equal({ _id: 'x', a: 5 });
        await store.drop(uniqueName('never'));
        await store.drop(otherColl);
        expect(await store.checkpoint(bystander)).to.equal(null);
      });

      it('collections lists what commits and ensureIndexes made, and no longer what was dropped', async function () {
        const indexed = uniqueName('indexed');
        expect(await store.collections()).to.not.include.members([coll]);
        await commit(1, { op: 'put', collection: coll, id: 'x', position: at(1), doc: { a: 1 } });
        await store.ensureIndexes(indexed, [['a']]);
        expect(await store.collections()).to.include.members([coll, indexed]);
        await store.drop(indexed);
        const left = await store.collections();
        expect(left).to.include(coll);
        expect(left).to.not.include(indexed);
        // Only collections: never the store's own bookkeeping.
        expect(left).to.not.include('checkpoints');
      });
    });

    describe('leases', function () {
      let other: ReadModelStore;
      let lease: string;
      beforeEach(async function () {
        // A second connection, as a second process has.
        other = await open();
        lease = uniqueName('lease');
      });
      afterEach(async () => other.close());

      const commitFenced = (on: ReadModelStore, token: number, holder = 'host-a:1', n = 1) =>
        on.commit(projection, at(n), [{ op: 'put', collection: coll, id: 'x', position: at(n), doc: { by: holder, n } }], { lease, holder, token });

      it('a free lease is taken with a token and a time to live, and read back as it stands', async function () {
        expect(await store.lease(lease)).to.equal(null);
        const before = Date.now();
        const taken = await store.acquireLease(lease, 'host-a:1', 5000);
        expect(taken).to.include({ name: lease, holder: 'host-a:1' });
        expect(taken.token).to.be.a('number').and.at.least(1);
        // The store's clock: the machine's own here, the server's for MongoDB (allowed a little skew).
        expect(taken.expiresAt).to.be.within(before + 5000 - 2000, Date.now() + 5000 + 2000);
        expect(await other.lease(lease)).to.deep.equal(taken);
      });

      it('another holder cannot take a lease held in time; the holder renews it and keeps its token', async function () {
        const first = await store.acquireLease(lease, 'host-a:1', 5000);
        const refused = await other.acquireLease(lease, 'host-b:2', 5000);
        expect(refused).to.deep.equal(first);
        const renewed = await store.acquireLease(lease, 'host-a:1', 8000);
        expect(renewed.holder).to.equal('host-a:1');
        expect(renewed.token).to.equal(first.token);
        expect(renewed.expiresAt).to.be.above(first.expiresAt);
      });

      it('holders racing over two connections: exactly one takes the lease', async function () {
        const holders = Array.from({ length: 12 }, (_, i) => `host-${i}:${i}`);
        const results = await Promise.all(holders.map((holder, i) => (i % 2 === 0 ? store : other).acquireLease(lease, holder, 5000)));
        const winners = results.filter((result, i) => result.holder === holders[i]);
        expect(winners).to.have.length(1);
        expect((await store.lease(lease))!.holder).to.equal(winners[0]!.holder);
      });

      it('a lease whose time ran out passes to another holder with the next token', async function () {
        const first = await store.acquireLease(lease, 'host-a:1', 300);
        const { lease: second } = await takenWithin(other, lease, 'host-b:2', 5000, 5000);
        expect(Date.now()).to.be.at.least(first.expiresAt - 100);
        expect(second.token).to.equal(first.token + 1);
        // The first holder, asking again, finds it held by the second.
        expect((await store.acquireLease(lease, 'host-a:1', 300)).holder).to.equal('host-b:2');
      });

      it('the leases whose names begin with a prefix, each as it stands, held or given up; no other', async function () {
        const prefix = `${lease}-instance_%-`;
        await store.acquireLease(`${prefix}a`, 'host-a:1', 60_000);
        await other.acquireLease(`${prefix}b`, 'host-b:2', 60_000);
        await other.releaseLease(`${prefix}b`, 'host-b:2');
        await store.acquireLease(`${lease}-instance_x-c`, 'host-c:3', 60_000);
        const named = await other.leasesNamed(prefix);
        expect(named.map((l) => [l.name, l.holder]).sort()).to.deep.equal([
          [`${prefix}a`, 'host-a:1'],
          [`${prefix}b`, 'host-b:2'],
        ]);
        const now = Date.now();
        expect(named.find((l) => l.holder === 'host-a:1')!.expiresAt).to.be.greaterThan(now);
        expect(named.find((l) => l.holder === 'host-b:2')!.expiresAt).to.be.at.most(now);
        expect(await store.leasesNamed(`${lease}-nothing-`)).to.deep.equal([]);
      });

      it('removes the leases of a prefix that ran out before a time, and no other', async function () {
        const prefix = `${lease}-instance_%-`;
        const ranOut = await store.acquireLease(`${prefix}ran-out`, 'host-a:1', 1);
        await other.acquireLease(`${prefix}released`, 'host-b:2', 60_000);
        await other.releaseLease(`${prefix}released`, 'host-b:2');
        const held = await store.acquireLease(`${prefix}held`, 'host-c:3', 60_000);
        const elsewhere = await store.acquireLease(`${lease}-instance_x-ran-out`, 'host-d:4', 1);
        while (Date.now() <= ranOut.expiresAt) await new Promise((resolve) => setTimeout(resolve, 2));
        const names = async () => (await store.leasesNamed(`${lease}-`)).map((l) => l.name).sort();

        // Strictly before: the lease that ran out at that very time stays; the one given up (at 0) goes.
        expect(await other.removeLeasesNamed(prefix, ranOut.expiresAt)).to.equal(1);
        expect(await names()).to.deep.equal([`${prefix}held`, `${prefix}ran-out`, elsewhere.name].sort());
        expect(await other.removeLeasesNamed(prefix, Date.now())).to.equal(1);
        expect(await names()).to.deep.equal([`${prefix}held`, elsewhere.name].sort());
        // The held one is as it was, and another holder still cannot take it.
        expect(await store.lease(`${prefix}held`)).to.deep.equal(held);
        expect((await other.acquireLease(`${prefix}held`, 'host-e:5', 60_000)).holder).to.equal('host-c:3');
        // A name removed is a lease never taken: its holder, back from a pause, takes it anew.
        expect(await store.lease(`${prefix}ran-out`)).to.equal(null);
        expect((await store.acquireLease(`${prefix}ran-out`, 'host-a:1', 60_000)).holder).to.equal('host-a:1');
      });

      it('refuses to remove leases by an empty prefix or a time to come', async function () {
        await store.acquireLease(lease, 'host-a:1', 1);
        expect(await rejection(store.removeLeasesNamed('', Date.now()))).to.be.instanceOf(TypeError);
        expect(await rejection(store.removeLeasesNamed(lease, Date.now() + 60_000))).to.be.instanceOf(TypeError);
        expect(await rejection(store.removeLeasesNamed(lease, Number.NaN))).to.be.instanceOf(TypeError);
        expect(await store.lease(lease)).to.not.equal(null);
      });

      it('a released lease is free at once; only its holder can release it', async function () {
        const first = await store.acquireLease(lease, 'host-a:1', 60_000);
        await other.releaseLease(lease, 'host-b:2');
        expect((await other.acquireLease(lease, 'host-b:2', 60_000)).holder).to.equal('host-a:1');
        await store.releaseLease(lease, 'host-a:1');
        const second = await other.acquireLease(lease, 'host-b:2', 60_000);
        expect(second.holder).to.equal('host-b:2');
        expect(second.token).to.equal(first.token + 1);
      });

      it('names, holders and times to live are checked', async function () {
        expect(await rejection(store.acquireLease('', 'host-a:1', 1000))).to.be.instanceOf(TypeError);
        expect(await rejection(store.acquireLease(lease, 'has space', 1000))).to.be.instanceOf(TypeError);
        expect(await rejection(store.acquireLease(lease, 'host-a:1', 0))).to.be.instanceOf(TypeError);
        expect(await rejection(store.acquireLease(lease, 'host-a:1', 1.5))).to.be.instanceOf(TypeError);
      });

      it('a fenced commit is made while its holder holds the lease with that token', async function () {
        const taken = await store.acquireLease(lease, 'host-a:1', 60_000);
        await commitFenced(store, taken.token);
        expect(await store.get(coll, 'x')).to.deep.equal({ _id: 'x', by: 'host-a:1', n: 1 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
      });

      it("once another holder has taken the lease, the old holder's fenced commit fails and changes nothing", async function () {
        const first = await store.acquireLease(lease, 'host-a:1', 60_000);
        await commitFenced(store, first.token, 'host-a:1', 1);
        // Renewed short only after its commit, which a busy machine may delay past a short lease.
        expect((await store.acquireLease(lease, 'host-a:1', 300)).token).to.equal(first.token);
        const { lease: second } = await takenWithin(other, lease, 'host-b:2', 60_000, 5000);
        await commitFenced(other, second.token, 'host-b:2', 2);
        const error = await rejection(commitFenced(store, first.token, 'host-a:1', 3));
        expect(error).to.be.instanceOf(LeaseLostError);
        expect(error.message).to.not.include(coll);
        expect(await store.get(coll, 'x')).to.deep.equal({ _id: 'x', by: 'host-b:2', n: 2 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(2));
        // Nor does the holder's own name with the new token pass for an old one's.
        expect(await rejection(commitFenced(store, second.token, 'host-a:1', 4))).to.be.instanceOf(LeaseLostError);
      });

      it('a fenced commit fails once the lease has run out, even before anyone takes it', async function () {
        const taken = await store.acquireLease(lease, 'host-a:1', 200);
        // Until the store's own expiry has passed, with the margin a MongoDB server's clock may be off by.
        while (Date.now() < taken.expiresAt + 500) await new Promise((resolve) => setTimeout(resolve, 20));
        expect(await rejection(commitFenced(store, taken.token))).to.be.instanceOf(LeaseLostError);
        expect(await store.get(coll, 'x')).to.equal(null);
        expect(await store.checkpoint(projection)).to.equal(null);
      });
    });
  });
}

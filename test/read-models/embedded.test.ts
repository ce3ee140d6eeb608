import Database from 'better-sqlite3';
import { expect } from 'chai';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Position } from '../../src/event-store/port.js';
import { READ_MODELS_FILE } from '../../src/read-models/embedded-schema.js';
import { deliveriesProjection, leadsProjection, reportsProjection } from '../../src/projections/projections.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { LeaseLostError, ReadModelUnavailableError, type ReadWrite } from '../../src/read-models/port.js';
import { aggregateSql, findSql, indexedFields, leadingValuesSql, walksLeadingField } from '../../src/read-models/sqlite-query.js';
import { tempDir } from '../support/tmp.js';
import { readModelStoreContract, takenWithin, uniqueName } from './contract.js';
import { rejection } from '../support/rejection.js';

const at = (commit: number, prepare = commit): Position => ({ commit, prepare });

describe('embedded read-model store (SQLite)', function () {
  const dir = tempDir('readmodels');
  after(() => dir.remove());

  readModelStoreContract('embedded SQLite', async () => EmbeddedReadModelStore.open(dir.path));
  readModelStoreContract('embedded SQLite, commits on their own thread', async () => EmbeddedReadModelStore.open(dir.path, { commitThread: true }));
  readModelStoreContract('embedded SQLite, reports on a reader thread', async () => EmbeddedReadModelStore.open(dir.path, { readerThread: true }));
  readModelStoreContract('embedded SQLite, commits on their own thread, other processes writing too', async () =>
    EmbeddedReadModelStore.open(dir.path, { commitThread: true, othersMayWrite: true }),
  );

  describe('embedded only', function () {
    let store: EmbeddedReadModelStore;
    let coll: string;
    let projection: string;
    beforeEach(function () {
      store = EmbeddedReadModelStore.open(dir.path);
      coll = uniqueName('docs');
      projection = uniqueName('proj');
    });
    afterEach(async function () {
      await store.close();
    });

    describe('a commit is one transaction', function () {
      beforeEach(async function () {
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'kept', position: at(1), doc: { v: 1 } }]);
      });

      it('a write that cannot be stored leaves neither the earlier writes nor the checkpoint', async function () {
        const writes: ReadWrite[] = [
          { op: 'set', collection: coll, id: 'kept', position: at(2), set: { v: 2 } },
          { op: 'put', collection: coll, id: 'new', position: at(2), doc: { v: 2 } },
          // JSON cannot hold a bigint: the commit fails while storing, after the rows above were written.
          { op: 'put', collection: coll, id: 'bad', position: at(2), doc: { v: 10n } },
        ];
        expect(await rejection(store.commit(projection, at(2), writes))).to.be.instanceOf(TypeError);
        expect(await store.get(coll, 'kept')).to.deep.equal({ _id: 'kept', v: 1 });
        expect(await store.get(coll, 'new')).to.equal(null);
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
      });

      it('an inc on a string made earlier in the same commit fails the whole commit', async function () {
        const writes: ReadWrite[] = [
          { op: 'put', collection: coll, id: 'other', position: at(2), doc: { v: 2 } },
          { op: 'set', collection: coll, id: 'kept', position: at(2), set: { n: 'text' } },
          { op: 'inc', collection: coll, id: 'kept', position: at(3), inc: { n: 1 } },
        ];
        expect(await rejection(store.commit(projection, at(3), writes))).to.be.instanceOf(TypeError);
        expect(await store.get(coll, 'other')).to.equal(null);
        expect(await store.get(coll, 'kept')).to.deep.equal({ _id: 'kept', v: 1 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
      });

      it('a write to an invalid collection fails the whole commit', async function () {
        const writes: ReadWrite[] = [
          { op: 'set', collection: coll, id: 'kept', position: at(2), set: { v: 2 } },
          { op: 'set', collection: 'no way', id: 'x', position: at(2), set: { v: 2 } },
        ];
        expect(await rejection(store.commit(projection, at(2), writes))).to.be.instanceOf(TypeError);
        expect(await store.get(coll, 'kept')).to.deep.equal({ _id: 'kept', v: 1 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
      });

      it('a table created by a failed commit is rolled back, and the next commit creates it again', async function () {
        const fresh = uniqueName('fresh');
        const failing: ReadWrite[] = [
          { op: 'put', collection: fresh, id: 'a', position: at(2), doc: { v: 1 } },
          { op: 'put', collection: fresh, id: 'b', position: at(2), doc: { v: 1n } },
        ];
        await rejection(store.commit(projection, at(2), failing));
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        expect(raw.prepare(`SELECT name FROM sqlite_master WHERE name = ?`).get(`rm_${fresh}`)).to.equal(undefined);
        raw.close();
        await store.commit(projection, at(2), [{ op: 'put', collection: fresh, id: 'a', position: at(2), doc: { v: 1 } }]);
        expect(await store.get(fresh, 'a')).to.deep.equal({ _id: 'a', v: 1 });
        await store.drop(fresh);
      });

      it('many writes to one document in a commit apply in order', async function () {
        const writes: ReadWrite[] = [];
        for (let i = 0; i < 5000; i++) {
          writes.push({ op: 'inc', collection: coll, id: 'counter', position: at(10 + i), inc: { n: 1 }, setOnInsert: { kind: 'c' } });
          if (i % 1000 === 0) writes.push({ op: 'push', collection: coll, id: 'counter', position: at(10 + i, 10 + i + 1), field: 'marks', value: i });
        }
        const started = Date.now();
        await store.commit(projection, at(5010), writes);
        expect(Date.now() - started).to.be.below(2000);
        expect(await store.get(coll, 'counter')).to.deep.equal({ _id: 'counter', kind: 'c', n: 5000, marks: [0, 1000, 2000, 3000, 4000] });
      });
    });

    describe('sharing the data directory', function () {
      it('a second instance reads what the first committed, and sees later commits', async function () {
        await store.ensureIndexes(coll, [['v']]);
        await store.commit(projection, at(5), [{ op: 'put', collection: coll, id: 'a', position: at(5), doc: { v: 1 } }]);
        const second = EmbeddedReadModelStore.open(dir.path);
        try {
          expect(await second.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 1 });
          expect(await second.checkpoint(projection)).to.deep.equal(at(5));
          await store.commit(projection, at(6), [{ op: 'put', collection: coll, id: 'b', position: at(6), doc: { v: 2 } }]);
          const docs = await second.find(coll, { sort: { field: 'v', direction: 'desc' }, limit: 10 });
          expect(docs.map((d) => d._id)).to.deep.equal(['b', 'a']);
        } finally {
          await second.close();
        }
      });

      it('a collection dropped by another instance is recreated by the next commit here', async function () {
        await store.commit(projection, at(5), [{ op: 'put', collection: coll, id: 'a', position: at(5), doc: { v: 1 } }]);
        const second = EmbeddedReadModelStore.open(dir.path);
        await second.drop(coll);
        await second.close();
        expect(await store.get(coll, 'a')).to.equal(null);
        await store.commit(projection, at(6), [{ op: 'put', collection: coll, id: 'b', position: at(6), doc: { v: 2 } }]);
        expect(await store.get(coll, 'b')).to.deep.equal({ _id: 'b', v: 2 });
      });
    });

    describe('storage', function () {
      it('keeps SQLite\'s default page cache unless asked for a bigger one (replay asks for 64 MiB)', async function () {
        const cacheOf = (store: EmbeddedReadModelStore) => (store as unknown as { db: Database.Database }).db.pragma('cache_size', { simple: true });
        const plain = EmbeddedReadModelStore.open(join(dir.path, 'cache-default'));
        const big = EmbeddedReadModelStore.open(join(dir.path, 'cache-big'), { cacheMiB: 64 });
        try {
          const sqliteDefault = new Database(':memory:');
          expect(cacheOf(plain)).to.equal(sqliteDefault.pragma('cache_size', { simple: true }));
          sqliteDefault.close();
          expect(cacheOf(big)).to.equal(-64 * 1024);
        } finally {
          await plain.close();
          await big.close();
        }
      });

      it('creates the data directory and its own database file in WAL mode', async function () {
        const nested = join(dir.path, 'deep', 'er');
        const own = EmbeddedReadModelStore.open(nested);
        await own.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { v: 1 } }]);
        await own.close();
        expect(existsSync(join(nested, READ_MODELS_FILE))).to.equal(true);
        const raw = new Database(join(nested, READ_MODELS_FILE), { readonly: true });
        expect(raw.pragma('journal_mode', { simple: true })).to.equal('wal');
        raw.close();
      });

      it('cannot be opened where no directory can be made: ReadModelUnavailableError with the cause', function () {
        const file = join(dir.path, 'not-a-dir');
        writeFileSync(file, 'x');
        let error: unknown;
        try {
          EmbeddedReadModelStore.open(join(file, 'data'));
        } catch (caught) {
          error = caught;
        }
        expect(error).to.be.instanceOf(ReadModelUnavailableError);
        expect((error as Error).cause).to.be.instanceOf(Error);
      });

      it('a write that cannot get the database is ReadModelUnavailableError, and the store recovers', async function () {
        const impatient = EmbeddedReadModelStore.open(dir.path, { busyTimeoutMs: 50 });
        const blocker = new Database(join(dir.path, READ_MODELS_FILE));
        try {
          blocker.exec('BEGIN IMMEDIATE');
          const error = await rejection(impatient.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { v: 1 } }]));
          expect(error).to.be.instanceOf(ReadModelUnavailableError);
          expect((error.cause as { code?: string }).code).to.match(/^SQLITE_BUSY/);
          blocker.exec('ROLLBACK');
          await impatient.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { v: 1 } }]);
          expect(await impatient.get(coll, 'a')).to.deep.equal({ _id: 'a', v: 1 });
        } finally {
          blocker.close();
          await impatient.close();
        }
      });

      it('a closed store is unavailable', async function () {
        const own = EmbeddedReadModelStore.open(dir.path);
        await own.close();
        await own.close();
        expect(await rejection(own.get(coll, 'a'))).to.be.instanceOf(ReadModelUnavailableError);
        expect(await rejection(own.commit(projection, at(1), []))).to.be.instanceOf(ReadModelUnavailableError);
      });
    });

    describe('queries', function () {
      it('binds every value as a parameter', function () {
        const [range, nulls] = findSql('rm_x', {
          filter: { status: `it's`, n: { $gte: 5, $lt: 9 }, tag: { $in: ['a', 2, null, true] }, flag: false },
          sort: { field: 'created_at', direction: 'desc' },
          after: { value: '2024-01-01', id: 'id-9' },
          limit: 10,
        });
        for (const { sql } of [range!, nulls!]) {
          expect(sql).not.to.include(`it's`);
          expect(sql).not.to.include('2024-01-01');
          expect(sql).not.to.include('id-9');
          expect(sql).to.match(/LIMIT \?$/);
        }
        expect(range!.params).to.deep.equal([`it's`, 5, 9, 'a', 2, '2024-01-01', '2024-01-01', 'id-9']);
        expect(nulls!.params).to.deep.equal([`it's`, 5, 9, 'a', 2]);
      });

      it('uses the expression indexes for filters and sorts', async function () {
        await store.ensureIndexes(coll, [['supplier', 'created_at'], ['delivery.status']]);
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc: { supplier: 's', created_at: 'x' } }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const plan = (options: Parameters<typeof findSql>[1]) => {
            const { sql, params } = findSql(`rm_${coll}`, options)[0]!;
            return (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params, 10) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
          };
          const bySupplier = plan({ filter: { supplier: 's' }, sort: { field: 'created_at', direction: 'desc' }, after: { value: 'y', id: 'b' }, limit: 10 });
          expect(bySupplier).to.include(`ix_rm_${coll}(supplier,created_at)`);
          expect(bySupplier).not.to.include('TEMP B-TREE');
          expect(plan({ filter: { 'delivery.status': 'ok' }, sort: { field: '_id', direction: 'asc' }, limit: 10 })).to.include(
            `ix_rm_${coll}(delivery.status)`,
          );
        } finally {
          raw.close();
        }
      });

      it('a partial index replaces the full index over the same fields that an earlier release made, and holds only the documents where its field is set', async function () {
        await store.ensureIndexes(coll, [['buyer', 'created_at']]);
        await store.commit(projection, at(1), [
          { op: 'put', collection: coll, id: 'a', position: at(1), doc: { buyer: 'b', created_at: 'x' } },
          { op: 'put', collection: coll, id: 'k', position: at(1), doc: { bucket: 'k', created_at: 'y' } },
        ]);
        await store.ensureIndexes(coll, [{ fields: ['buyer', 'created_at'], whereSet: 'buyer' }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const table = `rm_${coll}`;
          const indexes = raw.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND name LIKE 'ix_%'`).all(table) as Array<{ name: string; sql: string }>;
          expect(indexes.map((i) => i.name)).to.deep.equal([`ix_${table}(buyer,created_at) where buyer set`]);
          expect(indexes[0]!.sql).to.match(/WHERE json_extract\(doc, '\$\.buyer'\) IS NOT NULL$/);
          // Read through the index alone: the row without a buyer is not in it.
          const inIndex = raw.prepare(`SELECT id FROM "${table}" INDEXED BY "${indexes[0]!.name}" WHERE json_extract(doc, '$.buyer') IS NOT NULL`).pluck().all();
          expect(inIndex).to.deep.equal(['a']);
        } finally {
          raw.close();
        }
      });

      it('a page of deliveries by buyer or bucket, with or without a status, is a bounded range of an index, read in order', async function () {
        await store.ensureIndexes(coll, deliveriesProjection.indexes.deliveries!);
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc: { buyer: 'b', bucket: 'k', status: 'pending', created_at: 'x' } }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const table = `rm_${coll}`;
          const plans = (options: Parameters<typeof findSql>[1]) =>
            findSql(table, options).map(({ sql, params }) => (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params, 51) as Array<{ detail: string }>).map((r) => r.detail));
          const sort = { field: 'created_at', direction: 'desc' } as const;
          const after = { value: '2024-05-01T00:00:00.000Z', id: '1234' };
          for (const field of ['buyer', 'bucket']) {
            // Each side's indexes hold only its own rows (partial), and serve its filters all the same.
            const index = (fields: string) => `ix_${table}(${fields}) where ${field} set`;
            // The first page walks the index from its newest entry; a later one starts at its cursor.
            expect(plans({ filter: { [field]: 'x' }, sort, limit: 51 }), field).to.deep.equal([[`SEARCH ${table} USING INDEX ${index(`${field},created_at`)} (<expr>=?)`]]);
            const [range, nulls] = plans({ filter: { [field]: 'x' }, sort, after, limit: 51 });
            expect(range, field).to.deep.equal([`SEARCH ${table} USING INDEX ${index(`${field},created_at`)} (<expr>=? AND <expr><?)`]);
            expect(nulls, field).to.deep.equal([`SEARCH ${table} USING INDEX ${index(`${field},created_at`)} (<expr>=? AND <expr>=?)`]);
            const [withStatus] = plans({ filter: { [field]: 'x', status: 'failed' }, sort, after, limit: 51 });
            expect(withStatus, field).to.deep.equal([`SEARCH ${table} USING INDEX ${index(`${field},status,created_at`)} (<expr>=? AND <expr>=? AND <expr><?)`]);
          }
          // The webhook worker's pages of due rows and of erasure notices, on their partial indexes.
          const due = plans({
            filter: { status: 'pending', next_attempt_at: { $lte: '2024-05-01' }, buyer: { $in: ['b', 'c'] } },
            sort: { field: 'next_attempt_at', direction: 'asc' },
            after: { value: '2024-04-01', id: '7' },
            limit: 100,
          });
          expect(due.flat().join('\n')).to.include(`USING INDEX ix_${table}(status,next_attempt_at) where next_attempt_at set`);
          expect(due.flat().join('\n')).not.to.include('TEMP B-TREE');
          const notices = plans({ filter: { notice: 'pending', notice_next_at: { $lte: '2024-05-01' } }, sort: { field: 'notice_next_at', direction: 'asc' }, limit: 100 });
          expect(notices.flat().join('\n')).to.include(`USING INDEX ix_${table}(notice,notice_next_at) where notice set`);
        } finally {
          raw.close();
        }
      });

      it('a page of leads, in each scope and by each filter of the leads list, is a range of its scope\'s index read in order', async function () {
        await store.ensureIndexes(coll, leadsProjection.indexes.leads!);
        const doc = { supplier: 's', buyer: 'b', lead_status: 'sold', code: 'SOLD', sid: 'g', received_at: 'x' };
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const table = `rm_${coll}`;
          const plan = (filter: Record<string, string>) => {
            const { sql, params } = findSql(table, { filter, sort: { field: 'received_at', direction: 'desc' }, after: { value: '2026-01-01', id: '9' }, limit: 51 })[0]!;
            return (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params, 51) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
          };
          const cases: Array<[Record<string, string>, string]> = [
            [{}, 'received_at'],
            [{ supplier: 's' }, 'supplier,received_at'],
            // A filter within a scope is applied along the scope's range, in order: no sort.
            [{ supplier: 's', lead_status: 'rejected' }, 'supplier,received_at'],
            [{ supplier: 's', code: 'INVALID' }, 'supplier,received_at'],
            [{ supplier: 's', sid: 'g' }, 'supplier,received_at'],
            [{ buyer: 'b', lead_status: 'sold' }, 'buyer,lead_status,received_at'],
            [{ lead_status: 'rejected' }, 'received_at'],
            [{ code: 'INVALID' }, 'received_at'],
            [{ sid: 'g' }, 'received_at'],
          ];
          for (const [filter, index] of cases) {
            const detail = plan(filter);
            expect(detail, JSON.stringify(filter)).to.include(`USING INDEX ix_${table}(${index})`);
            expect(detail, JSON.stringify(filter)).not.to.include('TEMP B-TREE');
          }
        } finally {
          raw.close();
        }
      });

      it('a page of groups reads along the index on the first key field, from the cursor to the end of the page', async function () {
        await store.ensureIndexes(coll, [['s1'], ['supplier', 's1']]);
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc: { supplier: 's', s1: 'c', hour: 'h' } }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const plan = ({ sql, params }: { sql: string; params: unknown[] }) =>
            (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail);
          const table = `rm_${coll}`;
          const options = { filter: { hour: { $gte: 'a', $lt: 'z' }, test: false }, key: [{ field: 's1' }, { field: 'sid' }], sum: ['n'], limit: 51 };
          const paged = { ...options, after: ['c-1', null] };
          // The distinct values ahead: in index order, no sort, stopping at the limit.
          expect(plan(leadingValuesSql(table, paged, 52))).to.deep.equal([`SEARCH ${table} USING INDEX ix_${table}(s1) (<expr>>?)`]);
          expect(plan(leadingValuesSql(table, { ...paged, filter: { ...options.filter, supplier: 's' } }, 52))).to.deep.equal([
            `SEARCH ${table} USING INDEX ix_${table}(supplier,s1) (<expr>=? AND <expr>>?)`,
          ]);
          // The groups: a bounded range of that index, also on a first page that starts with nulls.
          const window = plan(aggregateSql(table, paged, { from: 'c-1', to: 'c-9' }));
          expect(window).to.include(`SEARCH ${table} USING INDEX ix_${table}(s1) (<expr>>? AND <expr><?)`);
          expect(window.join('\n')).not.to.match(/SCAN rm_/);
          const first = plan(aggregateSql(table, options, { to: 'c-9' }));
          expect(first).to.include(`SEARCH ${table} USING INDEX ix_${table}(s1) (<expr>=?)`);
          expect(first).to.include(`SEARCH ${table} USING INDEX ix_${table}(s1) (<expr><?)`);
          expect(first.join('\n')).not.to.match(/SCAN rm_/);
        } finally {
          raw.close();
        }
      });

      it('a page of a report by s1 over the lead views walks their s1 index, not the index of the time range it is filtered on', async function () {
        // The lead views are indexed on received_at too (the leads list): read along it, a page
        // would group and sort every lead of the report's days.
        await store.ensureIndexes(coll, leadsProjection.indexes.leads!);
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc: { supplier: 's', s1: 'c', received_at: 'h', report_received: 1 } }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const table = `rm_${coll}`;
          const plan = ({ sql, params }: { sql: string; params: unknown[] }) =>
            (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
          const indexes = indexedFields(table, raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`).pluck().all(table) as string[]);
          const filter = { received_at: { $gte: '2026-10-01T00', $lt: '2026-10-31T00' }, report_received: 1, test: false };
          const options = { filter, key: [{ field: 's1' }], sum: ['report_received'], limit: 51 };
          for (const [scope, index] of [[{}, 's1'], [{ supplier: 's' }, 'supplier,s1']] as const) {
            const scoped = { ...options, filter: { ...filter, ...scope }, after: ['c-1'] };
            const walking = walksLeadingField(scoped, indexes);
            expect(walking, index).to.equal(true);
            const leading = plan(leadingValuesSql(table, scoped, 52, walking));
            expect(leading, index).to.include(`USING INDEX ix_${table}(${index})`);
            expect(leading, index).not.to.include('TEMP B-TREE');
            const groups = plan(aggregateSql(table, scoped, { from: 'c-1', to: 'c-9' }, walking));
            expect(groups, index).to.include(`USING INDEX ix_${table}(${index})`);
            expect(groups, index).not.to.include('received_at');
          }
        } finally {
          raw.close();
        }
      });

      it('a page of buckets grouped first by a field no index leads with is read along the index of its time range', async function () {
        await store.ensureIndexes(coll, reportsProjection.indexes.report_buckets!);
        await store.commit(projection, at(1), [{ op: 'put', collection: coll, id: 'a', position: at(1), doc: { supplier: 's', sid: 'g', hour: 'h' } }]);
        const raw = new Database(join(dir.path, READ_MODELS_FILE), { readonly: true });
        try {
          const table = `rm_${coll}`;
          const indexes = indexedFields(table, raw.prepare(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`).pluck().all(table) as string[]);
          const options = { filter: { hour: { $gte: '2026-10-01T00', $lt: '2026-10-31T00' }, test: false }, key: [{ field: 'sid' }], sum: ['received'], limit: 51 };
          const walking = walksLeadingField(options, indexes);
          expect(walking).to.equal(false);
          const { sql, params } = leadingValuesSql(table, options, 52, walking);
          const detail = (raw.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(...params) as Array<{ detail: string }>).map((r) => r.detail).join('\n');
          expect(detail).to.include(`USING INDEX ix_${table}(hour)`);
          // Through the store too: every group of the range.
          expect(await store.aggregate(coll, { ...options, filter: { hour: { $gte: 'a', $lt: 'z' } } })).to.deep.equal([{ key: ['g'], sums: { received: 0 } }]);
        } finally {
          raw.close();
        }
      });
    });
  });
  describe('commits on their own thread', function () {
    let coll: string;
    let projection: string;
    beforeEach(function () {
      coll = uniqueName('docs');
      projection = uniqueName('proj');
    });

    it('a commit made before the last one is stored sees that one\'s documents', async function () {
      const store = EmbeddedReadModelStore.open(dir.path, { commitThread: true });
      try {
        // Neither is awaited: the thread has not even started when the second is folded.
        const first = store.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { n: 1, kept: true } }]);
        const second = store.commit(projection, at(2), [{ op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 1 } }]);
        await Promise.all([first, second]);
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 2, kept: true });
        expect(await store.checkpoint(projection)).to.deep.equal(at(2));
      } finally {
        await store.close();
      }
    });

    it('a write that cannot be applied fails alone; one the disk refuses fails every commit sent after it, and once all are answered the store starts again from the table', async function () {
      const store = EmbeddedReadModelStore.open(dir.path, { commitThread: true, busyTimeoutMs: 20 });
      const blocker = new Database(join(dir.path, READ_MODELS_FILE));
      try {
        await store.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { n: 'text' } }]);
        // Refused while folding, before anything is sent: the thread goes on, but the projection's
        // next commit waits until it has read its checkpoint again (it would skip at(2)).
        expect(await rejection(store.commit(projection, at(2), [{ op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 1 } }]))).to.be.instanceOf(TypeError);
        expect(await rejection(store.commit(projection, at(3), [{ op: 'set', collection: coll, id: 'b', position: at(3), set: { n: 3 } }]))).to.be.instanceOf(ReadModelUnavailableError);
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
        await store.commit(projection, at(3), [{ op: 'set', collection: coll, id: 'b', position: at(3), set: { n: 3 } }]);
        // Another connection holds the write lock past the thread's busy timeout.
        blocker.exec('BEGIN IMMEDIATE');
        const refused = store.commit(projection, at(4), [{ op: 'set', collection: coll, id: 'c', position: at(4), set: { n: 4 } }]);
        const next = store.commit(projection, at(5), [{ op: 'set', collection: coll, id: 'd', position: at(5), set: { n: 5 } }]);
        expect(await rejection(refused)).to.be.instanceOf(ReadModelUnavailableError);
        blocker.exec('COMMIT');
        // The next one would have moved the checkpoint past the refused one's writes.
        expect(await rejection(next)).to.be.instanceOf(ReadModelUnavailableError);
        expect(await store.checkpoint(projection)).to.deep.equal(at(3));
        expect(await store.get(coll, 'c')).to.equal(null);
        expect(await store.get(coll, 'd')).to.equal(null);
        // Both answered: the caller commits again from its checkpoint, and the documents come from
        // the table, not from what the failed commits had sent.
        await store.commit(projection, at(4), [{ op: 'inc', collection: coll, id: 'b', position: at(4), inc: { n: 1 } }]);
        expect(await store.get(coll, 'b')).to.deep.equal({ _id: 'b', n: 4 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(4));
      } finally {
        blocker.close();
        await store.close();
      }
    });

    it('after a commit the disk refused, that projection commits nothing more until it has read its checkpoint again; another projection goes on', async function () {
      const store = EmbeddedReadModelStore.open(dir.path, { commitThread: true, busyTimeoutMs: 20 });
      const blocker = new Database(join(dir.path, READ_MODELS_FILE));
      const otherProjection = uniqueName('proj');
      const otherColl = uniqueName('docs');
      try {
        await store.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { n: 1 } }]);
        blocker.exec('BEGIN IMMEDIATE');
        const refused = store.commit(projection, at(2), [{ op: 'set', collection: coll, id: 'c', position: at(2), set: { n: 2 } }]);
        expect(await rejection(refused)).to.be.instanceOf(ReadModelUnavailableError);
        blocker.exec('COMMIT');
        // Every commit sent is answered. A flush that has not seen the failure (a timer's) makes
        // the next batch: storing it would move the checkpoint past at(2), which was never stored.
        expect(await rejection(store.commit(projection, at(3), [{ op: 'set', collection: coll, id: 'd', position: at(3), set: { n: 3 } }]))).to.be.instanceOf(
          ReadModelUnavailableError,
        );
        // A projection none of whose commits failed goes on.
        await store.commit(otherProjection, at(3), [{ op: 'set', collection: otherColl, id: 'x', position: at(3), set: { n: 3 } }]);
        expect(await store.get(otherColl, 'x')).to.deep.equal({ _id: 'x', n: 3 });
        expect(await store.get(coll, 'd')).to.equal(null);
        // The first reads its checkpoint, as a runner does to start again, and commits from there.
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
        await store.commit(projection, at(2), [{ op: 'set', collection: coll, id: 'c', position: at(2), set: { n: 2 } }]);
        expect(await store.checkpoint(projection)).to.deep.equal(at(2));
        expect(await store.get(coll, 'c')).to.deep.equal({ _id: 'c', n: 2 });
      } finally {
        blocker.close();
        await store.close();
      }
    });

    it('fenced: once the lease is lost, that commit and those sent after it fail as LeaseLostError and store nothing; with the lease taken again the next commit is stored', async function () {
      const store = EmbeddedReadModelStore.open(dir.path, { commitThread: true, othersMayWrite: true });
      const rival = EmbeddedReadModelStore.open(dir.path);
      const lease = uniqueName('lease');
      try {
        // Long enough for the first commit to be stored while it is held, on a loaded machine too
        // (the commit thread starts with it): at 300 ms a busy CI machine saw it lost already.
        const first = await store.acquireLease(lease, 'host-a:1', 1500);
        const fence = (token: number) => ({ lease, holder: 'host-a:1', token });
        await store.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { n: 1 } }], fence(first.token));
        // The lease runs out and another holder takes it; two commits are then sent without waiting.
        await takenWithin(rival, lease, 'host-b:2', 300, 10_000);
        const lost = store.commit(projection, at(2), [{ op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 1 } }], fence(first.token));
        const after = store.commit(projection, at(3), [{ op: 'inc', collection: coll, id: 'a', position: at(3), inc: { n: 10 } }], fence(first.token));
        expect(await rejection(lost)).to.be.instanceOf(LeaseLostError);
        expect(await rejection(after)).to.be.instanceOf(LeaseLostError);
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 1 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(1));
        // The rival lets it go; this store takes it back with a new token and goes on from its checkpoint.
        await rival.releaseLease(lease, 'host-b:2');
        const again = await store.acquireLease(lease, 'host-a:1', 60_000);
        expect(again.token).to.be.above(first.token);
        await store.commit(projection, at(2), [{ op: 'inc', collection: coll, id: 'a', position: at(2), inc: { n: 1 } }], fence(again.token));
        expect(await store.get(coll, 'a')).to.deep.equal({ _id: 'a', n: 2 });
        expect(await store.checkpoint(projection)).to.deep.equal(at(2));
      } finally {
        await rival.close();
        await store.close();
      }
    });

    it('othersMayWrite: a document another process wrote into a table this store first found empty is read, not taken for missing', async function () {
      const store = EmbeddedReadModelStore.open(dir.path, { commitThread: true, othersMayWrite: true });
      const other = EmbeddedReadModelStore.open(dir.path);
      try {
        await store.commit(projection, at(1), [{ op: 'set', collection: coll, id: 'a', position: at(1), set: { n: 1 } }]);
        // While another projector holds the lease, it writes a document this store never wrote.
        await other.commit(projection, at(2), [{ op: 'set', collection: coll, id: 'b', position: at(2), set: { from: 'other' } }]);
        await store.commit(projection, at(3), [{ op: 'set', collection: coll, id: 'b', position: at(3), set: { n: 3 } }]);
        expect(await store.get(coll, 'b')).to.deep.equal({ _id: 'b', from: 'other', n: 3 });
      } finally {
        await other.close();
        await store.close();
      }
    });
  });
});

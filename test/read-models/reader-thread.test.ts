import { expect } from 'chai';
import sinon from 'sinon';
import type Database from 'better-sqlite3';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import type { AggregateOptions, ReadWrite } from '../../src/read-models/port.js';
import { tempDir } from '../support/tmp.js';

// A serving process runs its reports on a reader thread: a report over a month of leads takes
// SQLite a few hundred milliseconds, and on the thread that serves HTTP every request in flight
// waited behind it. The contract suite holds the answers to be the same (embedded.test.ts); here,
// that the query is not run on the store's own connection, and that the event loop turns meanwhile.

const DOCS = 30_000;
const REPORT: AggregateOptions = { key: [{ field: 'source' }], sum: ['amount'], limit: 500 };

describe('read models: reports on a reader thread', function () {
  this.timeout(60_000);
  const dir = tempDir('reader-thread');
  after(() => dir.remove());

  before(async function () {
    const store = EmbeddedReadModelStore.open(dir.path);
    const writes: ReadWrite[] = Array.from({ length: DOCS }, (_, i) => ({
      op: 'put',
      collection: 'sales',
      id: `s${i}`,
      position: { commit: i, prepare: 0 },
      doc: { source: `src-${String(i % 5000).padStart(4, '0')}`, amount: i % 7 },
    }));
    await store.commit('sales', { commit: DOCS, prepare: 0 }, writes);
    await store.close();
  });

  /** The GROUP BY statements prepared on the store's own connection while `run` runs. */
  async function preparedHere<T>(store: EmbeddedReadModelStore, run: () => Promise<T>): Promise<{ result: T; grouped: string[] }> {
    const db = (store as unknown as { db: Database.Database }).db;
    const prepare = sinon.spy(db, 'prepare');
    try {
      const result = await run();
      return { result, grouped: prepare.args.map(([sql]) => String(sql)).filter((sql) => sql.includes('GROUP BY')) };
    } finally {
      prepare.restore();
    }
  }

  it('answers as the store itself does, without a query on its own connection, while the event loop turns', async function () {
    const plain = EmbeddedReadModelStore.open(dir.path);
    const threaded = EmbeddedReadModelStore.open(dir.path, { readerThread: true });
    try {
      const own = await preparedHere(plain, () => plain.aggregate('sales', REPORT));
      expect(own.grouped, 'the store without a reader thread groups on its own connection').to.not.be.empty;
      expect(own.result).to.have.length(500);

      let turns = 0;
      const ticking = setInterval(() => (turns += 1), 0);
      const elsewhere = await preparedHere(threaded, async () => {
        const first = await threaded.aggregate('sales', REPORT);
        // The next page, from the first one's cursor: the thread keeps the store's paging.
        const next = await threaded.aggregate('sales', { ...REPORT, after: first.at(-1)!.key });
        return [first, next] as const;
      });
      clearInterval(ticking);
      expect(elsewhere.grouped).to.deep.equal([]);
      expect(elsewhere.result[0]).to.deep.equal(own.result);
      expect(elsewhere.result[1]).to.deep.equal(await plain.aggregate('sales', { ...REPORT, after: own.result.at(-1)!.key }));
      expect(turns, 'timer turns of the event loop while the thread grouped 30,000 documents twice').to.be.greaterThan(0);
    } finally {
      await threaded.close();
      await plain.close();
    }
  });

  it('a collection that does not exist is an empty report; a closed store refuses', async function () {
    const threaded = EmbeddedReadModelStore.open(dir.path, { readerThread: true });
    expect(await threaded.aggregate('nothing_here', REPORT)).to.deep.equal([]);
    await threaded.close();
    const refused = await threaded.aggregate('sales', REPORT).then(
      () => null,
      (error: unknown) => error,
    );
    expect(refused).to.be.instanceOf(Error);
  });
});

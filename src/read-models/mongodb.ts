import { type AnyBulkWriteOperation, type ClientSession, type Collection, type Db, type Document, MongoClient, MongoServerError } from 'mongodb';
import type { Position } from '../event-store/port.js';
import {
  type LeadingWindow,
  type MongoWrite,
  aggregatePipeline,
  databaseNameFromUrl,
  findQuery,
  guardFilter,
  isDuplicateKeyError,
  isUnavailable,
  leadingQuery,
  toMongoWrite,
} from './mongo-query.js';
import {
  type AggregateOptions,
  type FindOptions,
  type Group,
  type GroupValue,
  type ReadDoc,
  type ReadModelStore,
  type ReadWrite,
  ReadModelUnavailableError,
  positionKey,
} from './port.js';
import { POSITION_FIELD, checkAggregateOptions, checkCollection, checkIndexes, checkPosition, checkProjection, checkWrite } from './validate.js';

/** A stored document: the port's fields plus the position it has seen. */
interface StoredDoc {
  _id: string;
  [field: string]: unknown;
}

interface CheckpointDoc {
  _id: string;
  commit: number;
  prepare: number;
  /** Collections the projection has written, so that dropping one of them forgets the checkpoint. */
  collections?: string[];
}

const NAMESPACE_NOT_FOUND = 26;
/** Documents per batch while walking the first key field: bounds what one getMore brings into memory. */
const LEADING_BATCH = 1000;

/** The value at a dotted path of a document, null when missing. */
function valueAt(doc: Document, path: string): unknown {
  let value: unknown = doc;
  for (const segment of path.split('.')) value = typeof value === 'object' && value !== null ? (value as Document)[segment] : undefined;
  return value ?? null;
}
const HIDE_POSITION = { projection: { [POSITION_FIELD]: 0 } };

function translate(error: unknown): unknown {
  return isUnavailable(error) ? new ReadModelUnavailableError(`MongoDB is unavailable: ${(error as Error).message}`, { cause: error }) : error;
}

export interface MongoReadModelOptions {
  /** Overrides the database in the URL's path; `leadpost` when neither names one. */
  readonly dbName?: string;
}

/**
 * Read models in MongoDB: `rm_<collection>` holds `{_id, _pos, ...fields}`, `rm_checkpoints` holds
 * `{_id: projection, commit, prepare}`. On a replica set (or mongos) a commit is one transaction;
 * a standalone server has none, so writes go one by one and the checkpoint last, and the `_pos`
 * guard on each document is what makes replaying the commit after a crash harmless.
 */
export class MongoReadModelStore implements ReadModelStore {
  private closed = false;

  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    /** Whether commits run in a transaction. */
    readonly transactional: boolean,
  ) {}

  static async connect(url: string, options: MongoReadModelOptions = {}): Promise<MongoReadModelStore> {
    // ignoreUndefined: a field set to undefined is left out, as JSON.stringify does in the embedded store.
    const client = new MongoClient(url, { ignoreUndefined: true });
    try {
      await client.connect();
      const hello = await client.db('admin').command({ hello: 1 });
      const transactional = typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
      return new MongoReadModelStore(client, client.db(options.dbName ?? databaseNameFromUrl(url) ?? 'leadpost'), transactional);
    } catch (error) {
      await client.close().catch(() => {});
      throw translate(error);
    }
  }

  commit(projection: string, checkpoint: Position, writes: readonly ReadWrite[]): Promise<void> {
    return this.run(async () => {
      checkProjection(projection);
      checkPosition(checkpoint, 'checkpoint');
      writes.forEach(checkWrite);
      if (!this.transactional) return this.commitOneByOne(projection, checkpoint, writes);
      const session = this.client.startSession();
      try {
        // The callback may run more than once (transient errors): it keeps no state between runs.
        await session.withTransaction((s) => this.commitInTransaction(s, projection, checkpoint, writes));
      } finally {
        await session.endSession();
      }
    });
  }

  checkpoint(projection: string): Promise<Position | null> {
    return this.run(async () => {
      const doc = await this.checkpoints().findOne({ _id: projection });
      return doc ? { commit: doc.commit, prepare: doc.prepare } : null;
    });
  }

  get(collection: string, id: string): Promise<ReadDoc | null> {
    return this.run(async () => (await this.collection(collection).findOne({ _id: id }, HIDE_POSITION)) as ReadDoc | null);
  }

  find(collection: string, options: FindOptions): Promise<ReadDoc[]> {
    return this.run(async () => {
      const { query, sort, limit } = findQuery(options);
      const target = this.collection(collection);
      // A limit of 0 means "no limit" to MongoDB.
      if (limit === 0) return [];
      return (await target.find(query, { ...HIDE_POSITION, sort, limit }).toArray()) as ReadDoc[];
    });
  }

  aggregate(collection: string, options: AggregateOptions): Promise<Group[]> {
    return this.run(async () => {
      checkAggregateOptions(options);
      if (options.limit === 0) return [];
      const target = this.collection(collection);
      let window: LeadingWindow | undefined;
      if (options.key[0] && !options.key[0].steps) {
        // The groups of a page lie within the next `limit + 1` values of the first field (see
        // AggregateOptions): walk that field in order, along its index, until they are found.
        const { query, sort, field } = leadingQuery(options);
        const cursor = target.find(query, { projection: { _id: 0, [field]: 1 }, sort, batchSize: LEADING_BATCH });
        let values = 0;
        let last: GroupValue | undefined;
        try {
          for await (const doc of cursor) {
            const value = valueAt(doc, field) as GroupValue;
            if (values > 0 && value === last) continue;
            values += 1;
            last = value;
            if (values > options.limit) break;
          }
        } finally {
          await cursor.close();
        }
        const from = options.after?.[0];
        window = { ...(from !== undefined ? { from } : {}), ...(values > options.limit ? { to: last! } : {}) };
      }
      const groups = await target.aggregate<Document>(aggregatePipeline(options, window), { allowDiskUse: true }).toArray();
      return groups.map((doc) => ({
        key: options.key.map((_, i) => ((doc._id as Document)[`k${i}`] ?? null) as GroupValue),
        sums: Object.fromEntries(options.sum.map((field, i) => [field, Number(doc[`s${i}`] ?? 0)])),
      }));
    });
  }

  ensureIndexes(collection: string, indexes: ReadonlyArray<readonly string[]>): Promise<void> {
    return this.run(async () => {
      const target = this.collection(collection);
      checkIndexes(indexes);
      for (const fields of indexes) {
        // `_id` last, so that ties in a sort are read in index order too.
        const keys = Object.fromEntries([...fields, '_id'].map((field) => [field, 1 as const]));
        await target.createIndex(keys);
      }
    });
  }

  collections(): Promise<string[]> {
    return this.run(async () => {
      const names = (await this.db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      return names.filter((name) => name.startsWith('rm_') && name !== 'rm_checkpoints').map((name) => name.slice('rm_'.length));
    });
  }

  drop(collection: string): Promise<void> {
    return this.run(async () => {
      // Checkpoints first: stopped in between, a replay over the old documents changes nothing,
      // whereas a kept checkpoint over an empty collection would never fill it again.
      await this.checkpoints().deleteMany({ collections: collection });
      try {
        await this.collection(collection).drop();
      } catch (error) {
        // Servers before 7.0 refuse to drop what does not exist.
        if (!(error instanceof MongoServerError && error.code === NAMESPACE_NOT_FOUND)) throw error;
      }
    });
  }

  resetCheckpoint(projection: string): Promise<void> {
    return this.run(async () => {
      await this.checkpoints().deleteOne({ _id: projection });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.client.close();
  }

  private async commitOneByOne(projection: string, checkpoint: Position, writes: readonly ReadWrite[]): Promise<void> {
    for (const write of writes) {
      const key = positionKey(write.position);
      const filter = guardFilter(write.id, key);
      const mongoWrite = toMongoWrite(write, key);
      const target = this.collection(write.collection);
      // A first collision may come from another writer inserting the document just now; once it
      // exists, a second one can only mean the document has seen this position.
      for (let attempt = 1; ; attempt++) {
        try {
          if ('replacement' in mongoWrite) await target.replaceOne(filter, mongoWrite.replacement, { upsert: true });
          else await target.updateOne(filter, mongoWrite.update, { upsert: true });
          break;
        } catch (error) {
          if (!isDuplicateKeyError(error)) throw error;
          if (attempt === 2) break;
        }
      }
    }
    await this.moveCheckpoint(projection, checkpoint, writes);
  }

  /**
   * A failed write aborts a MongoDB transaction, so the guard cannot be left to collide on `_id`
   * as it does outside one: each document's position is read first and writes it has seen are
   * skipped. A concurrent writer to the same document makes the transaction conflict and retry.
   */
  private async commitInTransaction(session: ClientSession, projection: string, checkpoint: Position, writes: readonly ReadWrite[]): Promise<void> {
    const seen = await this.positions(session, writes);
    const batches = new Map<string, Array<AnyBulkWriteOperation<StoredDoc>>>();
    for (const write of writes) {
      const key = positionKey(write.position);
      const positions = seen.get(write.collection)!;
      const position = positions.get(write.id);
      if (position !== undefined && key <= position) continue;
      positions.set(write.id, key);
      let batch = batches.get(write.collection);
      if (!batch) batches.set(write.collection, (batch = []));
      batch.push(bulkOperation(guardFilter(write.id, key), toMongoWrite(write, key)));
    }
    // Each collection's writes stay in order; writes to different collections touch different documents.
    for (const [collection, batch] of batches) await this.collection(collection).bulkWrite(batch, { session, ordered: true });
    await this.moveCheckpoint(projection, checkpoint, writes, session);
  }

  /** The `_pos` of every document the writes touch, by collection and id; missing documents are absent. */
  private async positions(session: ClientSession, writes: readonly ReadWrite[]): Promise<Map<string, Map<string, string>>> {
    const ids = new Map<string, Set<string>>();
    for (const write of writes) {
      let set = ids.get(write.collection);
      if (!set) ids.set(write.collection, (set = new Set()));
      set.add(write.id);
    }
    const seen = new Map<string, Map<string, string>>();
    for (const [collection, set] of ids) {
      const docs = await this.collection(collection)
        .find({ _id: { $in: [...set] } }, { session, projection: { [POSITION_FIELD]: 1 } })
        .toArray();
      const positions = new Map<string, string>();
      for (const doc of docs) if (typeof doc[POSITION_FIELD] === 'string') positions.set(doc._id, doc[POSITION_FIELD]);
      seen.set(collection, positions);
    }
    return seen;
  }

  private async moveCheckpoint(projection: string, checkpoint: Position, writes: readonly ReadWrite[], session?: ClientSession): Promise<void> {
    const update: Document = { $set: { commit: checkpoint.commit, prepare: checkpoint.prepare } };
    const collections = [...new Set(writes.map((w) => w.collection))];
    if (collections.length > 0) update.$addToSet = { collections: { $each: collections } };
    await this.checkpoints().updateOne({ _id: projection }, update, { upsert: true, ...(session ? { session } : {}) });
  }

  private collection(name: string): Collection<StoredDoc> {
    return this.db.collection<StoredDoc>(`rm_${checkCollection(name)}`);
  }

  private checkpoints(): Collection<CheckpointDoc> {
    return this.db.collection<CheckpointDoc>('rm_checkpoints');
  }

  private async run<T>(body: () => Promise<T>): Promise<T> {
    // Checked here rather than left to the driver, which fails differently per operation once closed.
    if (this.closed) throw new ReadModelUnavailableError('the read-model store is closed');
    try {
      return await body();
    } catch (error) {
      throw translate(error);
    }
  }
}

function bulkOperation(filter: Document, write: MongoWrite): AnyBulkWriteOperation<StoredDoc> {
  return 'replacement' in write
    ? { replaceOne: { filter, replacement: write.replacement, upsert: true } }
    : { updateOne: { filter, update: write.update, upsert: true } };
}

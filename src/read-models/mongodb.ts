import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AnyBulkWriteOperation,
  type ClientSession,
  type Collection,
  type Db,
  type Document,
  MongoBulkWriteError,
  MongoClient,
  MongoError,
  MongoServerError,
  MongoWriteConcernError,
  ReadPreference,
  type TransactionOptions,
  WriteConcern,
} from 'mongodb';
import type { Position } from '../event-store/port.js';
import {
  type LeadingWindow,
  type MongoWrite,
  aggregatePipeline,
  databaseNameFromUrl,
  findQuery,
  guardFilter,
  hostsOfUrl,
  isDuplicateKeyError,
  isUnavailable,
  leadingQuery,
  toMongoWrite,
} from './mongo-query.js';
import {
  type AggregateOptions,
  type Fence,
  type FindOptions,
  type Group,
  type GroupValue,
  type IndexSpec,
  type Lease,
  LeaseLostError,
  type ReadDoc,
  type ReadModelStore,
  type ReadWrite,
  ReadModelUnavailableError,
  indexFields,
  positionKey,
} from './port.js';
import { POSITION_FIELD, checkAggregateOptions, checkCollection, checkIndexes, checkLease, checkLeaseRemoval, checkPosition, checkProjection, checkWrite } from './validate.js';

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

/** A lease; `expires_at` is on the server's clock, which every instance shares. */
interface LeaseDoc {
  _id: string;
  holder: string;
  token: number;
  expires_at: Date;
  /** Fenced commits made under it: each writes the lease, so a takeover during one conflicts with it. */
  commits?: number;
}

const NAMESPACE_NOT_FOUND = 26;
const NAMESPACE_EXISTS = 48;
const CHECKPOINTS = 'rm_checkpoints';
const LEASES = 'rm_leases';
const DEFAULT_PRIMARY_WAIT_MS = 30_000;
/** Documents per batch while walking the first key field: bounds what one getMore brings into memory. */
const LEADING_BATCH = 1000;
/** How long a commit may take, the wait for its majority included (see inTransaction). */
const DEFAULT_COMMIT_WITHIN_MS = 10_000;

/**
 * Stated for every commit rather than taken from MONGODB_URL: a read preference other than primary
 * there would make each read in a transaction fail, and no retry could mend that. A commit is
 * majority-committed, and gives up on a majority it waits `withinMs` for: the projection then
 * tries the commit again later instead of waiting forever.
 */
const commitTransaction = (withinMs: number): TransactionOptions => ({
  readPreference: ReadPreference.primary,
  readConcern: { level: 'majority' },
  writeConcern: new WriteConcern('majority', withinMs),
});

const labelled = (error: unknown, label: string): boolean => error instanceof MongoError && error.hasErrorLabel(label);

/**
 * For reads of leases and checkpoints outside a transaction, whatever MONGODB_URL prefers: a
 * secondary's copy may be behind, and a standby would read a lease as free, or a projector resume
 * from a checkpoint older than its own.
 */
const ON_PRIMARY = { readPreference: ReadPreference.primary };

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
  /**
   * How long `connect` waits for a writable primary (a server still starting, a replica set not yet
   * initiated or still electing one) before it fails; 30 s when not given.
   */
  readonly primaryWaitMs?: number;
  /** How long a commit may take, its majority's wait included, before it fails as unavailable; 10 s when not given. */
  readonly commitWithinMs?: number;
}

/**
 * Read models in MongoDB: `rm_<collection>` holds `{_id, _pos, ...fields}`, `rm_checkpoints` holds
 * `{_id: projection, commit, prepare}`. On a replica set (or mongos) a commit is one transaction;
 * a standalone server has none, so the writes go as one ordered bulk write per collection and the
 * checkpoint last, and the `_pos` guard on each document is what makes replaying the commit after
 * a crash harmless.
 */
export class MongoReadModelStore implements ReadModelStore {
  private closed = false;
  /** Collections known to exist, so that a transaction never has to create one. */
  private readonly existing = new Set<string>();

  private constructor(
    private readonly client: MongoClient,
    private readonly db: Db,
    /** Whether commits run in a transaction. */
    readonly transactional: boolean,
    private readonly commitWithinMs: number = DEFAULT_COMMIT_WITHIN_MS,
  ) {}

  static connect(url: string, options: MongoReadModelOptions = {}): Promise<MongoReadModelStore> {
    // ignoreUndefined: a field set to undefined is left out, as JSON.stringify does in the embedded store.
    return MongoReadModelStore.open(new MongoClient(url, { ignoreUndefined: true }), url, options);
  }

  /**
   * The store over a client not yet connected (`connect` makes one from the URL): connects it and
   * waits for a writable primary. `url` names the server in messages (its credentials never).
   */
  static async open(client: MongoClient, url: string, options: MongoReadModelOptions = {}): Promise<MongoReadModelStore> {
    try {
      const hello = await waitForWritablePrimary(client, hostsOfUrl(url), options.primaryWaitMs ?? DEFAULT_PRIMARY_WAIT_MS);
      const transactional = typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
      return new MongoReadModelStore(client, client.db(options.dbName ?? databaseNameFromUrl(url) ?? 'leadpost'), transactional, options.commitWithinMs);
    } catch (error) {
      await client.close().catch(() => {});
      throw translate(error);
    }
  }

  commit(projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence?: Fence): Promise<void> {
    return this.run(async () => {
      checkProjection(projection);
      checkPosition(checkpoint, 'checkpoint');
      writes.forEach(checkWrite);
      if (fence) checkLease(fence.lease, fence.holder);
      if (!this.transactional) {
        // Without transactions the check can only come just before: a takeover in between is
        // possible, and the position guard on every write keeps what such a late commit does harmless.
        if (fence) await this.checkFence(fence);
        return this.apply(projection, checkpoint, writes);
      }
      await this.createCollections(writes);
      const session = this.client.startSession();
      try {
        // The callback may run more than once (transient errors): it keeps no state between runs.
        // The fence is written last: the lease document stays locked from that write to the commit
        // only, so the holder's own renewal never waits behind a long commit (and times out). A
        // takeover after the transaction began still conflicts with that write, and the retry then
        // finds the lease lost; a LeaseLostError aborts the transaction with everything it wrote.
        await this.inTransaction(session, async (s) => {
          await this.apply(projection, checkpoint, writes, s);
          if (fence) await this.checkFence(fence, s);
        });
      } finally {
        await session.endSession();
      }
    });
  }

  /**
   * Runs `body` in a transaction and commits it, within `commitWithinMs`. The driver's own
   * `withTransaction` commits again after a majority it waited for in vain, and again, for 120 s:
   * a projection would sit out a lost majority for two minutes before it could try again. Here a
   * transient error runs the transaction again and a commit whose outcome is unknown is tried
   * again, both only while within the bound; a majority not reached is not waited for twice. Past
   * that the error goes to the caller, unavailable: the projection commits again later, and each
   * write's position guard makes a commit that did land after all change nothing then.
   */
  private async inTransaction(session: ClientSession, body: (session: ClientSession) => Promise<void>): Promise<void> {
    const until = Date.now() + this.commitWithinMs;
    const options = commitTransaction(this.commitWithinMs);
    for (;;) {
      session.startTransaction(options);
      try {
        await body(session);
      } catch (error) {
        if (session.inTransaction()) await session.abortTransaction().catch(() => {});
        if (labelled(error, 'TransientTransactionError') && Date.now() < until) continue;
        throw error;
      }
      for (;;) {
        try {
          await session.commitTransaction();
          return;
        } catch (error) {
          const again = Date.now() < until;
          if (again && labelled(error, 'UnknownTransactionCommitResult') && !(error instanceof MongoWriteConcernError)) continue;
          if (again && labelled(error, 'TransientTransactionError')) break;
          throw error;
        }
      }
    }
  }

  acquireLease(name: string, holder: string, ttlMs: number): Promise<Lease> {
    return this.run(async () => {
      checkLease(name, holder, ttlMs);
      // One compare-and-set on the server: the filter matches only a lease this holder may take
      // (its own, or one run out), and a lease held by another makes the upsert collide on _id.
      const stillHeld = { $and: [{ $eq: ['$holder', holder] }, { $gt: ['$expires_at', '$$NOW'] }] };
      const update = [
        {
          $set: {
            // Computed from the lease as it was: a renewal in time keeps the token, a takeover the next.
            token: { $cond: [stillHeld, '$token', { $add: [{ $ifNull: ['$token', 0] }, 1] }] },
            holder: { $literal: holder },
            expires_at: { $add: ['$$NOW', ttlMs] },
          },
        },
      ];
      try {
        const taken = await this.leases().findOneAndUpdate({ _id: name, $or: [{ holder }, { $expr: { $lte: ['$expires_at', '$$NOW'] } }] }, update, {
          upsert: true,
          returnDocument: 'after',
          // Whatever MONGODB_URL asks (w=1, or a server whose default is w:1, as beside an arbiter):
          // a renewal only a primary acknowledged is lost at a failover, and one made on a primary
          // cut off from the others counts until it steps down, while a standby takes the lease on
          // the new one. An answer later than the lease's time is of no use to its holder.
          writeConcern: { w: 'majority', wtimeoutMS: ttlMs },
        });
        if (taken) return leaseOf(taken);
      } catch (error) {
        if (!isDuplicateKeyError(error)) throw error;
      }
      const current = await this.leases().findOne({ _id: name }, ON_PRIMARY);
      if (!current) throw new ReadModelUnavailableError(`the ${name} lease could be neither taken nor read`);
      return leaseOf(current);
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.run(async () => {
      checkLease(name, holder);
      // The document stays, with its token: the next holder's is still higher.
      await this.leases().updateOne({ _id: name, holder }, { $set: { expires_at: new Date(0) } });
    });
  }

  lease(name: string): Promise<Lease | null> {
    return this.run(async () => {
      const doc = await this.leases().findOne({ _id: name }, ON_PRIMARY);
      return doc ? leaseOf(doc) : null;
    });
  }

  leasesNamed(prefix: string): Promise<Lease[]> {
    return this.run(async () => {
      const docs = await this.leases().find({ _id: namedPrefix(prefix) }, ON_PRIMARY).toArray();
      return docs.map(leaseOf);
    });
  }

  removeLeasesNamed(prefix: string, ranOutBefore: number): Promise<number> {
    return this.run(async () => {
      checkLeaseRemoval(prefix, ranOutBefore);
      const { deletedCount } = await this.leases().deleteMany({ _id: namedPrefix(prefix), expires_at: { $lt: new Date(ranOutBefore) } });
      return deletedCount;
    });
  }

  checkpoint(projection: string): Promise<Position | null> {
    return this.run(async () => {
      const doc = await this.checkpoints().findOne({ _id: projection }, ON_PRIMARY);
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
        // The planner may still pick an index on a filtered field (a report's time range) and sort
        // what it finds, which is the whole range: past 100 MB a sort that may not spill to disk
        // fails, and before MongoDB 6.0 a find may not unless it says so.
        const cursor = target.find(query, { projection: { _id: 0, [field]: 1 }, sort, batchSize: LEADING_BATCH, allowDiskUse: true });
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

  ensureIndexes(collection: string, indexes: ReadonlyArray<IndexSpec>): Promise<void> {
    return this.run(async () => {
      const target = this.collection(collection);
      checkIndexes(indexes);
      // A partial index is made full here: MongoDB's planner takes a partial index only for a query
      // that repeats its filter expression, and "holds a value" (not null) is not one a query states.
      for (const fields of indexes.map(indexFields)) {
        // `_id` last, so that ties in a sort are read in index order too.
        const keys = Object.fromEntries([...fields, '_id'].map((field) => [field, 1 as const]));
        await target.createIndex(keys);
      }
      this.existing.add(target.collectionName);
    });
  }

  collections(): Promise<string[]> {
    return this.run(async () => {
      const names = (await this.db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
      return names.filter((name) => name.startsWith('rm_') && name !== CHECKPOINTS && name !== LEASES).map((name) => name.slice('rm_'.length));
    });
  }

  drop(collection: string): Promise<void> {
    return this.run(async () => {
      // Checkpoints first: stopped in between, a replay over the old documents changes nothing,
      // whereas a kept checkpoint over an empty collection would never fill it again.
      await this.checkpoints().deleteMany({ collections: collection });
      this.existing.delete(this.collection(collection).collectionName);
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

  /**
   * Creates the collections a transaction is about to write, outside it: servers before 4.4 refuse
   * to create one inside a transaction, and a cross-shard transaction still does. Once per
   * collection for the life of the store; one made meanwhile by another writer is as good.
   */
  private async createCollections(writes: readonly ReadWrite[]): Promise<void> {
    for (const name of new Set([CHECKPOINTS, ...writes.map((w) => this.collection(w.collection).collectionName)])) {
      if (this.existing.has(name)) continue;
      try {
        await this.db.createCollection(name);
      } catch (error) {
        if (!(error instanceof MongoServerError && error.code === NAMESPACE_EXISTS)) throw error;
      }
      this.existing.add(name);
    }
  }

  /**
   * Applies the writes and moves the checkpoint, in a transaction when given its session: one
   * query per collection reads the position each document has seen, the writes a document has
   * seen are skipped, and the rest go as one ordered bulk write per collection. Inside a
   * transaction a failed write would abort it, so the guard cannot be left to collide on `_id`; a
   * concurrent writer to the same document makes the transaction conflict and retry instead.
   * Outside one, every write still carries its guard, for a document moved on since it was read.
   */
  private async apply(projection: string, checkpoint: Position, writes: readonly ReadWrite[], session?: ClientSession): Promise<void> {
    const seen = await this.positions(writes, session);
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
    for (const [collection, batch] of batches) {
      const target = this.collection(collection);
      if (session) await target.bulkWrite(batch, { session, ordered: true });
      else await bulkWriteOutsideTransaction(target, batch);
    }
    await this.moveCheckpoint(projection, checkpoint, writes, session);
  }

  /** The `_pos` of every document the writes touch, by collection and id; missing documents are absent. */
  private async positions(writes: readonly ReadWrite[], session?: ClientSession): Promise<Map<string, Map<string, string>>> {
    const ids = new Map<string, Set<string>>();
    for (const write of writes) {
      let set = ids.get(write.collection);
      if (!set) ids.set(write.collection, (set = new Set()));
      set.add(write.id);
    }
    const seen = new Map<string, Map<string, string>>();
    for (const [collection, set] of ids) {
      const docs = await this.collection(collection)
        .find({ _id: { $in: [...set] } }, { ...(session ? { session } : {}), projection: { [POSITION_FIELD]: 1 } })
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

  /**
   * Refuses a commit whose holder no longer holds the lease. In a transaction it writes the lease
   * document, so that a takeover at the same moment conflicts with the commit rather than slip past it.
   */
  private async checkFence(fence: Fence, session?: ClientSession): Promise<void> {
    const filter = { _id: fence.lease, holder: fence.holder, token: fence.token, $expr: { $gt: ['$expires_at', '$$NOW'] } };
    const held = session
      ? (await this.leases().updateOne(filter, { $inc: { commits: 1 } }, { session })).matchedCount > 0
      : (await this.leases().findOne(filter, ON_PRIMARY)) !== null;
    if (!held) throw new LeaseLostError(fence);
  }

  private leases(): Collection<LeaseDoc> {
    return this.db.collection<LeaseDoc>(LEASES);
  }

  private collection(name: string): Collection<StoredDoc> {
    return this.db.collection<StoredDoc>(`rm_${checkCollection(name)}`);
  }

  private checkpoints(): Collection<CheckpointDoc> {
    return this.db.collection<CheckpointDoc>(CHECKPOINTS);
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

/** Lease ids that begin with `prefix`, taken literally. */
function namedPrefix(prefix: string): { $regex: string } {
  return { $regex: `^${prefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}` };
}

function leaseOf(doc: LeaseDoc): Lease {
  return { name: doc._id, holder: doc.holder, token: doc.token, expiresAt: doc.expires_at.getTime() };
}

function bulkOperation(filter: Document, write: MongoWrite): AnyBulkWriteOperation<StoredDoc> {
  return 'replacement' in write
    ? { replaceOne: { filter, replacement: write.replacement, upsert: true } }
    : { updateOne: { filter, update: write.update, upsert: true } };
}

/**
 * An ordered bulk write of guarded upserts outside a transaction. One that collides on `_id` found
 * the document past its position: another writer moved it on after its position was read, or
 * inserted it just then. The write is sent again, with the ones after it (the server stopped at
 * it): a second collision means the document has seen its position, and the write is skipped.
 */
async function bulkWriteOutsideTransaction(target: Collection<StoredDoc>, operations: Array<AnyBulkWriteOperation<StoredDoc>>): Promise<void> {
  let from = 0;
  let collided = -1;
  while (from < operations.length) {
    try {
      await target.bulkWrite(from === 0 ? operations : operations.slice(from), { ordered: true });
      return;
    } catch (error) {
      const index = duplicateKeyIndex(error);
      if (index === undefined) throw error;
      const at = from + index;
      from = at === collided ? at + 1 : at;
      collided = at;
    }
  }
}

/** The index of the write an ordered bulk write stopped at on an `_id` collision, if that is why it stopped. */
function duplicateKeyIndex(error: unknown): number | undefined {
  if (!(error instanceof MongoBulkWriteError)) return undefined;
  const first = [error.writeErrors].flat()[0];
  return first && isDuplicateKeyError(first.err) ? first.index : undefined;
}

/** What a `hello` says about why it is not a writable primary, for the message of a connect that gave up. */
function notPrimary(hello: Document): string {
  if (hello.isreplicaset === true && typeof hello.setName !== 'string') return 'its replica set is not initiated';
  if (hello.secondary === true) return 'it answers as a secondary';
  return 'it has no writable primary';
}

/**
 * The `hello` of a writable primary. Whether commits run in transactions is decided from it once,
 * for the life of the store, so a replica set that has no primary yet (not initiated, it answers
 * without a set name, like a standalone server) must not be taken for one: connect waits, with
 * backoff (100 ms doubling to 2 s), while the server is unavailable or answers without a writable
 * primary, and gives up after `waitMs` naming the server (not its credentials).
 */
async function waitForWritablePrimary(client: MongoClient, hosts: string, waitMs: number): Promise<Document> {
  const deadline = Date.now() + waitMs;
  let delay = 100;
  for (;;) {
    let reason: string;
    let cause: unknown;
    try {
      await client.connect();
      const hello = await client.db('admin').command({ hello: 1 });
      if (hello.isWritablePrimary === true) return hello;
      reason = notPrimary(hello);
    } catch (error) {
      if (!isUnavailable(error)) throw error;
      reason = (error as Error).message;
      cause = error;
    }
    const left = deadline - Date.now();
    if (left <= 0) {
      const message = `MongoDB at ${hosts} has no writable primary after ${Math.round(waitMs / 100) / 10} s: ${reason}`;
      throw new ReadModelUnavailableError(message, cause === undefined ? undefined : { cause });
    }
    await sleep(Math.min(delay, left));
    delay = Math.min(delay * 2, 2_000);
  }
}

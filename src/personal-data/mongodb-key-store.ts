import { Binary, type Collection, type CollectionOptions, type Db, MongoBulkWriteError, MongoClient, ReadPreference } from 'mongodb';
import { EventStoreUnavailableError } from '../event-store/port.js';
import { databaseNameFromUrl, isDuplicateKeyError, isUnavailable } from '../read-models/mongo-query.js';
import { type DataKeyStore, KeyIdTakenError, type RewrapCounts, type StoredKey, type WrappedEntry, checkKeyIds } from './key-store.js';

// The key store on MongoDB (with MONGODB_URL): a `data_keys` collection beside the read models.
// A destroyed key's document keeps only its id and when it was destroyed (the tombstone), so its
// id is never stored again. Writes wait for the majority and the journal: a key is durable before
// the events that need it.

interface DataKeyDoc {
  _id: string;
  /** The wrapped key; absent once destroyed. */
  wrapped?: Binary;
  created_at: Date;
  destroyed_at?: Date;
}

interface SecretDoc {
  _id: string;
  value: Binary;
}

/**
 * Whatever MONGODB_URL (the read models' too) asks for: reads go to the primary, so a key just
 * stored is never looked for on a secondary that has not got it yet; writes wait for the majority
 * and the journal, and give up after 10 s, so a lost majority fails a lead's post (503) instead of
 * holding it.
 */
const ON_PRIMARY_DURABLY: CollectionOptions = {
  readPreference: ReadPreference.primary,
  writeConcern: { w: 'majority', journal: true, wtimeoutMS: 10_000 },
};

/** The key store's collections, with ON_PRIMARY_DURABLY whatever the client's own options. */
export function keyStoreCollections(db: Db): { keys: Collection<DataKeyDoc>; secrets: Collection<SecretDoc> } {
  return { keys: db.collection<DataKeyDoc>('data_keys', ON_PRIMARY_DURABLY), secrets: db.collection<SecretDoc>('key_secrets', ON_PRIMARY_DURABLY) };
}

/**
 * The ids of a batch that clashed with keys stored or destroyed, from the failure of its unordered
 * insert (every key was tried): null unless each write that failed did so on a duplicate `_id` and
 * nothing else went wrong (the server unreachable, a write concern not met), as the batch then
 * cannot be said to have clashed only.
 */
export function clashingKeyIds(error: unknown, ids: readonly string[]): string[] | null {
  if (!(error instanceof MongoBulkWriteError) || isUnavailable(error)) return null;
  const failed = [error.writeErrors].flat();
  if (failed.length === 0 || !failed.every(isDuplicateKeyError)) return null;
  return failed.map((write) => ids[write.index]).filter((id) => id !== undefined);
}

/** The server failing for now (unreachable, between primaries, a write concern not met in time) is an outage: a 503 for a request. */
export function keyStoreError(error: unknown): unknown {
  return isUnavailable(error) ? new EventStoreUnavailableError(`the key store is unavailable: ${(error as Error).message}`, { cause: error }) : error;
}

export class MongoKeyStore implements DataKeyStore {
  private constructor(
    private readonly client: MongoClient,
    private readonly keys: Collection<DataKeyDoc>,
    private readonly secrets: Collection<SecretDoc>,
  ) {}

  static async connect(url: string, options: { dbName?: string } = {}): Promise<MongoKeyStore> {
    const client = new MongoClient(url, { ignoreUndefined: true });
    try {
      await client.connect();
      const { keys, secrets } = keyStoreCollections(client.db(options.dbName ?? databaseNameFromUrl(url) ?? 'leadpost'));
      return new MongoKeyStore(client, keys, secrets);
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
  }

  async create(keys: readonly StoredKey[]): Promise<void> {
    checkKeyIds(keys.map((k) => k.id));
    if (keys.length === 0) return;
    const now = new Date();
    return outagesTranslated(async () => {
      try {
        // Unordered, so that every key is tried and a refusal names each id that clashed.
        await this.keys.insertMany(
          keys.map((key) => ({ _id: key.id, wrapped: new Binary(key.wrapped), created_at: now })),
          { ordered: false },
        );
      } catch (error) {
        const clashing = clashingKeyIds(error, keys.map((k) => k.id));
        if (clashing === null) throw error;
        const refused = new Set(clashing);
        await this.takeBack(keys.filter((key) => !refused.has(key.id)));
        throw new KeyIdTakenError(clashing);
      }
    });
  }

  /**
   * All or none, without a transaction: the keys of a refused batch were never handed out, so the
   * ones it stored are taken back, matched by their wrapped bytes too, which only this batch wrote.
   */
  private async takeBack(stored: readonly StoredKey[]): Promise<void> {
    if (stored.length === 0) return;
    await this.keys.bulkWrite(
      stored.map((key) => ({ deleteOne: { filter: { _id: key.id, wrapped: new Binary(key.wrapped) } } })),
      { ordered: false },
    );
  }

  async fetch(ids: readonly string[]): Promise<Map<string, Buffer | null>> {
    checkKeyIds(ids);
    return outagesTranslated(async () => {
      const found = new Map<string, Buffer | null>();
      for await (const doc of this.keys.find({ _id: { $in: [...ids] } })) {
        found.set(doc._id, doc.wrapped ? Buffer.from(doc.wrapped.buffer) : null);
      }
      return found;
    });
  }

  async destroy(ids: readonly string[]): Promise<void> {
    checkKeyIds(ids);
    if (ids.length === 0) return;
    const now = new Date();
    return outagesTranslated(async () => {
      await this.keys.bulkWrite(
        ids.map((id) => ({
          updateOne: {
            filter: { _id: id },
            update: { $unset: { wrapped: '' }, $setOnInsert: { created_at: now }, $min: { destroyed_at: now } },
            upsert: true,
          },
        })),
        { ordered: false },
      );
    });
  }

  async secret(name: string, candidate: Buffer): Promise<Buffer> {
    return outagesTranslated(async () => {
      await this.secrets.updateOne({ _id: name }, { $setOnInsert: { value: new Binary(candidate) } }, { upsert: true }).catch((error: unknown) => {
        // Two instances storing the first secret at once: one upsert wins, the other reads it.
        if (!isDuplicateKeyError(error)) throw error;
      });
      const doc = await this.secrets.findOne({ _id: name });
      if (!doc) throw new Error(`the secret ${name} could not be stored`);
      return Buffer.from(doc.value.buffer);
    });
  }

  async probe(write: boolean): Promise<void> {
    // Not a key id (those are hex), so no key ever matches: the delete changes nothing, but waits for
    // the primary and the majority as a key's write would.
    const filter = { _id: PROBE_ID };
    await outagesTranslated(async () => {
      if (write) await this.keys.deleteOne(filter);
      else await this.keys.findOne(filter);
    });
  }

  async rewrap(rewrap: (entry: WrappedEntry) => Buffer | undefined): Promise<RewrapCounts> {
    // No multi-document transaction: each entry is replaced only where it still holds the bytes it
    // was read with, so a key destroyed meanwhile (its bytes unset) is never written back, and a
    // run stopped part-way leaves each entry under one master key or the other, whole.
    return outagesTranslated(async () => {
      let dataKeys = 0;
      let secrets = 0;
      let writes: Array<{ _id: string; from: Binary; to: Buffer }> = [];
      const flush = async (collection: Collection<DataKeyDoc> | Collection<SecretDoc>, field: 'wrapped' | 'value') => {
        if (writes.length === 0) return 0;
        const batch = writes;
        writes = [];
        const result = await (collection as unknown as Collection<{ _id: string }>).bulkWrite(
          batch.map((w) => ({ updateOne: { filter: { _id: w._id, [field]: w.from }, update: { $set: { [field]: new Binary(w.to) } } } })),
          { ordered: false },
        );
        return result.matchedCount;
      };
      for await (const doc of this.keys.find({ wrapped: { $exists: true } }).sort({ _id: 1 })) {
        const to = rewrap({ kind: 'data key', name: doc._id, wrapped: Buffer.from(doc.wrapped!.buffer) });
        if (to !== undefined) writes.push({ _id: doc._id, from: doc.wrapped!, to });
        if (writes.length >= REWRAP_BATCH) dataKeys += await flush(this.keys, 'wrapped');
      }
      dataKeys += await flush(this.keys, 'wrapped');
      for await (const doc of this.secrets.find({}).sort({ _id: 1 })) {
        const to = rewrap({ kind: 'secret', name: doc._id, wrapped: Buffer.from(doc.value.buffer) });
        if (to !== undefined) writes.push({ _id: doc._id, from: doc.value, to });
      }
      secrets += await flush(this.secrets, 'value');
      return { dataKeys, secrets };
    });
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

/** Entries written back at a time while they are wrapped anew. */
const REWRAP_BATCH = 1000;

const PROBE_ID = 'readyz-probe';

async function outagesTranslated<T>(body: () => Promise<T>): Promise<T> {
  try {
    return await body();
  } catch (error) {
    throw keyStoreError(error);
  }
}

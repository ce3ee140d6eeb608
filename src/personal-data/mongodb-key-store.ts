import { Binary, type Collection, MongoBulkWriteError, MongoClient } from 'mongodb';
import { databaseNameFromUrl, isDuplicateKeyError } from '../read-models/mongo-query.js';
import { type DataKeyStore, KeyIdTakenError, type StoredKey, checkKeyIds } from './key-store.js';

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

const DURABLE = { writeConcern: { w: 'majority' as const, j: true } };

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
      const db = client.db(options.dbName ?? databaseNameFromUrl(url) ?? 'leadpost');
      return new MongoKeyStore(client, db.collection<DataKeyDoc>('data_keys'), db.collection<SecretDoc>('key_secrets'));
    } catch (error) {
      await client.close().catch(() => {});
      throw error;
    }
  }

  async create(keys: readonly StoredKey[]): Promise<void> {
    checkKeyIds(keys.map((k) => k.id));
    if (keys.length === 0) return;
    const now = new Date();
    try {
      await this.keys.insertMany(
        keys.map((key) => ({ _id: key.id, wrapped: new Binary(key.wrapped), created_at: now })),
        { ordered: true, ...DURABLE },
      );
    } catch (error) {
      if (!isDuplicateKeyError(error) && !(error instanceof MongoBulkWriteError && error.code === 11000)) throw error;
      // All or none, without a transaction: the keys of this batch stored before the clash were
      // never handed out, so they are taken back.
      const stored = error instanceof MongoBulkWriteError ? Object.values(error.insertedIds).map(String) : [];
      if (stored.length > 0) await this.keys.deleteMany({ _id: { $in: stored }, destroyed_at: { $exists: false } }, DURABLE);
      throw new KeyIdTakenError(keys.map((k) => k.id).filter((id) => !stored.includes(id)));
    }
  }

  async fetch(ids: readonly string[]): Promise<Map<string, Buffer | null>> {
    checkKeyIds(ids);
    const found = new Map<string, Buffer | null>();
    for await (const doc of this.keys.find({ _id: { $in: [...ids] } })) {
      found.set(doc._id, doc.wrapped ? Buffer.from(doc.wrapped.buffer) : null);
    }
    return found;
  }

  async destroy(ids: readonly string[]): Promise<void> {
    checkKeyIds(ids);
    if (ids.length === 0) return;
    const now = new Date();
    await this.keys.bulkWrite(
      ids.map((id) => ({
        updateOne: {
          filter: { _id: id },
          update: { $unset: { wrapped: '' }, $setOnInsert: { created_at: now }, $min: { destroyed_at: now } },
          upsert: true,
        },
      })),
      { ordered: false, ...DURABLE },
    );
  }

  async secret(name: string, candidate: Buffer): Promise<Buffer> {
    await this.secrets.updateOne({ _id: name }, { $setOnInsert: { value: new Binary(candidate) } }, { upsert: true, ...DURABLE }).catch((error: unknown) => {
      // Two instances storing the first secret at once: one upsert wins, the other reads it.
      if (!isDuplicateKeyError(error)) throw error;
    });
    const doc = await this.secrets.findOne({ _id: name });
    if (!doc) throw new Error(`the secret ${name} could not be stored`);
    return Buffer.from(doc.value.buffer);
  }

  async close(): Promise<void> {
    await this.client.close();
  }
}

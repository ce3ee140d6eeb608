import { randomBytes } from 'node:crypto';
import { EventStoreUnavailableError } from '../event-store/port.js';
import { TwoGenerationCache } from '../two-generation-cache.js';
import { KEY_BYTES, open, packSealed, seal, unpackSealed } from './aes-gcm.js';
import type { DataKeyStore } from './key-store.js';
import { MAX_BATCH, NONCE_BYTES, isBatchWrapped, unwrapFromBatch, wrapBatch } from './key-wrap.js';

// The data keys as the event codec uses them: a pool of keys for new leads and a cache of
// unwrapped keys for reads, so neither a post nor a hot replay reads the key store per event.
//
// The pool: keys are made and stored (durably) in batches before any of them is handed out, so a
// key is always on disk before the event that needs it, with one key-store write per batch rather
// than per lead. A crash loses at most the keys of the batch not yet used: unused keys, never a
// lead's. A key's id is its batch's random 96-bit nonce and its place in the batch (key-wrap.ts),
// so an id is never made twice (and the store refuses one it has ever had); a batch's ids are
// neighbours, which keeps the key store's inserts in one place of its index as it grows (random
// ids cost 19 µs of CPU a key to insert into a store of 500,000 keys, neighbours 1.4).
//
// The cache keeps unwrapped keys (and which ids were destroyed) in memory. Keys are only destroyed
// by an erasure, which evicts them here; another process's cache keeps a destroyed key until it
// restarts or evicts it.
//
// A key store that cannot be written or read (disk full, server down, locked by another process
// for longer than a write waits) fails the append, read or erasure that needed it as the event
// store being unavailable would: retryable, a 503 for a request.

export interface DataKey {
  /** 32 hex digits: what an encrypted field names its key by. */
  readonly id: string;
  readonly key: Buffer;
}

export interface DataKeysOptions {
  /** Keys made and stored at a time. */
  readonly batchSize?: number;
  /** Unwrapped keys kept in memory (between this many and twice as many, a few hundred bytes each). */
  readonly cacheSize?: number;
  /** Where the master key was read from: named when a key does not open with it. */
  readonly masterKeyFile?: string;
}

const DESTROYED = 'destroyed';
type Cached = DataKey | typeof DESTROYED;

/** A data key the event names is not in the key store: the wrong key store, or a lost one. */
export class UnknownDataKeyError extends Error {
  override readonly name = 'UnknownDataKeyError';
  constructor(readonly keyId: string) {
    super(`data key ${keyId} is not in the key store (was it replaced, or is it not the one these events were written with?)`);
  }
}

/** What a data key wrapped alone (AES-256-GCM, earlier releases) and a secret are bound to: their id or name. */
export const wrapAad = (id: string) => Buffer.from(`leadpost data key ${id}`, 'utf8');
export const secretAad = (name: string) => Buffer.from(`leadpost secret ${name}`, 'utf8');

/**
 * Whether `masterKey` opens one wrapped entry of a key store: a data key (by its id) or a secret
 * (by its name). For a copy of the store and a key meant to go with it, checked before either is
 * trusted (leadpost backup).
 */
export function masterKeyOpens(masterKey: Buffer, entry: { readonly dataKey: string } | { readonly secret: string }, wrapped: Buffer): boolean {
  try {
    if ('secret' in entry) open(masterKey, unpackSealed(wrapped), secretAad(entry.secret));
    else if (isBatchWrapped(wrapped)) unwrapFromBatch(masterKey, entry.dataKey, wrapped);
    else open(masterKey, unpackSealed(wrapped), wrapAad(entry.dataKey));
    return true;
  } catch {
    return false;
  }
}

export class PersonalDataKeys {
  private readonly batchSize: number;
  /** Why a key may not open: said the same way for a data key and a secret. */
  private readonly wrongMasterKey: string;
  private readonly cache: TwoGenerationCache<string, Cached>;
  private pool: DataKey[] = [];
  private refilling: Promise<void> | null = null;
  /** Ids asked for by reads in this turn of the event loop: fetched from the store together. */
  private wanted: Map<string, Array<{ resolve: (key: DataKey | null) => void; reject: (error: unknown) => void }>> | null = null;

  constructor(
    private readonly store: DataKeyStore,
    private readonly masterKey: Buffer,
    options: DataKeysOptions = {},
  ) {
    // 1,024: a batch's commit (an fsync) is shared by its keys, and a crash loses at most a batch
    // of keys no lead used.
    this.batchSize = Math.min(options.batchSize ?? 1024, MAX_BATCH);
    this.wrongMasterKey =
      `does not open with the master key${options.masterKeyFile === undefined ? '' : ` in ${options.masterKeyFile}`} (LEADPOST_MASTER_KEY_FILE is not the key it was stored with; ` +
      'after `leadpost master-key rotate` it must name the new key file that command wrote)';
    this.cache = new TwoGenerationCache(options.cacheSize ?? 10_000);
  }

  /** A key for a new lead: from memory, unless the pool is empty (then after the next batch is stored). */
  take(): DataKey | Promise<DataKey> {
    // Refilled ahead, so that posts rarely wait for a batch.
    if (this.pool.length <= this.batchSize / 4) void this.refill().catch(() => {});
    const key = this.pool.pop();
    if (key) return key;
    return this.refill().then(() => this.take());
  }

  /** The key of `id`; null when it was destroyed. Rejects with UnknownDataKeyError for an id the store never had. */
  get(id: string): DataKey | null | Promise<DataKey | null> {
    const cached = this.cache.get(id);
    if (cached !== undefined) return cached === DESTROYED ? null : cached;
    return new Promise((resolve, reject) => {
      if (!this.wanted) {
        this.wanted = new Map();
        queueMicrotask(() => void this.fetchWanted());
      }
      const waiting = this.wanted.get(id) ?? [];
      waiting.push({ resolve, reject });
      this.wanted.set(id, waiting);
    });
  }

  /** Destroys the keys, here and in the key store: what they encrypted can never be read again. */
  async destroy(ids: readonly string[]): Promise<void> {
    this.pool = this.pool.filter((key) => !ids.includes(key.id));
    try {
      await this.store.destroy(ids);
    } catch (error) {
      throw new EventStoreUnavailableError(`the key store cannot destroy data keys: ${(error as Error).message}`, { cause: error });
    }
    // Only once the store has them gone: an erasure that failed (503, to be retried) destroyed
    // nothing, and until it is retried an access request must still find what is held.
    for (const id of ids) this.cache.set(id, DESTROYED);
  }

  /** The named secret: made (32 random bytes) and stored wrapped the first time it is asked for. */
  async secret(name: string): Promise<Buffer> {
    const candidate = randomBytes(KEY_BYTES);
    const wrapped = await this.store.secret(name, packSealed(seal(this.masterKey, candidate, secretAad(name))));
    return this.unwrap(wrapped, secretAad(name), `the secret ${name}`);
  }

  /** Whether the key store answers a reader, or with `write` would take a write (see DataKeyStore.probe). */
  probe(write: boolean): Promise<void> {
    return this.store.probe(write);
  }

  close(): Promise<void> {
    return this.store.close();
  }

  private refill(): Promise<void> {
    this.refilling ??= this.makeBatch().finally(() => (this.refilling = null));
    return this.refilling;
  }

  private async makeBatch(): Promise<void> {
    // One call into the CSPRNG for the batch's nonce and keys, and one cipher for all of them.
    const random = randomBytes(NONCE_BYTES + this.batchSize * KEY_BYTES);
    const nonce = random.subarray(0, NONCE_BYTES);
    const { ids, wrapped } = wrapBatch(this.masterKey, nonce, random.subarray(NONCE_BYTES));
    const batch: DataKey[] = ids.map((id, i) => {
      const at = NONCE_BYTES + i * KEY_BYTES;
      return { id, key: Buffer.from(random.subarray(at, at + KEY_BYTES)) };
    });
    random.fill(0);
    try {
      await this.store.create(ids.map((id, i) => ({ id, wrapped: wrapped[i]! })));
    } catch (error) {
      throw new EventStoreUnavailableError(`the key store cannot store new data keys: ${(error as Error).message}`, { cause: error });
    }
    for (const key of batch) this.cache.set(key.id, key);
    this.pool.push(...batch);
  }

  private async fetchWanted(): Promise<void> {
    const wanted = this.wanted!;
    this.wanted = null;
    const ids = [...wanted.keys()];
    let found: Map<string, Buffer | null>;
    try {
      found = await this.store.fetch(ids);
    } catch (error) {
      const unavailable = new EventStoreUnavailableError(`the key store cannot be read: ${(error as Error).message}`, { cause: error });
      for (const waiting of wanted.values()) for (const w of waiting) w.reject(unavailable);
      return;
    }
    for (const [id, waiting] of wanted) {
      let outcome: { key: DataKey | null } | { error: unknown };
      const wrapped = found.get(id);
      // Destroyed here while this read was on its way: what it found is gone now.
      if (this.cache.get(id) === DESTROYED) outcome = { key: null };
      else if (wrapped === undefined) outcome = { error: new UnknownDataKeyError(id) };
      else if (wrapped === null) {
        this.cache.set(id, DESTROYED);
        outcome = { key: null };
      } else {
        try {
          const key = { id, key: this.unwrapKey(id, wrapped) };
          this.cache.set(id, key);
          outcome = { key };
        } catch (error) {
          outcome = { error };
        }
      }
      for (const w of waiting) 'key' in outcome ? w.resolve(outcome.key) : w.reject(outcome.error);
    }
  }

  private unwrapKey(id: string, wrapped: Buffer): Buffer {
    if (!isBatchWrapped(wrapped)) return this.unwrap(wrapped, wrapAad(id), `data key ${id}`);
    try {
      return unwrapFromBatch(this.masterKey, id, wrapped);
    } catch (error) {
      throw new Error(`data key ${id} ${this.wrongMasterKey}`, { cause: error });
    }
  }

  private unwrap(wrapped: Buffer, aad: Buffer, what: string): Buffer {
    try {
      return open(this.masterKey, unpackSealed(wrapped), aad);
    } catch (error) {
      throw new Error(`${what} ${this.wrongMasterKey}`, { cause: error });
    }
  }
}

// The key store: where the data keys of personal data live, apart from the event store, because
// it must be able to really delete. Events are never rewritten, so a lead's personal data is
// erased by destroying its data key (crypto-shredding); the event keeps only ciphertext that
// nothing can open any more. Keys are stored wrapped by the master key (src/personal-data/
// master-key.ts): a copy of the key store alone opens nothing.
//
// A destroyed id is remembered (a tombstone: the id and when, never the key), so that an event
// whose key was destroyed reads as erased while an id the store never had is an error (a key
// store that is not the one the events were written with), and so that a destroyed id is never
// stored again.

/** A data key as the store keeps it: its id (32 hex digits, random) and the key wrapped by the master key. */
export interface StoredKey {
  readonly id: string;
  readonly wrapped: Buffer;
}

export interface DataKeyStore {
  /**
   * Stores new keys: all or none, durable when the promise resolves. Rejects with KeyIdTakenError
   * when an id is already stored or was destroyed.
   */
  create(keys: readonly StoredKey[]): Promise<void>;
  /** The wrapped key of each id asked for that is stored; null for an id that was destroyed; an id never stored is absent. */
  fetch(ids: readonly string[]): Promise<Map<string, Buffer | null>>;
  /** Destroys the keys (idempotent: an id already destroyed, or never stored, is only remembered as destroyed). */
  destroy(ids: readonly string[]): Promise<void>;
  /** The secret stored under `name`: `candidate` when the name had none (it is stored, once), else the one stored first. */
  secret(name: string, candidate: Buffer): Promise<Buffer>;
  /**
   * Resolves once the store answers a reader, or with `write` once it would take a write (SQLite:
   * its write lock taken and let go; MongoDB: a write on the primary that matches nothing). Writes
   * and reads nothing of the keys; for /readyz.
   */
  probe(write: boolean): Promise<void>;
  /**
   * Replaces the wrapped bytes of every stored key and every secret with what `rewrap` returns for
   * them (a new master key's wrapping), leaving those it returns undefined for as they are; a
   * destroyed key stays destroyed, never stored again. The
   * embedded store does it all or none; MongoDB an entry at a time, each only if it still holds the
   * bytes `rewrap` was given, so a run that stopped part-way is finished by running it again with
   * a `rewrap` that opens either wrapping. Resolves to how many of each were written.
   */
  rewrap(rewrap: (entry: WrappedEntry) => Buffer | undefined): Promise<RewrapCounts>;
  close(): Promise<void>;
}

/** A stored key (`data key`, named by its id) or a secret (named by its name), as rewrap is given it. */
export interface WrappedEntry {
  readonly kind: 'data key' | 'secret';
  readonly name: string;
  readonly wrapped: Buffer;
}

export interface RewrapCounts {
  readonly dataKeys: number;
  readonly secrets: number;
}

export class KeyIdTakenError extends Error {
  override readonly name = 'KeyIdTakenError';
  constructor(readonly ids: readonly string[]) {
    super(`data key ids already stored or destroyed: ${ids.join(', ')}`);
  }
}

const KEY_ID = /^[0-9a-f]{32}$/;

export function checkKeyIds(ids: readonly string[]): void {
  const bad = ids.filter((id) => typeof id !== 'string' || !KEY_ID.test(id));
  if (bad.length > 0) throw new TypeError(`a data key id is 32 lower-case hex digits, not ${bad.map((id) => JSON.stringify(id)).join(', ')}`);
}

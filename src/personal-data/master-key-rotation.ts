import { timingSafeEqual } from 'node:crypto';
import { open, packSealed, seal, unpackSealed } from './aes-gcm.js';
import { secretAad, wrapAad } from './data-keys.js';
import type { DataKeyStore, RewrapCounts, WrappedEntry } from './key-store.js';
import { isBatchWrapped, unwrapFromBatch, wrapAt } from './key-wrap.js';

// Replacing the master key (after a leak, a departure, an audit's rule): every data key and secret
// of the key store is opened with the master key it was wrapped with and wrapped again with the
// new one. The keys themselves do not change, so the events, sealed with them, stay as they are.
// A key store on MongoDB is rewritten an entry at a time, so a rotation stopped part-way leaves
// some entries under each key: a run with both keys opens each with whichever fits, and finishes.

export class MasterKeyRotationError extends Error {
  override readonly name = 'MasterKeyRotationError';
}

/** How many entries of the key store open with each key. */
export interface KeySurvey {
  readonly underOld: number;
  readonly underNew: number;
  /** Entries that open with neither (named by kind and id, never anything they hold). */
  readonly neither: readonly string[];
}

/** Which key opens each entry; reads, writes nothing. */
export async function surveyKeyStore(store: DataKeyStore, oldKey: Buffer, newKey: Buffer): Promise<KeySurvey> {
  let underOld = 0;
  let underNew = 0;
  const neither: string[] = [];
  await store.rewrap((entry) => {
    const found = unwrapEither(entry, oldKey, newKey);
    if (found === undefined) neither.push(`${entry.kind} ${entry.name}`);
    else {
      found.key.fill(0);
      if (found.under === 'old') underOld++;
      else underNew++;
    }
    return undefined;
  });
  return { underOld, underNew, neither };
}

/** Wraps every key and secret of the store under `newKey`, each opened with whichever of the two keys opens it. */
export async function rotateMasterKey(store: DataKeyStore, oldKey: Buffer, newKey: Buffer): Promise<RewrapCounts> {
  if (oldKey.length === newKey.length && timingSafeEqual(oldKey, newKey)) throw new MasterKeyRotationError('the new master key is the one in use');
  return store.rewrap((entry) => {
    const found = unwrapEither(entry, oldKey, newKey);
    if (found === undefined) throw new MasterKeyRotationError(`${entry.kind} ${entry.name} opens with neither the old nor the new master key: is the key store the one these master keys go with?`);
    try {
      return wrapEntry(entry, found.key, newKey);
    } finally {
      found.key.fill(0);
    }
  });
}

function unwrapEither(entry: WrappedEntry, oldKey: Buffer, newKey: Buffer): { key: Buffer; under: 'old' | 'new' } | undefined {
  for (const [under, masterKey] of [['old', oldKey], ['new', newKey]] as const) {
    try {
      return { key: unwrapEntry(entry, masterKey), under };
    } catch {
      // Not this one: the other, or neither.
    }
  }
  return undefined;
}

function unwrapEntry(entry: WrappedEntry, masterKey: Buffer): Buffer {
  if (entry.kind === 'secret') return open(masterKey, unpackSealed(entry.wrapped), secretAad(entry.name));
  if (isBatchWrapped(entry.wrapped)) return unwrapFromBatch(masterKey, entry.name, entry.wrapped);
  return open(masterKey, unpackSealed(entry.wrapped), wrapAad(entry.name));
}

// A key wrapped in a batch stays in its batch's place (its id names it); one wrapped alone by an
// earlier release, or a secret, is sealed anew with a fresh IV, in the form it had.
function wrapEntry(entry: WrappedEntry, key: Buffer, masterKey: Buffer): Buffer {
  if (entry.kind === 'secret') return packSealed(seal(masterKey, key, secretAad(entry.name)));
  if (isBatchWrapped(entry.wrapped)) return wrapAt(masterKey, entry.name, key);
  return packSealed(seal(masterKey, key, wrapAad(entry.name)));
}

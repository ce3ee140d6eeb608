import { createCipheriv, createDecipheriv, timingSafeEqual } from 'node:crypto';
import { KEY_BYTES } from './aes-gcm.js';

// How data keys are wrapped under the master key: a batch at a time, in one pass of AES-256-CTR,
// instead of one AES-256-GCM message per key. Making a cipher costs about 4 µs of CPU whatever
// it encrypts, more than the rest of a key's making, and every post takes a key.
//
// A batch has a random 96-bit nonce; key i of the batch is named by the nonce and i (so a batch's
// ids are neighbours, and the key store's index takes them as one run instead of a thousand
// scattered inserts), and is encrypted with the counter blocks nonce ‖ 3i … 3i+2: its 32 bytes and
// a check block of zeros. Counter blocks never repeat: a fresh nonce per batch (as GCM's random
// IVs), and a batch is far smaller than 2^32 blocks.
//
// CTR alone does not authenticate, and it need not here: the data keys are random, and each lead's
// envelope is AES-256-GCM under its key, so a wrapped key altered in the store gives a key under
// which the lead does not open (an error, never another consumer's data). The check block gives
// the clearer error where one is likely: another master key, or a wrapped key moved to another
// id, decrypts it to anything but zeros.
//
// Keys wrapped one at a time with AES-256-GCM by earlier releases (iv ‖ ct ‖ tag, 60 bytes) still
// open: see isBatchWrapped.

export const NONCE_BYTES = 12;
const CHECK_BYTES = 16;
const SLOT_BYTES = KEY_BYTES + CHECK_BYTES;
const BLOCKS_PER_SLOT = SLOT_BYTES / 16;
const FORMAT = 2;
const WRAPPED_BYTES = 1 + SLOT_BYTES;
const ZEROS = Buffer.alloc(CHECK_BYTES);

/** Largest batch: its counter blocks must fit the 32-bit counter after the nonce. */
export const MAX_BATCH = 1 << 20;

export interface WrappedBatch {
  readonly ids: string[];
  /** Each key wrapped, in the order of `ids`: the format byte and the 48 encrypted bytes. */
  readonly wrapped: Buffer[];
}

/** Wraps `keys` (the batch's keys, 32 bytes each, end to end) under the master key. */
export function wrapBatch(masterKey: Buffer, nonce: Buffer, keys: Buffer): WrappedBatch {
  if (nonce.length !== NONCE_BYTES) throw new Error('a batch nonce is 12 bytes');
  const count = keys.length / KEY_BYTES;
  if (!Number.isInteger(count) || count > MAX_BATCH) throw new Error('a batch is whole keys, at most MAX_BATCH of them');
  const slots = Buffer.alloc(count * SLOT_BYTES);
  for (let i = 0; i < count; i++) keys.copy(slots, i * SLOT_BYTES, i * KEY_BYTES, (i + 1) * KEY_BYTES);
  const cipher = createCipheriv('aes-256-ctr', masterKey, counterBlock(nonce, 0));
  const encrypted = Buffer.concat([cipher.update(slots), cipher.final()]);
  slots.fill(0);
  const prefix = nonce.toString('hex');
  const out = Buffer.allocUnsafe(count * WRAPPED_BYTES);
  const ids: string[] = [];
  const wrapped: Buffer[] = [];
  for (let i = 0; i < count; i++) {
    ids.push(prefix + i.toString(16).padStart(8, '0'));
    const at = i * WRAPPED_BYTES;
    out[at] = FORMAT;
    encrypted.copy(out, at + 1, i * SLOT_BYTES, (i + 1) * SLOT_BYTES);
    wrapped.push(out.subarray(at, at + WRAPPED_BYTES));
  }
  return { ids, wrapped };
}

/**
 * Wraps one key anew under another master key, in the place its id names (the batch's nonce and
 * its index): the id stays what the events name it by. The counter blocks are those of its first
 * wrapping, under another key, so no key stream is used twice.
 */
export function wrapAt(masterKey: Buffer, id: string, key: Buffer): Buffer {
  if (key.length !== KEY_BYTES) throw new Error('a data key is 32 bytes');
  const named = Buffer.from(id, 'hex');
  const index = named.readUInt32BE(NONCE_BYTES);
  if (index >= MAX_BATCH) throw new Error('the key id names no key of a batch');
  const slot = Buffer.concat([key, ZEROS]);
  const cipher = createCipheriv('aes-256-ctr', masterKey, counterBlock(named.subarray(0, NONCE_BYTES), index * BLOCKS_PER_SLOT));
  const wrapped = Buffer.concat([Buffer.from([FORMAT]), cipher.update(slot), cipher.final()]);
  slot.fill(0);
  return wrapped;
}

/** True for a key wrapped by wrapBatch; false for one wrapped alone with AES-256-GCM. */
export function isBatchWrapped(wrapped: Buffer): boolean {
  return wrapped.length === WRAPPED_BYTES && wrapped[0] === FORMAT;
}

/** The key `id` names; throws when the check block is not zeros (another master key, or another id's key). */
export function unwrapFromBatch(masterKey: Buffer, id: string, wrapped: Buffer): Buffer {
  const named = Buffer.from(id, 'hex');
  const index = named.readUInt32BE(NONCE_BYTES);
  if (index >= MAX_BATCH) throw new Error('the key id names no key of a batch');
  const decipher = createDecipheriv('aes-256-ctr', masterKey, counterBlock(named.subarray(0, NONCE_BYTES), index * BLOCKS_PER_SLOT));
  const slot = Buffer.concat([decipher.update(wrapped.subarray(1)), decipher.final()]);
  const ok = timingSafeEqual(slot.subarray(KEY_BYTES), ZEROS);
  const key = Buffer.from(slot.subarray(0, KEY_BYTES));
  slot.fill(0);
  if (!ok) {
    key.fill(0);
    throw new Error('the check block is not zeros');
  }
  return key;
}

function counterBlock(nonce: Buffer, block: number): Buffer {
  const iv = Buffer.alloc(16);
  nonce.copy(iv, 0, 0, NONCE_BYTES);
  iv.writeUInt32BE(block, NONCE_BYTES);
  return iv;
}

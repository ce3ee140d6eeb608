import { createCipheriv, createDecipheriv, randomFillSync } from 'node:crypto';

// AES-256-GCM, the one cipher of personal data: data keys wrapped under the master key, and the
// personal fields of an event under its lead's data key. A fresh 96-bit IV per message (keys are
// random and each encrypts few messages, so random IVs never come near GCM's limits); the
// additional data binds a ciphertext to where it belongs, so it cannot be moved elsewhere.

export const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;

export interface Sealed {
  readonly iv: Buffer;
  readonly ct: Buffer;
  readonly tag: Buffer;
}

/**
 * IVs drawn from a buffer of random bytes filled 256 at a time: a call into the CSPRNG costs about
 * as much as the encryption itself, and a post seals one lead, and makes and wraps its data key.
 */
const IV_POOL = Buffer.alloc(IV_BYTES * 256);
let ivOffset = IV_POOL.length;

function freshIv(): Buffer {
  if (ivOffset === IV_POOL.length) {
    randomFillSync(IV_POOL);
    ivOffset = 0;
  }
  // A copy: the sealed value keeps its IV after the pool is refilled.
  const iv = Buffer.from(IV_POOL.subarray(ivOffset, ivOffset + IV_BYTES));
  ivOffset += IV_BYTES;
  return iv;
}

/** A string is sealed as its UTF-8 bytes. */
export function seal(key: Buffer, plaintext: Buffer | string, aad: Buffer): Sealed {
  const iv = freshIv();
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(aad);
  const ct = typeof plaintext === 'string' ? cipher.update(plaintext, 'utf8') : cipher.update(plaintext);
  // GCM is a stream cipher: final() adds no bytes, it computes the tag.
  cipher.final();
  return { iv, ct, tag: cipher.getAuthTag() };
}

/** The plaintext; throws when the key, the additional data or any byte is not what was sealed. */
export function open(key: Buffer, sealed: Sealed, aad: Buffer): Buffer {
  if (sealed.iv.length !== IV_BYTES || sealed.tag.length !== TAG_BYTES) throw new Error('the IV or tag has the wrong length');
  const decipher = createDecipheriv('aes-256-gcm', key, sealed.iv, { authTagLength: TAG_BYTES });
  decipher.setAAD(aad);
  decipher.setAuthTag(sealed.tag);
  return Buffer.concat([decipher.update(sealed.ct), decipher.final()]);
}

/** One buffer, `iv | ct | tag`: how a wrapped key is stored. */
export function packSealed(sealed: Sealed): Buffer {
  return Buffer.concat([sealed.iv, sealed.ct, sealed.tag]);
}

export function unpackSealed(packed: Buffer): Sealed {
  if (packed.length < IV_BYTES + TAG_BYTES) throw new Error('a wrapped key is too short');
  return { iv: packed.subarray(0, IV_BYTES), ct: packed.subarray(IV_BYTES, packed.length - TAG_BYTES), tag: packed.subarray(packed.length - TAG_BYTES) };
}

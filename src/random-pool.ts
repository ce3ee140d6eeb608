import { randomFillSync } from 'node:crypto';

// Random bytes for ids (event ids, trace ids) drawn from a pool filled 4 KiB at a time, rather
// than a call into the OS for 16 bytes per id: every request and every append needs ids. Not for secrets:
// API key secrets come from crypto.randomBytes directly.
const POOL_SIZE = 4096;
const pool = Buffer.alloc(POOL_SIZE);
let offset = POOL_SIZE;

/** Where 16 fresh random bytes start in `randomPool`; valid until the next draw. */
export function drawRandom16(): number {
  if (offset + 16 > POOL_SIZE) {
    randomFillSync(pool);
    offset = 0;
  }
  const at = offset;
  offset += 16;
  return at;
}

export const randomPool: Readonly<Buffer> = pool;

/** 16 fresh random bytes; a view into the pool, valid until the next call. */
export function pooledRandom16(): Buffer {
  const at = drawRandom16();
  return pool.subarray(at, at + 16);
}

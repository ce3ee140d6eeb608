import { drawRandom16, randomPool } from '../random-pool.js';

// A uuid v7 per event, written here rather than by the uuid package, whose v7 makes a Uint8Array
// per id and formats all 16 bytes: a post appends several events, and all of that is on the main
// thread, in the way of requests. The layout is uuid's own (RFC 9562 with its 32-bit sequence in rand_a and
// rand_b, so ids made in the same millisecond still sort in order); the formatted timestamp is
// reused for every id of the same millisecond.

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, '0'));

let lastMsecs = -Infinity;
let seq = 0;

/** A new uuid v7: time-ordered, unique. */
export function newEventId(): string {
  const at = drawRandom16();
  const now = Date.now();
  if (now > lastMsecs) {
    lastMsecs = now;
    seq = (((randomPool[at + 6]! & 0x7f) << 24) | (randomPool[at + 7]! << 16) | (randomPool[at + 8]! << 8) | randomPool[at + 9]!) >>> 0;
  } else {
    seq = (seq + 1) | 0;
    if (seq === 0) lastMsecs++;
  }
  return formatV7(lastMsecs, seq, randomPool, at);
}

let prefixMsecs = -Infinity;
/** `tttttttt-tttt-` of prefixMsecs. */
let prefix = '';

/** The uuid v7 of a millisecond, a 32-bit sequence and random bytes 10–15 of `random` from `at`. */
export function formatV7(msecs: number, sequence: number, random: Readonly<Uint8Array>, at: number): string {
  if (msecs !== prefixMsecs) {
    prefixMsecs = msecs;
    prefix = `${Math.floor(msecs / 0x10000).toString(16).padStart(8, '0')}-${HEX[(msecs >>> 8) & 0xff]}${HEX[msecs & 0xff]}-`;
  }
  return (
    prefix +
    HEX[0x70 | ((sequence >>> 28) & 0x0f)]! +
    HEX[(sequence >>> 20) & 0xff]! +
    '-' +
    HEX[0x80 | ((sequence >>> 14) & 0x3f)]! +
    HEX[(sequence >>> 6) & 0xff]! +
    '-' +
    HEX[((sequence << 2) & 0xff) | (random[at + 10]! & 0x03)]! +
    HEX[random[at + 11]!]! +
    HEX[random[at + 12]!]! +
    HEX[random[at + 13]!]! +
    HEX[random[at + 14]!]! +
    HEX[random[at + 15]!]!
  );
}

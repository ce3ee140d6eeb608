// The documents a store has written, as a Bloom filter: "no" is certain, "maybe" needs a look at
// the table. A rebuild writes hundreds of thousands of new documents into tables that started
// empty, and looking each one up first, only to find nothing, is a read wasted per document.

const BITS = 2 ** 25; // 4 MiB: under 0.01% false "maybe" at a million documents, and it degrades gracefully.
const PROBES = 4;

export class WrittenIds {
  private readonly bits = new Uint32Array(BITS / 32);

  add(table: string, id: string): void {
    hashes(table, id);
    let h1 = HASHES[0]!;
    const h2 = HASHES[1]!;
    for (let i = 0; i < PROBES; i++, h1 = (h1 + h2) >>> 0) this.bits[(h1 % BITS) >>> 5]! |= 1 << (h1 & 31);
  }

  mightHave(table: string, id: string): boolean {
    hashes(table, id);
    let h1 = HASHES[0]!;
    const h2 = HASHES[1]!;
    for (let i = 0; i < PROBES; i++, h1 = (h1 + h2) >>> 0) if ((this.bits[(h1 % BITS) >>> 5]! & (1 << (h1 & 31))) === 0) return false;
    return true;
  }
}

/** Where `hashes` leaves its two results: an array per call was an allocation per document written. */
const HASHES = new Uint32Array(2);

/** Two 32-bit FNV-1a style hashes of table, a separator and id, with different primes, for double hashing, into HASHES. */
function hashes(table: string, id: string): void {
  let a = 0x811c9dc5;
  let b = 0x5bd1e995;
  for (let i = 0; i <= table.length + id.length; i++) {
    // The code at table.length is the separator 0, so that ("ab", "c") and ("a", "bc") differ.
    const code = i < table.length ? table.charCodeAt(i) : i === table.length ? 0 : id.charCodeAt(i - table.length - 1);
    a = Math.imul(a ^ code, 0x01000193);
    b = Math.imul(b ^ code, 0x5bd1e995);
  }
  HASHES[0] = a >>> 0;
  // An odd step visits different bits on each probe.
  HASHES[1] = (b | 1) >>> 0;
}

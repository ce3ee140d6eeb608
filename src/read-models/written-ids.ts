// The documents a store has written, as a Bloom filter: "no" is certain, "maybe" needs a look at
// the table. A rebuild writes hundreds of thousands of new documents into tables that started
// empty, and looking each one up first, only to find nothing, is a read wasted per document.

const BITS = 2 ** 25; // 4 MiB: under 0.01% false "maybe" at a million documents, and it degrades gracefully.
const PROBES = 4;

export class WrittenIds {
  private readonly bits = new Uint32Array(BITS / 32);

  add(table: string, id: string): void {
    let [h1, h2] = hashes(table, id);
    for (let i = 0; i < PROBES; i++, h1 = (h1 + h2) >>> 0) this.bits[(h1 % BITS) >>> 5]! |= 1 << (h1 & 31);
  }

  mightHave(table: string, id: string): boolean {
    let [h1, h2] = hashes(table, id);
    for (let i = 0; i < PROBES; i++, h1 = (h1 + h2) >>> 0) if ((this.bits[(h1 % BITS) >>> 5]! & (1 << (h1 & 31))) === 0) return false;
    return true;
  }
}

/** Two 32-bit FNV-1a style hashes of table, a separator and id, with different primes, for double hashing. */
function hashes(table: string, id: string): [number, number] {
  let a = 0x811c9dc5;
  let b = 0x5bd1e995;
  for (let i = 0; i <= table.length + id.length; i++) {
    // The code at table.length is the separator 0, so that ("ab", "c") and ("a", "bc") differ.
    const code = i < table.length ? table.charCodeAt(i) : i === table.length ? 0 : id.charCodeAt(i - table.length - 1);
    a = Math.imul(a ^ code, 0x01000193);
    b = Math.imul(b ^ code, 0x5bd1e995);
  }
  // An odd step visits different bits on each probe.
  return [a >>> 0, (b | 1) >>> 0];
}

// A bounded cache of recent entries with O(1) eviction: when the young generation is full it
// becomes the old one and the previous old one is dropped, so between `capacity` and twice that
// many of the newest entries are kept. Evicting a Map's oldest entry one at a time is not O(1): the
// Map skips the deleted slots from its start on every lookup of the oldest.
export class TwoGenerationCache<K, V> {
  private young = new Map<K, V>();
  private old = new Map<K, V>();

  constructor(private readonly capacity: number) {}

  get(key: K): V | undefined {
    return this.young.get(key) ?? this.old.get(key);
  }

  set(key: K, value: V): void {
    if (this.young.size >= this.capacity) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }

  /** How many entries are kept, of both generations (a key set again in the young one counts twice). */
  get size(): number {
    return this.young.size + this.old.size;
  }

  /** Forgets every entry. */
  clear(): void {
    this.young = new Map();
    this.old = new Map();
  }
}

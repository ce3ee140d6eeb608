// The running service's view of the keys: the `api-keys` stream folded in memory and kept fresh
// by polling, so a key the CLI creates, revokes or rotates in another process — or on another
// instance, with EventStoreDB — takes effect here within one poll interval. A key whose id the
// ring has not seen is looked for once more before it is refused (authenticateFresh): a supplier's
// script that creates a key and posts with it at once must not meet a 401 for a key that exists.
import { hash, timingSafeEqual } from 'node:crypto';
import type { EventStore } from '../event-store/index.js';
import { parseKey, type Role } from './api-keys.js';
import { loadKeys, type LoadedKeys } from './key-stream.js';

export interface Principal {
  readonly keyId: string;
  readonly role: Role;
  readonly name: string;
}

export interface KeyRingOptions {
  readonly pollMs?: number;
  /** Epoch milliseconds; decides when a rotated key's grace ends. */
  readonly now?: () => number;
  /** Told when a poll fails (the ring keeps its last good state). Never given key material. */
  readonly onPollError?: (error: unknown) => void;
}

// A real key is 3 + 12 + 1 + 43 characters; anything longer is rejected before any parsing.
const KEY_LENGTH = 59;
// Stands in for the secret and the stored hash when the key is malformed or unknown, so every
// call hashes once and compares once whatever it was given.
const DUMMY_SECRET = 'x'.repeat(43);
const DUMMY_HASH = Buffer.alloc(32);

/** After a read of the keys stream fails, unknown keys are refused without a read of their own for this long. */
const FAILED_READ_PAUSE_MS = 1000;

// crypto.hash: the one-shot form, about twice as fast as a Hash object for a short input; once per request.
const sha256 = (text: string): Buffer => hash('sha256', text, 'buffer');

export class KeyRing {
  private keys: LoadedKeys;
  private timer: NodeJS.Timeout | undefined;
  private polling: Promise<void> = Promise.resolve();
  /** A read of the stream queued behind the one running, not begun yet: every caller until it begins shares it. */
  private queuedRead: Promise<void> | undefined;
  /** performance.now() of the last read that failed: a store that is down is not asked again per request. */
  private failedAt = Number.NEGATIVE_INFINITY;
  private closed = false;

  private constructor(
    private readonly store: EventStore,
    initial: LoadedKeys,
    private readonly pollMs: number,
    private readonly now: () => number,
    private readonly onPollError: (error: unknown) => void,
  ) {
    this.keys = initial;
  }

  /** Reads the stream (a failure here rejects: the service should not start blind) and starts polling. */
  static async open(store: EventStore, options: KeyRingOptions = {}): Promise<KeyRing> {
    const ring = new KeyRing(store, await loadKeys(store), options.pollMs ?? 250, options.now ?? (() => Date.now()), options.onPollError ?? (() => {}));
    ring.schedule();
    return ring;
  }

  /** The principal a presented `X-API-KEY` value belongs to, or null. Never throws. */
  authenticate(presented: string | undefined): Principal | null {
    try {
      const parsed = typeof presented === 'string' && presented.length === KEY_LENGTH ? parseKey(presented) : null;
      const record = parsed ? this.keys.state.get(parsed.id) : undefined;
      const stored = record ? Buffer.from(record.hash, 'hex') : DUMMY_HASH;
      const expected = stored.length === 32 ? stored : DUMMY_HASH;
      const matches = timingSafeEqual(sha256(parsed?.secret ?? DUMMY_SECRET), expected);
      if (!matches || !record || expected === DUMMY_HASH || record.revoked_at !== null) return null;
      if (record.expires_at !== null && !(this.now() < Date.parse(record.expires_at))) return null;
      return { keyId: record.id, role: record.role, name: record.name };
    } catch {
      return null;
    }
  }

  /**
   * As authenticate, but a well-formed key whose id is not known yet is looked for in a read of
   * the stream that begins after this call (shared by the requests that ask meanwhile, so a flood
   * of made-up ids costs one read at a time, never a read each) before it is refused.
   */
  authenticateFresh(presented: string | undefined): Principal | null | Promise<Principal | null> {
    const principal = this.authenticate(presented);
    if (principal || this.closed || !this.unseenId(presented)) return principal;
    // The store failing: the polls go on, but a flood of unknown keys must not add a read (and a
    // logged failure) each meanwhile.
    if (performance.now() - this.failedAt < FAILED_READ_PAUSE_MS) return null;
    this.queuedRead ??= this.read(() => (this.queuedRead = undefined));
    return this.queuedRead.then(() => this.authenticate(presented));
  }

  private unseenId(presented: string | undefined): boolean {
    try {
      const parsed = typeof presented === 'string' && presented.length === KEY_LENGTH ? parseKey(presented) : null;
      return parsed !== null && !this.keys.state.has(parsed.id);
    } catch {
      return false;
    }
  }

  /** Reads what was appended since the last read now, rather than at the next tick. */
  refresh(): Promise<void> {
    return this.read();
  }

  private read(begins?: () => void): Promise<void> {
    this.polling = this.polling.then(async () => {
      begins?.();
      try {
        this.keys = await loadKeys(this.store, this.keys);
      } catch (error) {
        this.failedAt = performance.now();
        try {
          this.onPollError(error);
        } catch {
          // A throwing reporter must not stop the polling.
        }
      }
    });
    return this.polling;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.polling;
  }

  // A chain of timeouts, not an interval: a slow read never overlaps the next one.
  private schedule(): void {
    if (this.closed) return;
    this.timer = setTimeout(() => void this.refresh().then(() => this.schedule()), this.pollMs);
    this.timer.unref();
  }
}

import { createHmac } from 'node:crypto';
import type { EventStore } from '../event-store/port.js';
import { IDEMPOTENCY_TTL_MS, type IdempotencyNames, plainIdempotencyStream } from '../commands/idempotency.js';
import { LEAD_ID_BLOCKS_STREAM } from '../commands/lead-ids.js';
import { hashedStream } from '../commands/streams.js';
import type { PersonalDataKeys } from './data-keys.js';

// The names of the contact streams (duplicate claims, suppression, finding a consumer's leads):
// an HMAC of the mobile or e-mail under a secret from the key store. A plain hash of a phone
// number is reversed by hashing every number there is (about 10^10 in North America); an HMAC
// is not, without the secret, which the key store keeps wrapped by the master key.
//
// Data dirs from before keyed hashes have contact streams named by plain SHA-256. The first start
// of this release records when keyed hashing began (stream `contact-hashing`), and whether older
// contact streams may exist (a lead was ever posted: the lead-id stream exists). For one duplicate window after
// that, a contact is also looked up under its old name, read-only, so a lead posted just before
// the upgrade still makes its repeat a duplicate; after the window, old names are never read.

export type ContactKind = 'mobile' | 'email';

/** The name of the secret in the key store. */
const SECRET_NAME = 'contact-hashes';
const HASHING_STREAM = 'contact-hashing';
const DAY_MS = 86_400_000;

/** When a store began naming a kind of stream by a keyed hash, and whether older plain names may exist. */
interface HashesKeyed {
  readonly type: string;
  readonly data: { readonly keyed_at: string; readonly older_streams: boolean };
}

/**
 * Since when streams under older plain names may still need reading (epoch ms), or null when none
 * can exist: recorded in `stream` by the first instance to start this release (older streams exist
 * when a lead was ever posted), and read by every later start.
 */
async function keyedSince(events: EventStore, stream: string, type: string, now: () => Date): Promise<number | null> {
  for (let attempt = 0; ; attempt++) {
    const [first] = await events.readStream(stream, { maxCount: 1 });
    if (first?.type === type) {
      const { keyed_at, older_streams } = (first as unknown as HashesKeyed).data;
      return older_streams ? Date.parse(keyed_at) : null;
    }
    const posted = await events.readStream(LEAD_ID_BLOCKS_STREAM, { maxCount: 1 });
    const keyed: HashesKeyed = { type, data: { keyed_at: now().toISOString(), older_streams: posted.length > 0 } };
    try {
      await events.append(stream, [keyed], { expectedRevision: 'no_stream' });
    } catch (error) {
      // Another instance recorded it first: read what it wrote.
      if (attempt >= 3) throw error;
    }
  }
}

/** The contact stream of a keyed hash. */
export const contactStream = (hash: string): string => `contact-${hash}`;

export class ContactHashes {
  private constructor(
    private readonly secret: Buffer,
    /** When keyed hashing began on a store that may hold streams under the old names; null: none can. */
    private readonly legacySince: number | null,
  ) {}

  /** The contact hashes of this store: the secret from the key store, and the upgrade record (written on the first start). */
  static async open(keys: PersonalDataKeys, events: EventStore, now: () => Date = () => new Date()): Promise<ContactHashes> {
    const secret = await keys.secret(SECRET_NAME);
    return new ContactHashes(secret, await keyedSince(events, HASHING_STREAM, 'ContactHashesKeyed', now));
  }

  /** For tests and tools: keyed hashes with this secret, on a store with no older streams. */
  static withSecret(secret: Buffer): ContactHashes {
    return new ContactHashes(secret, null);
  }

  /**
   * A stream named by the same secret for another value a client gives that must not be found from
   * the name (an Idempotency-Key, which a supplier may well make of the consumer's e-mail): the
   * prefix goes into the keyed hash too, so no two kinds of name can meet.
   */
  keyedStream(prefix: string, ...parts: string[]): string {
    return `${prefix}-${createHmac('sha256', this.secret).update([prefix, ...parts].join('\n')).digest('hex')}`;
  }

  /** The keyed hash (hex) of a normalised mobile (E.164) or e-mail: what a lead records of its contacts. */
  hash(kind: ContactKind, value: string): string {
    return createHmac('sha256', this.secret).update(`${kind}\n${value}`).digest('hex');
  }

  /** The stream of a normalised mobile (E.164) or e-mail. */
  stream(kind: ContactKind, value: string): string {
    return contactStream(this.hash(kind, value));
  }

  /** The stream the contact had before keyed hashes, while a claim there may still count; null once none can. */
  olderStream(kind: ContactKind, value: string, now: Date, windowDays: number): string | null {
    if (this.legacySince === null || now.getTime() - this.legacySince >= windowDays * DAY_MS) return null;
    return hashedStream('contact', kind, value);
  }
}

/**
 * The names of the Idempotency-Key streams of this store: keyed by the contact hashes' secret; the
 * plain name of older releases is read for the 72 h a key lives after this release first started,
 * on a store that held leads before it.
 */
export async function idempotencyNames(hashes: ContactHashes, events: EventStore, now: () => Date = () => new Date()): Promise<IdempotencyNames> {
  const since = await keyedSince(events, 'idempotency-hashing', 'IdempotencyKeysKeyed', now);
  return {
    stream: (supplier, key) => hashes.keyedStream('idempotency', supplier, key),
    olderStream: (supplier, key, at) => (since !== null && at - since < IDEMPOTENCY_TTL_MS ? plainIdempotencyStream(supplier, key) : null),
  };
}

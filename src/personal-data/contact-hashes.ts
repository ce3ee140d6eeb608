import { createHmac } from 'node:crypto';
import type { EventStore } from '../event-store/port.js';
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

interface ContactHashesKeyed {
  readonly type: 'ContactHashesKeyed';
  readonly data: { readonly keyed_at: string; readonly older_streams: boolean };
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
    for (let attempt = 0; ; attempt++) {
      const [first] = await events.readStream(HASHING_STREAM, { maxCount: 1 });
      if (first?.type === 'ContactHashesKeyed') {
        const { keyed_at, older_streams } = (first as unknown as ContactHashesKeyed).data;
        return new ContactHashes(secret, older_streams ? Date.parse(keyed_at) : null);
      }
      const posted = await events.readStream(LEAD_ID_BLOCKS_STREAM, { maxCount: 1 });
      const keyed: ContactHashesKeyed = { type: 'ContactHashesKeyed', data: { keyed_at: now().toISOString(), older_streams: posted.length > 0 } };
      try {
        await events.append(HASHING_STREAM, [keyed], { expectedRevision: 'no_stream' });
      } catch (error) {
        // Another instance recorded it first: read what it wrote.
        if (attempt >= 3) throw error;
      }
    }
  }

  /** For tests and tools: keyed hashes with this secret, on a store with no older streams. */
  static withSecret(secret: Buffer): ContactHashes {
    return new ContactHashes(secret, null);
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

import { createHmac } from 'node:crypto';
import type { EventStore } from '../event-store/port.js';
import { IDEMPOTENCY_TTL_MS, type IdempotencyNames, KEYED_FINGERPRINT, plainIdempotencyStream } from '../commands/idempotency.js';
import { LEAD_ID_BLOCKS_STREAM } from '../commands/lead-ids.js';
import { type Decider, type DomainEvent, handleCommand } from '../commands/handler.js';
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
// `leadpost seal-clear-leads` renames those streams by a keyed hash of their old name (recorded
// as `OlderStreamsRenamed`), so that none is left named by a reversible hash; the window then
// reads them under that name.

export type ContactKind = 'mobile' | 'email';

/** The name of the secret in the key store. */
const SECRET_NAME = 'contact-hashes';
const DAY_MS = 86_400_000;

/** When a store began naming a kind of stream by a keyed hash, and whether older plain names may exist. */
interface HashesKeyed {
  readonly type: string;
  readonly data: { readonly keyed_at: string; readonly older_streams: boolean };
}

/**
 * What a store says of its older plain names: since when they may still need reading (epoch ms),
 * or null when none can exist, as recorded in `stream` by the first instance to start this
 * release (older streams exist when a lead was ever posted) and read by every later start; and
 * whether `leadpost seal-clear-leads` has since renamed them by a keyed hash of the plain name
 * (`OlderStreamsRenamed` in the same stream), so that no stream is named by a reversible hash.
 */
export interface OlderNames {
  readonly since: number | null;
  readonly renamed: boolean;
}

/** The event that says a store's older plain names were renamed (see OlderNames). */
export const OLDER_STREAMS_RENAMED = 'OlderStreamsRenamed';

/**
 * A stream that records a fact once (which secret, since when): the first start to find it empty
 * records `first()`, every later start reads it, and of starts racing, the one whose append lands
 * first is the record (the others, refused at the revision they read, read it). Its state is every
 * event of the stream, the record first.
 */
const recordedOnce: Decider<{ readonly first: () => Promise<DomainEvent> }, readonly DomainEvent[], DomainEvent> = {
  initialState: [],
  evolve: (state, event) => [...state, event],
  decide: (command, state) => (state.length > 0 ? [] : command.first().then((event) => [event])),
};

const recordOnce = async (events: EventStore, stream: string, first: () => Promise<DomainEvent>): Promise<readonly DomainEvent[]> =>
  (await handleCommand(events, stream, recordedOnce, { first })).state;

async function olderNames(events: EventStore, stream: string, type: string, now: () => Date): Promise<OlderNames> {
  const recorded = await recordOnce(events, stream, async (): Promise<HashesKeyed> => {
    const posted = await events.readStream(LEAD_ID_BLOCKS_STREAM, { maxCount: 1 });
    return { type, data: { keyed_at: now().toISOString(), older_streams: posted.length > 0 } };
  });
  const first = recorded[0];
  if (first?.type !== type) throw new Error(`${stream} begins with ${first?.type ?? 'nothing'}, not ${type}`);
  const { keyed_at, older_streams } = (first as HashesKeyed).data;
  return { since: older_streams ? Date.parse(keyed_at) : null, renamed: recorded.some((event) => event.type === OLDER_STREAMS_RENAMED) };
}

/** Where each kind of older name is recorded, and the prefix of its keyed rename. */
export const OLDER_NAMES = {
  contact: { record: 'contact-hashing', type: 'ContactHashesKeyed', renamedPrefix: 'contact-older' },
  idempotency: { record: 'idempotency-hashing', type: 'IdempotencyKeysKeyed', renamedPrefix: 'idempotency-older' },
} as const;

/** The contact stream of a keyed hash. */
export const contactStream = (hash: string): string => `contact-${hash}`;

/**
 * Which contact-hashes secret the event store's contacts were hashed with, as a keyed check of it
 * (an HMAC of a fixed text under the secret: it tells two secrets apart and nothing else). Recorded
 * once, by the first start with this check; every later start compares its key store's secret with
 * it. A key store that is not the one the events go with (a restore that left keys.db out or took
 * another data dir's, a MONGODB_URL naming another database) would otherwise make a new secret
 * without a word: contacts hashed anew, duplicates no longer caught, erasures missing every
 * earlier lead, and every sealed lead unreadable.
 */
export const SECRET_CHECK = { stream: 'key-store-check', type: 'ContactHashesSecretRecorded' } as const;

/** The key store's secret is not the one the event store's contacts were hashed with: nothing should start on it. */
export class KeyStoreMismatchError extends Error {
  override readonly name = 'KeyStoreMismatchError';
}

const secretCheck = (secret: Buffer): string => createHmac('sha256', secret).update('leadpost: which contact-hashes secret').digest('hex').slice(0, 32);

async function checkSecret(events: EventStore, secret: Buffer, now: () => Date): Promise<void> {
  const check = secretCheck(secret);
  const [recorded] = await recordOnce(events, SECRET_CHECK.stream, async () => ({ type: SECRET_CHECK.type, data: { check, recorded_at: now().toISOString() } }));
  const data = recorded!.data as { check: string; recorded_at: string };
  if (data.check === check) return;
  throw new KeyStoreMismatchError(
    `the key store (keys.db in LEADPOST_DATA_DIR, or MONGODB_URL's data_keys) is not the one this event store's leads go with: ` +
      `its contact-hashes secret is not the one recorded on ${data.recorded_at}. Put back the key store taken with these events ` +
      `(the keys.db of the same backup, with its LEADPOST_MASTER_KEY_FILE); started on this one, duplicates would go uncaught, ` +
      `erasures would miss earlier leads and sealed leads could not be read`,
  );
}

export class ContactHashes {
  private constructor(
    private readonly secret: Buffer,
    /** When keyed hashing began on a store that may hold streams under the old names, and whether they were renamed. */
    private readonly older: OlderNames,
  ) {}

  /** The contact hashes of this store: the secret from the key store, and the upgrade record (written on the first start). */
  static async open(keys: PersonalDataKeys, events: EventStore, now: () => Date = () => new Date()): Promise<ContactHashes> {
    const secret = await keys.secret(SECRET_NAME);
    await checkSecret(events, secret, now);
    return new ContactHashes(secret, await olderNames(events, OLDER_NAMES.contact.record, OLDER_NAMES.contact.type, now));
  }

  /** For tests and tools: keyed hashes with this secret, on a store with no older streams. */
  static withSecret(secret: Buffer): ContactHashes {
    return new ContactHashes(secret, { since: null, renamed: false });
  }

  /**
   * A stream named by the same secret for another value a client gives that must not be found from
   * the name (an Idempotency-Key, which a supplier may well make of the consumer's e-mail): the
   * prefix goes into the keyed hash too, so no two kinds of name can meet.
   */
  keyedStream(prefix: string, ...parts: string[]): string {
    return `${prefix}-${createHmac('sha256', this.secret).update([prefix, ...parts].join('\n')).digest('hex')}`;
  }

  /** The keyed hash (hex) of bytes a client sent, under a name of their kind so that no two kinds can meet. */
  keyedDigest(kind: string, bytes: Buffer): string {
    return createHmac('sha256', this.secret).update(`${kind}\n`).update(bytes).digest('hex');
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
    const { since, renamed } = this.older;
    if (since === null || now.getTime() - since >= windowDays * DAY_MS) return null;
    return this.olderName('contact', hashedStream('contact', kind, value), renamed);
  }

  /** An older plain name as the store has it: as it was, or renamed by a keyed hash of it. */
  olderName(kind: keyof typeof OLDER_NAMES, plain: string, renamed = true): string {
    return renamed ? this.keyedStream(OLDER_NAMES[kind].renamedPrefix, plain) : plain;
  }
}

/**
 * The names of the Idempotency-Key streams of this store: keyed by the contact hashes' secret; the
 * plain name of older releases is read for the 72 h a key lives after this release first started,
 * on a store that held leads before it.
 */
export async function idempotencyNames(hashes: ContactHashes, events: EventStore, now: () => Date = () => new Date()): Promise<IdempotencyNames> {
  const { since, renamed } = await olderNames(events, OLDER_NAMES.idempotency.record, OLDER_NAMES.idempotency.type, now);
  return {
    stream: (supplier, key) => hashes.keyedStream('idempotency', supplier, key),
    fingerprint: (body) => `${KEYED_FINGERPRINT}${hashes.keyedDigest('idempotency-body', body)}`,
    olderStream: (supplier, key, at) => (since !== null && at - since < IDEMPOTENCY_TTL_MS ? hashes.olderName('idempotency', plainIdempotencyStream(supplier, key), renamed) : null),
  };
}

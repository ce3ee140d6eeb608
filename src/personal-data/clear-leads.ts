import type { StoredCommit } from '../event-store/embedded/rewrite.js';
import type { StoredEvent } from '../event-store/embedded/protocol.js';
import type { EmbeddedEventStore } from '../event-store/embedded/embedded-event-store.js';
import type { EventStore, RecordedEvent } from '../event-store/port.js';
import { EventDecodeError } from '../events/codec/codec.js';
import { leadReceivedSealer } from '../events/codec/lead-received-sealer.js';
import { LEAD_ID_BLOCKS_STREAM } from '../commands/lead-ids.js';
import { type Decider, type DomainEvent, handleCommand } from '../commands/handler.js';
import { LEAD_RECEIVED_SCHEMA, type LeadContacts, type LeadReceived, SEALED_FROM_SCHEMA, leadStream, sealedAfterTheFact } from '../events/lead-events.js';
import type { PiiEnvelope } from '../leads/lead.js';
import { normaliseConsumer } from '../leads/validate.js';
import { type ContactHashes, OLDER_NAMES, OLDER_STREAMS_RENAMED, idempotencyNames } from './contact-hashes.js';
import type { PersonalDataKeys } from './data-keys.js';

// Leads that releases from before encryption recorded with the consumer's fields in clear
// (`LeadReceived` versions 0 and 1). Their personal data cannot be shredded (there is no key to
// destroy), and they recorded no contact hashes, so an erasure or access request cannot find them.
// Sealing them gives each a data key and its contact hashes, as a lead posted today has, by
// rewriting the stored event in place (the one rewrite of events there is, see
// src/event-store/embedded/rewrite.ts): it still reads as the same fact, at the same revision.
// A lead whose personal data was already erased or had expired is sealed with a key destroyed at
// once, before the rewrite is stored: it reads as erased, as it did.

export interface ClearLeadsDeps {
  /** The embedded store itself, which can rewrite its commits. */
  readonly raw: EmbeddedEventStore;
  /** The same store behind the event codec: the events in their current layout. */
  readonly store: EventStore;
  readonly keys: PersonalDataKeys;
  readonly hashes: ContactHashes;
}

export interface ClearLeadsReport {
  /** Leads sealed, each with a data key of its own. */
  readonly sealed: number;
  /** Of those, leads already erased or expired: their new key was destroyed at once. */
  readonly shredded: number;
  /** Lead streams whose LeadReceived could not be read in today's layout: left as they were. */
  readonly unreadable: string[];
  /** Contact and Idempotency-Key streams an older release named by a plain hash, renamed by a keyed one. */
  readonly renamed: number;
}

/** Where each run that sealed leads records how it ended (no personal data): that the store has none left in clear. */
export const SEALING_STREAM = 'clear-leads-sealing';

interface ClearLeadsSealed {
  readonly type: 'ClearLeadsSealed';
  readonly data: { readonly sealed: number; readonly shredded: number; readonly renamed: number; readonly unreadable: number; readonly sealed_at: string };
}

/** A run's end is recorded whatever the stream holds: each run that sealed leads says how it ended. */
export const runsEnded: Decider<{ readonly ended: ClearLeadsSealed }, null, DomainEvent> = {
  initialState: null,
  evolve: () => null,
  decide: (command) => [command.ended],
};

/**
 * The renames of older streams are recorded once: a later run, or one racing this one, finds them
 * recorded (the record's first event says since when names are keyed; this one, that the older
 * names are gone).
 */
export const renamesRecorded: Decider<{ readonly renamed: DomainEvent }, boolean, DomainEvent> = {
  initialState: false,
  evolve: (recorded, event) => recorded || event.type === OLDER_STREAMS_RENAMED,
  decide: (command, recorded) => (recorded ? [] : [command.renamed]),
};

const isClear = (event: StoredEvent): boolean => event[1] === 'LeadReceived' && event[3]?.schema !== LEAD_RECEIVED_SCHEMA;
const SHREDDED_BY = new Set(['LeadPersonalDataErased', 'LeadPersonalDataExpired']);

/**
 * Seals every LeadReceived written in clear, `onBatch` told how many so far. Meant for a store no
 * service writes to meanwhile (the command holds the leases, and says so).
 */
export async function sealClearLeads(deps: ClearLeadsDeps, onBatch: (sealed: number) => void = () => {}): Promise<ClearLeadsReport> {
  // First, as the rewrite below ends by vacuuming the file, which clears the old names from it too.
  const renamed = await renameOlderStreams(deps);
  const sealer = leadReceivedSealer(deps.keys);
  let sealed = 0;
  let shredded = 0;
  const unreadable: string[] = [];
  await deps.raw.rewriteCommits({ streams: 'lead-[0-9]*', holding: '"LeadReceived"' }, async (commits) => {
    const replaced = new Map<number, StoredEvent[]>();
    const toDestroy: string[] = [];
    for (const commit of commits) {
      if (!commit.events.some(isClear)) continue;
      const stream = await readable(deps.store, commit);
      if (stream === null) {
        unreadable.push(commit.stream);
        continue;
      }
      const shred = stream.some((event) => SHREDDED_BY.has(event.type));
      const events = [...commit.events];
      for (const [at, stored] of commit.events.entries()) {
        if (!isClear(stored)) continue;
        const data = stream[commit.firstRevision + at]!.data as LeadReceived['data'];
        const sealedData = (await sealer.seal({ ...data, ...contactsOf(deps.hashes, data) }, { streamId: commit.stream, type: 'LeadReceived' })) as LeadReceived['data'];
        events[at] = [stored[0], stored[1], sealedData, { ...stored[3], schema: LEAD_RECEIVED_SCHEMA, [SEALED_FROM_SCHEMA]: stored[3]?.schema ?? 0 }];
        sealed++;
        const key = (sealedData.lead as { pii?: PiiEnvelope } | null)?.pii?.key;
        if (key !== undefined && shred) {
          toDestroy.push(key);
          shredded++;
        }
      }
      replaced.set(commit.position, events);
    }
    // Before the rewrite is stored: a crash in between leaves these leads in clear, to be sealed
    // again by the next run, never sealed with a key that should be gone.
    if (toDestroy.length > 0) await deps.keys.destroy(toDestroy);
    onBatch(sealed);
    return replaced;
  });
  return { sealed, shredded, unreadable, renamed };
}

/**
 * Records that a run has ended: the last step of `leadpost seal-clear-leads`, once the read models
 * no longer hold the leads in clear either, since what it records stops the warning at start.
 */
export async function recordSealed(store: EventStore, report: ClearLeadsReport): Promise<void> {
  const { sealed, shredded, renamed } = report;
  const ended: ClearLeadsSealed = { type: 'ClearLeadsSealed', data: { sealed, shredded, renamed, unreadable: report.unreadable.length, sealed_at: new Date().toISOString() } };
  await handleCommand(store, SEALING_STREAM, runsEnded, { ended });
}

/**
 * Renames the contact and Idempotency-Key streams an older release named by a plain SHA-256 of a
 * mobile, an e-mail or a client's key (reversed by hashing every phone number there is) by a keyed
 * hash of that name, which only the key store's secret gives: the duplicate check and the
 * Idempotency-Key replay of their window after the upgrade still find them (ContactHashes.olderName),
 * and no stream is left named by a reversible hash. They are the streams of that kind none of whose
 * commits is later than the record of when keyed names began: no release writes to them since.
 */
async function renameOlderStreams(deps: ClearLeadsDeps): Promise<number> {
  // Made now if no instance of this release has started yet, so that its start finds them renamed.
  await idempotencyNames(deps.hashes, deps.store);
  let renamed = 0;
  for (const kind of ['contact', 'idempotency'] as const) {
    const { record, type, renamedPrefix } = OLDER_NAMES[kind];
    const [keyed] = await deps.store.readStream(record, { maxCount: 1 });
    if (keyed?.type !== type || (keyed.data as { older_streams?: unknown }).older_streams !== true) continue;
    const older = deps.raw.streamsOlderThan(`${kind}-*`, keyed.position.commit).filter((name) => name !== record && !name.startsWith(`${renamedPrefix}-`));
    const count = deps.raw.renameStreams(older.map((name) => [name, deps.hashes.olderName(kind, name)] as const));
    renamed += count;
    await handleCommand(deps.store, record, renamesRecorded, { renamed: { type: OLDER_STREAMS_RENAMED, data: { renamed_at: new Date().toISOString(), streams: count } } });
  }
  return renamed;
}

/** The lead's stream in today's layout, or null when an event of it cannot be upcast. */
async function readable(store: EventStore, commit: StoredCommit): Promise<RecordedEvent[] | null> {
  try {
    return await store.readStream(commit.stream);
  } catch (error) {
    if (error instanceof EventDecodeError) return null;
    throw error;
  }
}

/**
 * The contact hashes a valid lead records today, for a lead that has none: of its e-mail and mobile
 * normalised as an erasure or access request normalises what it is given (an older release may
 * have kept an e-mail as posted, in capitals), so that the request finds the lead.
 */
function contactsOf(hashes: ContactHashes, data: LeadReceived['data']): { contacts?: LeadContacts } {
  const lead = data.lead as { email?: unknown; mobile?: unknown } | null;
  if (data.contacts || typeof lead?.email !== 'string' || typeof lead.mobile !== 'string') return {};
  const email = normaliseConsumer({ email: lead.email });
  const mobile = normaliseConsumer({ mobile: lead.mobile });
  return {
    contacts: {
      mobile: hashes.hash('mobile', (mobile.ok && mobile.consumer.mobile) || lead.mobile),
      email: hashes.hash('email', (email.ok && email.consumer.email) || lead.email.trim().toLowerCase()),
    },
  };
}

/**
 * Whether the store holds leads written in clear, without reading them all: releases only ever went
 * forwards, so there are some if its first lead's LeadReceived was stored in an older version, and
 * sealing goes in the order of the log, so some are left if that lead was sealed but no run has
 * recorded its end. The first lead is the first of the first block of lead ids that was used.
 */
export async function holdsClearLeads(store: EventStore): Promise<boolean> {
  const [block] = await store.readStream(LEAD_ID_BLOCKS_STREAM, { maxCount: 1 });
  const from = (block?.data as { from?: unknown } | undefined)?.from;
  if (typeof from !== 'number') return false;
  // A block's first ids go unused only when its instance stopped before its first post.
  for (let id = from; id < from + FIRST_LEAD_SEARCH; id++) {
    const [first] = await store.readStream(leadStream(id), { maxCount: 1 });
    if (first === undefined) continue;
    if (first.type !== 'LeadReceived') return false;
    if (first.metadata.stored_schema !== undefined) return true;
    if (!sealedAfterTheFact(first)) return false;
    const last = (await store.readStream(SEALING_STREAM)).at(-1) as unknown as ClearLeadsSealed | undefined;
    return last === undefined || last.data.unreadable > 0;
  }
  return false;
}

/** How many ids of the first block are looked at for the first lead. */
const FIRST_LEAD_SEARCH = 100;

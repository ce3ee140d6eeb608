import type { StoredCommit } from '../event-store/embedded/rewrite.js';
import type { StoredEvent } from '../event-store/embedded/protocol.js';
import type { EmbeddedEventStore } from '../event-store/embedded/embedded-event-store.js';
import type { EventStore, RecordedEvent } from '../event-store/port.js';
import { EventDecodeError } from '../events/codec/codec.js';
import { leadReceivedSealer } from '../events/codec/lead-received-sealer.js';
import { LEAD_RECEIVED_SCHEMA, type LeadContacts, type LeadReceived, SEALED_FROM_SCHEMA, sealedAfterTheFact } from '../events/lead-events.js';
import type { PiiEnvelope } from '../leads/lead.js';
import { normaliseConsumer } from '../leads/validate.js';
import type { ContactHashes } from './contact-hashes.js';
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
}

/** Where each run that sealed leads records how it ended (no personal data): that the store has none left in clear. */
export const SEALING_STREAM = 'clear-leads-sealing';

interface ClearLeadsSealed {
  readonly type: 'ClearLeadsSealed';
  readonly data: { readonly sealed: number; readonly shredded: number; readonly unreadable: number; readonly sealed_at: string };
}

const isClear = (event: StoredEvent): boolean => event[1] === 'LeadReceived' && event[3]?.schema !== LEAD_RECEIVED_SCHEMA;
const SHREDDED_BY = new Set(['LeadPersonalDataErased', 'LeadPersonalDataExpired']);

/**
 * Seals every LeadReceived written in clear, `onBatch` told how many so far. Meant for a store no
 * service writes to meanwhile (the command holds the leases, and says so).
 */
export async function sealClearLeads(deps: ClearLeadsDeps, onBatch: (sealed: number) => void = () => {}): Promise<ClearLeadsReport> {
  const sealer = leadReceivedSealer(deps.keys);
  let sealed = 0;
  let shredded = 0;
  const unreadable: string[] = [];
  await deps.raw.rewriteCommits({ streams: 'lead-[0-9]*', holding: '"LeadReceived"' }, async (commits) => {
    const replaced = new Map<number, StoredEvent[]>();
    const toDestroy: string[] = [];
    for (const commit of commits) {
      const at = commit.events.findIndex(isClear);
      if (at < 0) continue;
      const stream = await readable(deps.store, commit);
      if (stream === null) {
        unreadable.push(commit.stream);
        continue;
      }
      const received = stream[commit.firstRevision + at]!;
      const data = received.data as LeadReceived['data'];
      const context = { streamId: commit.stream, type: 'LeadReceived' };
      const sealedData = (await sealer.seal({ ...data, ...contactsOf(deps.hashes, data) }, context)) as LeadReceived['data'];
      const stored = commit.events[at]!;
      const events = [...commit.events];
      events[at] = [stored[0], stored[1], sealedData, { ...stored[3], schema: LEAD_RECEIVED_SCHEMA, [SEALED_FROM_SCHEMA]: stored[3]?.schema ?? 0 }];
      replaced.set(commit.position, events);
      sealed++;
      const key = (sealedData.lead as { pii?: PiiEnvelope } | null)?.pii?.key;
      if (key !== undefined && stream.some((event) => SHREDDED_BY.has(event.type))) {
        toDestroy.push(key);
        shredded++;
      }
    }
    // Before the rewrite is stored: a crash in between leaves these leads in clear, to be sealed
    // again by the next run, never sealed with a key that should be gone.
    if (toDestroy.length > 0) await deps.keys.destroy(toDestroy);
    onBatch(sealed);
    return replaced;
  });
  const ended: ClearLeadsSealed = { type: 'ClearLeadsSealed', data: { sealed, shredded, unreadable: unreadable.length, sealed_at: new Date().toISOString() } };
  await deps.store.append(SEALING_STREAM, [ended]);
  return { sealed, shredded, unreadable };
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
 * recorded sealing every one. Reads the start of `$all` up to the first lead (at most `limit`
 * events) and the sealing stream.
 */
export async function holdsClearLeads(store: EventStore, limit = 1000): Promise<boolean> {
  const first = (await store.readAll({ maxCount: limit })).find((event) => event.type === 'LeadReceived' && /^lead-\d+$/.test(event.streamId));
  if (first === undefined) return false;
  if (first.metadata.stored_schema !== undefined) return true;
  if (!sealedAfterTheFact(first)) return false;
  const last = (await store.readStream(SEALING_STREAM)).at(-1) as unknown as ClearLeadsSealed | undefined;
  return last === undefined || last.data.unreadable > 0;
}


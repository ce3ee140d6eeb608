import { createHash } from 'node:crypto';
import type { EventStore, Position } from '../event-store/port.js';
import { type LeadContacts, type LeadEvent, leadStream } from '../events/lead-events.js';
import { type ActingPrincipal, leadCorrelation, leadEventMetadata } from '../events/lead-metadata.js';
import type { PiiEnvelope } from '../leads/lead.js';
import type { ReadModelStore } from '../read-models/port.js';
import { type ContactHashes, contactStream } from '../personal-data/contact-hashes.js';
import type { PersonalDataKeys } from '../personal-data/data-keys.js';
import { CLAIM_IN_FLIGHT_MS, type ContactClaimed, type ContactRegistry } from './contacts.js';
import { type Decider, handleCommand, readFolded } from './handler.js';

// Erasure on a consumer's request, by crypto-shredding: the data keys of every lead of the
// consumer are destroyed, so the sealed personal fields in the event store can never be read
// again, although the events themselves are never rewritten. Each lead's stream records
// LeadPersonalDataErased (the projections drop their copies, a pending delivery is cancelled),
// and the erasure's own stream, `erasure-{id}`, records ConsumerErased: the contact hashes, the
// lead ids, when and by whom; no personal data.
//
// The erasure id is derived from the consumer's contact hashes, so asking again (after a crash
// half-way, or a retried request) continues the same erasure, and every step is idempotent: a
// destroyed key stays destroyed, a lead already marked is not marked again, and a lead is
// reported in ConsumerErased once (its stream is appended at the revision read, so two requests
// racing report each lead once). A lead posted while an erasure runs is found by the next look
// (the erasure looks again after each round, up to the event store's head), so when the answer
// is given, every lead recorded up to its last look (`as_of`) is erased. A post whose claims on
// the consumer's contacts a look sees, but whose lead is not recorded yet, is waited for before
// the next look, until its lead lands or its claim lapses.
//
// A process whose key cache still holds a destroyed key (another instance, a CLI) must not open
// the lead with it: every reader checks the lead's mark first (the read models are scrubbed
// before the erasure answers; readers of a lead's stream look for the mark in it).
//
// The same per-lead step, with LeadPersonalDataExpired, is what the retention sweep records.

/** A consumer as an erasure or access request names it: the keyed hashes of its contacts. */
export type ConsumerContacts = Partial<LeadContacts>;

export interface ConsumerErased {
  readonly type: 'ConsumerErased';
  readonly data: {
    readonly erasure_id: string;
    readonly contacts: ConsumerContacts;
    readonly lead_ids: number[];
    readonly suppressed: boolean;
    /** The API key (its name and role) or `cli` that asked. */
    readonly principal: string;
    readonly erased_at: string;
    /** The event store's head when the leads were looked up: every lead of the consumer up to it is erased. */
    readonly looked_up_to: Position;
  };
}

const erasureStream = (erasureId: string): string => `erasure-${erasureId}`;

/** The erasure's stream: which leads it reported, whether it suppressed the contacts. */
interface ErasureState {
  readonly exists: boolean;
  readonly reported: ReadonlySet<number>;
  readonly suppressed: boolean;
}

/** Records a round of an erasure: the leads not reported before, once. */
const erasureDecider: Decider<ConsumerErased['data'], ErasureState, ConsumerErased> = {
  initialState: { exists: false, reported: new Set(), suppressed: false },
  evolve(state, event) {
    if (event.type !== 'ConsumerErased') return state;
    return { exists: true, reported: new Set([...state.reported, ...event.data.lead_ids]), suppressed: state.suppressed || event.data.suppressed };
  },
  decide(data, state) {
    const leadIds = data.lead_ids.filter((id) => !state.reported.has(id));
    if (leadIds.length === 0 && state.exists && !(data.suppressed && !state.suppressed)) return [];
    return [{ type: 'ConsumerErased', data: { ...data, lead_ids: leadIds } }];
  },
};

/** The erasure id of a consumer: a hash of its contact hashes (which are keyed: not reversible). */
function erasureIdOf(contacts: ConsumerContacts): string {
  return createHash('sha256')
    .update(JSON.stringify([contacts.email ?? null, contacts.mobile ?? null]))
    .digest('hex')
    .slice(0, 32);
}

/** What the lead's stream says about its personal data and its delivery. */
interface LeadShredState {
  readonly leadId: number | null;
  readonly keyId: string | null;
  /** Recorded without personal data (refused SUPPRESSED or INVALID): there is nothing to erase. */
  readonly holdsNothing: boolean;
  readonly gone: boolean;
  /** What made it gone: the erasure's id, or `retention`. */
  readonly goneBy: string | null;
  readonly test: boolean;
  readonly target: { readonly buyer: string | null; readonly bucket: string | null } | null;
  readonly settled: boolean;
  /** The buyer whose webhook received the lead. */
  readonly webhookBuyer: string | null;
  readonly attempts: number;
  readonly correlationId: string | null;
  readonly supplier: string | null;
}

type ShredCommand =
  | { readonly type: 'Erase'; readonly erasureId: string; readonly now: Date }
  | { readonly type: 'Expire'; readonly retentionDays: number; readonly now: Date };

const initialShred: LeadShredState = {
  leadId: null,
  keyId: null,
  holdsNothing: false,
  gone: false,
  goneBy: null,
  test: false,
  target: null,
  settled: false,
  webhookBuyer: null,
  attempts: 0,
  correlationId: null,
  supplier: null,
};

const leadShredDecider: Decider<ShredCommand, LeadShredState, LeadEvent> = {
  initialState: initialShred,
  evolve(state, recorded) {
    const event = recorded as LeadEvent;
    switch (event.type) {
      case 'LeadReceived': {
        const pii = (event.data.lead as { pii?: PiiEnvelope } | null)?.pii;
        return {
          ...state,
          leadId: event.data.lead_id,
          keyId: pii?.key ?? null,
          holdsNothing: event.data.lead === null,
          test: event.data.test,
          supplier: event.data.supplier,
          correlationId: leadCorrelation(recorded),
        };
      }
      case 'LeadRouted':
        return event.data.target.kind === 'bucket' ? { ...state, target: { buyer: null, bucket: event.data.target.id } } : state;
      case 'LeadSold':
        return { ...state, target: { buyer: event.data.buyer, bucket: null } };
      // Only a webhook is attempted. From its first attempt on, the buyer may hold the lead, whatever
      // the attempt comes to: it may be answering still, or have stored it and answered 5xx or not
      // in time. An erasure then tells it so, rather than leave its copy unmentioned.
      case 'LeadDeliveryAttempted':
        return { ...state, attempts: Math.max(state.attempts, event.data.attempt), webhookBuyer: event.data.buyer };
      case 'LeadDelivered':
        return { ...state, settled: true, webhookBuyer: event.data.via === 'webhook' ? event.data.buyer : state.webhookBuyer };
      case 'LeadDeliveryFailed':
        return event.data.next_attempt_at === null ? { ...state, settled: true } : state;
      // A delivery that failed for good and is sent again is pending again: an erasure cancels it.
      case 'LeadRedeliveryRequested':
        return { ...state, settled: false };
      case 'LeadDeliveryCancelled':
        return { ...state, settled: true };
      case 'LeadPersonalDataErased':
        return { ...state, gone: true, goneBy: state.goneBy ?? event.data.erasure_id };
      case 'LeadPersonalDataExpired':
        return { ...state, gone: true, goneBy: state.goneBy ?? RETENTION };
      default:
        return state;
    }
  },
  decide(command, state) {
    if (state.leadId === null || state.gone || state.holdsNothing) return [];
    const at = command.now.toISOString();
    const lead_id = state.leadId;
    const hadDelivery = state.target !== null && !state.test;
    const events: LeadEvent[] = [
      command.type === 'Erase'
        ? {
            type: 'LeadPersonalDataErased',
            data: { lead_id, erasure_id: command.erasureId, had_delivery: hadDelivery, notify_buyer: state.webhookBuyer, erased_at: at },
          }
        : {
            type: 'LeadPersonalDataExpired',
            data: { lead_id, retention_days: command.retentionDays, had_delivery: hadDelivery, notify_buyer: state.webhookBuyer, expired_at: at },
          },
    ];
    // A delivery not made yet is never made: there is nothing left to deliver.
    if (hadDelivery && !state.settled) {
      const { buyer, bucket } = state.target!;
      const reason = command.type === 'Erase' ? 'erased' : 'expired';
      events.push({ type: 'LeadDeliveryCancelled', data: { lead_id, buyer, bucket, attempts: state.attempts, reason, cancelled_at: at } });
    }
    return events;
  },
};

/** Why leads are shredded, for their marks' metadata: the erasure or the sweep, and the request that asked. */
export interface ShredOrigin {
  readonly causationId: string;
  readonly traceId?: string | null;
  readonly principal?: ActingPrincipal;
}

const RETENTION = 'retention';

/** What a shredding did with each lead it was given. */
export interface Shredded {
  /** Marked now. */
  readonly marked: number[];
  /** Marked now, or before by the same erasure (a run cut short) or sweep: what it reports as its own. */
  readonly erased: number[];
  /** Nothing to do: no personal data, already gone by another erasure or the sweep, or no lead. */
  readonly untouched: number[];
}

/**
 * Shreds leads: records why on each lead's stream (the mark, with its delivery cancelled), then
 * destroys their data keys (all in one key-store write). The mark comes first: every reader checks
 * it before it opens a lead, so a key still cached in another process (the delivery worker's)
 * opens nothing from then on, where a key destroyed before a mark that failed to land left the
 * lead's pending delivery to be sent with the cached key. A run cut between the two leaves marked
 * leads whose keys remain: every run destroys the keys of the marked leads it is given, so the
 * erasure asked again (as its failure says to) or the next sweep finishes it. Idempotent.
 */
export async function shredLeads(
  store: EventStore,
  keys: PersonalDataKeys,
  leadIds: readonly number[],
  command: ShredCommand,
  origin: ShredOrigin,
): Promise<Shredded> {
  const marked: number[] = [];
  const erased: number[] = [];
  const untouched: number[] = [];
  const cause = command.type === 'Erase' ? command.erasureId : RETENTION;
  for (let from = 0; from < leadIds.length; from += SHRED_BATCH) {
    const batch = leadIds.slice(from, from + SHRED_BATCH);
    const read = await Promise.all(batch.map(async (id) => ({ id, folded: await readFolded(store, leadStream(id), leadShredDecider) })));
    const due = read.filter(({ folded }) => folded.state.leadId !== null && !folded.state.gone && !folded.state.holdsNothing);
    for (const { id, folded } of read) {
      if (folded.state.gone && folded.state.goneBy === cause) erased.push(id);
      else if (!due.some((lead) => lead.id === id)) untouched.push(id);
    }
    const markedHere = new Set<number>();
    await Promise.all(
      due.map(async ({ id, folded }) => {
        const handled = await handleCommand(store, leadStream(id), leadShredDecider, command, {
          from: folded,
          metadata: (state) =>
            leadEventMetadata(
              { traceId: origin.traceId ?? null, correlationId: state.correlationId, causationId: origin.causationId, supplierId: state.supplier, ...(origin.principal ? { principal: origin.principal } : {}) },
              command.now,
            ),
        });
        if (handled.events.length > 0) markedHere.add(id);
      }),
    );
    for (const { id } of due) {
      if (markedHere.has(id)) marked.push(id);
      // Not marked here: a request racing this one marked it first, and each reports it.
      erased.push(id);
    }
    // Every lead of the batch that is now gone: marked here, or before (a run cut short here).
    const keyIds = read.filter(({ folded }) => folded.state.gone || markedHere.has(folded.state.leadId ?? -1)).map(({ folded }) => folded.state.keyId).filter((key) => key !== null);
    if (keyIds.length > 0) await keys.destroy(keyIds);
  }
  const order = (ids: number[]) => ids.sort((a, b) => a - b);
  return { marked: order(marked), erased: order(erased), untouched: order(untouched) };
}

/** Leads read and shredded together: one key-store write for their keys, their marks appended side by side. */
const SHRED_BATCH = 50;

export interface ConsumerLeadsDeps {
  readonly store: EventStore;
  readonly readModels: ReadModelStore;
  /** The leads collection being served. */
  readonly leads: () => string;
  /** Resolves once the read models reflect the store up to `position`. */
  readonly caughtUp: (position: Position) => Promise<void>;
}

const PAGE = 500;

/**
 * The ids of every lead recorded with either contact, oldest first, as of the event store's head
 * when asked: the read models are waited for up to it first, so a lead just posted is found. An
 * accepted lead is named by its claim in the contact's stream; a test or rejected lead, which holds
 * no claim, by the contact hashes its view carries (see unclaimedContacts).
 */
export async function consumerLeadIds(deps: ConsumerLeadsDeps, contacts: ConsumerContacts): Promise<number[]> {
  return (await consumerLeadsAsOf(deps, contacts)).ids;
}

/** A post that has claimed a contact and may still record its lead: until when it may. */
interface PostInFlight {
  readonly leadId: number;
  readonly until: number;
}

/** consumerLeadIds, with the head they are complete up to, and the posts of the consumer still in flight. */
async function consumerLeadsAsOf(deps: ConsumerLeadsDeps, contacts: ConsumerContacts): Promise<{ ids: number[]; head: Position; inFlight: PostInFlight[] }> {
  const head = await deps.store.headPosition();
  await deps.caughtUp(head);
  const ids = new Set<number>();
  const inFlight = new Map<number, PostInFlight>();
  for (const [field, hash] of [['contact_email', contacts.email], ['contact_mobile', contacts.mobile]] as const) {
    if (!hash) continue;
    const claiming = await claimingLeads(deps.store, hash);
    for (const id of claiming.recorded) ids.add(id);
    for (const post of claiming.inFlight) inFlight.set(post.leadId, post);
    let after: { value: string; id: string } | undefined;
    for (;;) {
      const docs = await deps.readModels.find(deps.leads(), { filter: { [field]: hash }, sort: { field: 'received_at', direction: 'asc' }, ...(after ? { after } : {}), limit: PAGE });
      for (const doc of docs) ids.add(Number(doc._id));
      const last = docs.at(-1);
      if (docs.length < PAGE || !last) break;
      after = { value: String(last.received_at), id: last._id };
    }
  }
  return { ids: [...ids].sort((a, b) => a - b), head, inFlight: [...inFlight.values()].filter((post) => !ids.has(post.leadId)) };
}

/**
 * The recorded leads that ever claimed the contact. A claim is made before its lead is recorded,
 * so a claim whose lead has no stream is a post still on its way (for CLAIM_IN_FLIGHT_MS after
 * the claim, as the duplicate check counts it) or one that failed: only leads with a stream count.
 */
async function claimingLeads(store: EventStore, hash: string): Promise<{ recorded: number[]; inFlight: PostInFlight[] }> {
  const claimed = new Map<number, string>();
  // A claim given back is of a post that ended without its lead: nothing to wait for.
  const released = new Set<number>();
  for (const event of await store.readStream(contactStream(hash))) {
    if (event.type === 'ContactClaimed') {
      const claim = event.data as ContactClaimed['data'];
      claimed.set(claim.lead_id, claim.claimed_at);
    } else if (event.type === 'ContactReleased') released.add((event.data as { lead_id: number }).lead_id);
  }
  const ids = [...claimed.keys()];
  const recorded: number[] = [];
  const inFlight: PostInFlight[] = [];
  // A contact many leads gave (a placeholder e-mail) may name thousands: read them a batch at a time.
  for (let from = 0; from < ids.length; from += SHRED_BATCH) {
    const batch = ids.slice(from, from + SHRED_BATCH);
    const firsts = await Promise.all(batch.map((id) => store.readStream(leadStream(id), { maxCount: 1 })));
    batch.forEach((id, i) => {
      if (firsts[i]![0]?.type === 'LeadReceived') recorded.push(id);
      else if (!released.has(id)) {
        const until = Date.parse(claimed.get(id)!) + CLAIM_IN_FLIGHT_MS;
        if (until > Date.now()) inFlight.push({ leadId: id, until });
      }
    });
  }
  return { recorded, inFlight };
}

const IN_FLIGHT_POLL_MS = 50;

/** Resolves once each post has recorded its lead, or can no longer (its claim has lapsed). */
async function postsLanded(store: EventStore, posts: readonly PostInFlight[]): Promise<void> {
  let waiting = [...posts];
  while (waiting.length > 0) {
    const firsts = await Promise.all(waiting.map((post) => store.readStream(leadStream(post.leadId), { maxCount: 1 })));
    waiting = waiting.filter((post, i) => firsts[i]!.length === 0 && post.until > Date.now());
    if (waiting.length > 0) await new Promise((resolve) => setTimeout(resolve, IN_FLIGHT_POLL_MS));
  }
}

export interface ErasureDeps extends ConsumerLeadsDeps {
  readonly keys: PersonalDataKeys;
  readonly hashes: ContactHashes;
  readonly contacts: ContactRegistry;
  readonly now: () => Date;
}

/** An erasure as its stream tells it: every request that erased something, in order. */
export interface ErasureRecord {
  readonly erasure_id: string;
  readonly status: 'completed';
  /** Which contacts named the consumer (never their values). */
  readonly fields: Array<'email' | 'mobile'>;
  readonly suppressed: boolean;
  readonly leads_erased: number;
  readonly lead_ids: number[];
  readonly first_erased_at: string;
  readonly last_erased_at: string;
  /** Every lead of the consumer recorded up to this place in the event log is erased. */
  readonly as_of: Position;
  readonly requests: Array<{ readonly erased_at: string; readonly principal: string; readonly lead_ids: number[]; readonly suppressed: boolean }>;
}

export interface ErasureRequest {
  /** Normalised (lower-cased e-mail, E.164 mobile); at least one. */
  readonly email?: string;
  readonly mobile?: string;
  readonly suppress: boolean;
  /** Who asked, for the record. */
  readonly principal: string;
  /** The request that asked (an API request's trace and key; the CLI has neither), for the events' metadata. */
  readonly traceId?: string | null;
  readonly actor?: ActingPrincipal;
}

/**
 * Rounds of "look, erase what is new" an erasure makes while posts of the consumer keep arriving;
 * what arrives after the last look is left to the next request (the answer's `as_of` says where
 * it stopped).
 */
const MAX_ROUNDS = 5;

export class ConsumerEraser {
  constructor(private readonly deps: ErasureDeps) {}

  /** The consumer's contact hashes. */
  contactsOf(request: { readonly email?: string | undefined; readonly mobile?: string | undefined }): ConsumerContacts {
    return {
      ...(request.email ? { email: this.deps.hashes.hash('email', request.email) } : {}),
      ...(request.mobile ? { mobile: this.deps.hashes.hash('mobile', request.mobile) } : {}),
    };
  }

  /**
   * Erases every lead of the consumer and records it. `created` is false when nothing new was
   * erased (the same erasure asked again): the answer is then the record as it stood.
   */
  async erase(request: ErasureRequest): Promise<{ created: boolean; erasure: ErasureRecord }> {
    const contacts = this.contactsOf(request);
    const erasureId = erasureIdOf(contacts);
    const stream = erasureStream(erasureId);
    let folded = await readFolded(this.deps.store, stream, erasureDecider);
    let created = false;
    let lastLook: Position | null = null;
    // Leads found that hold nothing to erase (refused without personal data, or erased by another
    // request or the retention sweep): not this erasure's, and not looked at again.
    const untouched = new Set<number>();
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const look = await consumerLeadsAsOf(this.deps, contacts);
      lastLook = look.head;
      const fresh = look.ids.filter((id) => !folded.state.reported.has(id) && !untouched.has(id));
      const suppressNow = request.suppress && !folded.state.suppressed;
      // Nothing new, no post of the consumer on its way, and the request is on record: done.
      if (fresh.length === 0 && !suppressNow && folded.state.exists && look.inFlight.length === 0) break;
      const now = this.deps.now();
      const origin = { causationId: `erasure:${erasureId}`, traceId: request.traceId ?? null, ...(request.actor ? { principal: request.actor } : {}) };
      const shredded = await shredLeads(this.deps.store, this.deps.keys, fresh, { type: 'Erase', erasureId, now }, origin);
      for (const id of shredded.untouched) untouched.add(id);
      if (suppressNow) for (const hash of Object.values(contacts)) await this.deps.contacts.suppress(hash, erasureId, now);
      const data: ConsumerErased['data'] = {
        erasure_id: erasureId,
        contacts,
        lead_ids: shredded.erased,
        suppressed: request.suppress,
        principal: request.principal,
        erased_at: now.toISOString(),
        looked_up_to: look.head,
      };
      // At the revision read: of two requests racing, the second reports only what the first did not.
      const handled = await handleCommand(this.deps.store, stream, erasureDecider, data, {
        from: folded,
        // The request begins the erasure: its trace is the correlation of what it records.
        metadata: {
          trace_id: origin.traceId,
          occurred_at: data.erased_at,
          correlation_id: origin.traceId,
          causation_id: origin.causationId,
          ...(origin.principal ? { principal: origin.principal } : {}),
        },
      });
      folded = handled;
      if (handled.events.length > 0) created = true;
      // The answer waits for the read models to show the marks: no instance serves a copy after it.
      await this.deps.caughtUp(await this.deps.store.headPosition());
      // A post that claimed the consumer's contacts before this look (or before the suppression)
      // records its lead after it: waited for, so that the next look erases it (the last round
      // makes no next look).
      if (round < MAX_ROUNDS - 1) await postsLanded(this.deps.store, look.inFlight);
    }
    const erasure = (await this.record(erasureId))!;
    return { created, erasure: { ...erasure, as_of: lastLook ?? erasure.as_of } };
  }

  /** The erasure as recorded; null when there is none with that id. */
  async record(erasureId: string): Promise<ErasureRecord | null> {
    if (!/^[0-9a-f]{32}$/.test(erasureId)) return null;
    const events = await this.history(erasureId);
    if (events.length === 0) return null;
    const first = events[0]!.data;
    const leadIds = events.flatMap((e) => e.data.lead_ids);
    return {
      erasure_id: erasureId,
      status: 'completed',
      fields: (['email', 'mobile'] as const).filter((field) => first.contacts[field] !== undefined),
      suppressed: events.some((e) => e.data.suppressed),
      leads_erased: leadIds.length,
      lead_ids: leadIds,
      first_erased_at: first.erased_at,
      last_erased_at: events.at(-1)!.data.erased_at,
      as_of: events.at(-1)!.data.looked_up_to,
      requests: events.map((e) => ({ erased_at: e.data.erased_at, principal: e.data.principal, lead_ids: e.data.lead_ids, suppressed: e.data.suppressed })),
    };
  }

  private async history(erasureId: string): Promise<ConsumerErased[]> {
    const events = await this.deps.store.readStream(erasureStream(erasureId));
    return events.filter((e) => e.type === 'ConsumerErased') as unknown as ConsumerErased[];
  }
}

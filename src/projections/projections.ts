import type { ConsumerErased } from '../commands/erasure.js';
import type { RecordedEvent } from '../event-store/port.js';
import type { LeadEvent, LeadReceived } from '../events/lead-events.js';
import type { PingEvent } from '../events/ping-events.js';
import type { IndexSpec, ReadWrite } from '../read-models/port.js';
import { scrubbedLead } from '../leads/lead.js';
import { leadViewChanges, leadViewFeedback, unclaimedContacts } from './lead-view.js';
import { type ReportCounts, cents, reportCounts } from './report-counters.js';

// The projections from `$all` into read models. Each has a name and a version: a new version
// rebuilds into new collections (`leads_v2`) and the service switches when it has caught up.
// A version is what its build holds, and what events it folds: a projection that starts to fold an
// event it passed over needs a new version too. An older release's projector with the same version
// would otherwise pass over that event in the same build and move its checkpoint past it.

/** A value now, or later when it had to be read from the store. */
export type MaybePromise<T> = T | Promise<T>;

export interface ProjectionContext {
  /**
   * The LeadReceived of a lead: from memory when the lead's events arrived together (almost
   * always, and then synchronously: a rebuild handles every event of the store, and a promise
   * per event would add work to each), else read from its stream.
   */
  received(leadId: number): MaybePromise<LeadReceived['data'] | null>;
  /** The physical name of one of this projection's collections in the version being built. */
  collection(base: string): string;
}

export interface Projection {
  readonly name: string;
  readonly version: number;
  readonly collections: readonly string[];
  readonly indexes: Readonly<Record<string, ReadonlyArray<IndexSpec>>>;
  handle(event: RecordedEvent, context: ProjectionContext): MaybePromise<ReadWrite[]>;
}

type Received = LeadReceived['data'] | null;

/** Runs `then` with the lead's LeadReceived, synchronously when it is in memory. */
function withReceived<T>(context: ProjectionContext, leadId: number, then: (received: Received) => T): MaybePromise<T> {
  const received = context.received(leadId);
  return received instanceof Promise ? received.then(then) : then(received);
}

const NONE: ReadWrite[] = [];

const LEAD_EVENTS = new Set([
  'LeadReceived',
  'LeadRejected',
  'LeadEnriched',
  'LeadRouted',
  'LeadSold',
  'LeadPingMatched',
  'LeadDelivered',
  'LeadDeliveryFailed',
  'LeadRedeliveryRequested',
  'FeedbackRecorded',
  'LeadReturned',
  'LeadDeliveryCancelled',
  'LeadPersonalDataErased',
  'LeadPersonalDataExpired',
]);
const SCRUBS = new Set(['LeadPersonalDataErased', 'LeadPersonalDataExpired']);
const asLead = (event: RecordedEvent) => event as unknown as LeadEvent & RecordedEvent;

/**
 * Version 2: each lead's view also carries the report counters its events added, and is indexed
 * on s1, so that a report by s1 is summed from it (version 1 had neither). Version 3: only a lead
 * that holds no claim on its contacts (test, rejected) carries their hashes (see unclaimedContacts).
 * Version 4: the erasures' requests too, which the admins' list of erasures reads (the record of
 * consumers' requests a business keeps); a new version, so that an upgraded data dir lists the
 * erasures made before it.
 */
export const leadsProjection: Projection = {
  name: 'leads',
  version: 4,
  collections: ['leads', 'erasures'],
  // The leads list reads each caller's scope newest first: all leads, a supplier's, a buyer's
  // sales. A filter on status, code or source is applied while that range is read, not given an
  // index of its own: every index is written on every update of a lead's view, and nine of them
  // cost the leads rebuild nearly half again its CPU. The runner creates missing indexes when it
  // opens a build, so an index added here needs no new version. A report by s1 reads the views in
  // s1 order, all of them or a supplier's, a page of click ids at a time. A buyer's index holds
  // only the leads sold (see IndexSpec): an unsold lead costs it nothing.
  indexes: {
    leads: [
      ['received_at'],
      ['supplier', 'received_at'],
      { fields: ['buyer', 'lead_status', 'received_at'], whereSet: 'buyer' },
      // A consumer's leads that hold no claim on its contacts (test and rejected leads), for an
      // erasure or an access request, by either contact's keyed hash; the claims name the others.
      { fields: ['contact_email', 'received_at'], whereSet: 'contact_email' },
      { fields: ['contact_mobile', 'received_at'], whereSet: 'contact_mobile' },
      // A report by s1 walks these (see report-counters.ts).
      ['s1'],
      ['supplier', 's1'],
    ],
    erasures: [['erased_at']],
  },
  handle(event, context) {
    if (event.type === 'ConsumerErased') return erasureWrites(event, context.collection('erasures'));
    if (!LEAD_EVENTS.has(event.type)) return NONE;
    const lead = asLead(event);
    const id = String(lead.data.lead_id);
    const feedback = leadViewFeedback(lead);
    if (feedback) return [{ op: 'push', collection: context.collection('leads'), id, position: event.position, field: 'feedback', value: feedback }];
    const set: Record<string, unknown> = leadViewChanges(lead);
    const write = (): ReadWrite[] => [{ op: 'set', collection: context.collection('leads'), id, position: event.position, set }];
    // Erased or expired: the sealed envelope goes, the fields that are not personal stay.
    if (SCRUBS.has(event.type)) {
      return withReceived(context, lead.data.lead_id, (received) => {
        set.lead = scrubbedLead(received?.lead);
        return write();
      });
    }
    // A rejected lead is found by an erasure through its view: it carries its contacts from its LeadReceived.
    if (event.type === 'LeadRejected') {
      return withReceived(context, lead.data.lead_id, (received) => {
        Object.assign(set, unclaimedContacts(received));
        return write();
      });
    }
    if (!('delivery' in set)) return write();
    // A test lead is never delivered: its view says so rather than showing a pending delivery.
    return withReceived(context, lead.data.lead_id, (received) => {
      if (received?.test) set.delivery = null;
      return write();
    });
  },
};

/**
 * A request recorded for an erasure (its first, and each later one that erased more or newly
 * suppressed): when, by whom, which contacts named the consumer (never their hashes), how many
 * leads it erased. A row per request, as a record of consumers' requests is kept; the erasure's id
 * leads to the whole of it.
 */
function erasureWrites(event: RecordedEvent, collection: string): ReadWrite[] {
  const { erasure_id, contacts, lead_ids, suppressed, principal, erased_at } = (event as unknown as ConsumerErased).data;
  const fields = (['email', 'mobile'] as const).filter((field) => contacts[field] !== undefined);
  const doc = { erasure_id, erased_at, principal, fields, suppressed, leads_erased: lead_ids.length };
  return [{ op: 'put', collection, id: event.id, position: event.position, doc }];
}

export const deliveriesProjection: Projection = {
  name: 'deliveries',
  // 2: rows no longer carry a copy of the lead (the read-back folds it from the lead's stream).
  // 3: a delivered row keeps how it was delivered (`via`), which the read-back answers as its
  // delivery_kind rather than the buyer's delivery in the routing file in force (see read-back.ts).
  // Version 3 also folds ErasureNoticeRedeliveryRequested, a type no release before it wrote: an
  // upgrade in place finds none in the events, and older releases never run beside this one
  // (roles/older-release.ts). From now on a type folded anew takes a new version (see above).
  version: 3,
  collections: ['deliveries'],
  indexes: {
    // One per filter the deliveries list takes (buyer and bucket with or without a status), each
    // ending in created_at: a page is then a range of an index read in order, never a sort. A row
    // is a buyer's or a bucket's, never both, and each index of one side holds only its rows.
    deliveries: [
      ['created_at'],
      ['supplier', 'created_at'],
      { fields: ['buyer', 'created_at'], whereSet: 'buyer' },
      { fields: ['bucket', 'created_at'], whereSet: 'bucket' },
      { fields: ['buyer', 'status', 'created_at'], whereSet: 'buyer' },
      { fields: ['bucket', 'status', 'created_at'], whereSet: 'bucket' },
      ['status', 'created_at'],
      // The webhook worker's due rows: a settled or bucket row has no next attempt.
      { fields: ['status', 'next_attempt_at'], whereSet: 'next_attempt_at' },
      // The `lead.erased` notices due to webhook buyers: only a received lead's erasure sets one.
      { fields: ['notice', 'notice_next_at'], whereSet: 'notice' },
    ],
  },
  handle(event, context) {
    switch (event.type) {
      case 'LeadSold':
      case 'LeadRouted':
      case 'LeadDeliveryAttempted':
      case 'LeadDeliveryFailed':
      case 'LeadRedeliveryRequested':
      case 'LeadDelivered':
      case 'LeadDeliveryCancelled':
      case 'LeadPersonalDataErased':
      case 'LeadPersonalDataExpired':
      case 'ErasureNoticeSent':
      case 'ErasureNoticeFailed':
      case 'ErasureNoticeRedeliveryRequested': {
        const lead = asLead(event);
        return withReceived(context, lead.data.lead_id, (received) => deliveryWrites(lead, context.collection('deliveries'), received));
      }
      default:
        return NONE;
    }
  },
};

/** What one event changes in the deliveries collection, given its lead's LeadReceived. */
function deliveryWrites(lead: LeadEvent & RecordedEvent, collection: string, received: Received): ReadWrite[] {
  // A test lead is never delivered, so it has no delivery row; nor has a lead without a LeadReceived.
  if (!received || received.test) return NONE;
  const id = String(lead.data.lead_id);
  const write = (set: Record<string, unknown>): ReadWrite[] => [{ op: 'set', collection, id, position: lead.position, set }];
  switch (lead.type) {
    case 'LeadSold':
    case 'LeadRouted': {
      if (lead.type === 'LeadRouted' && lead.data.target.kind !== 'bucket') return NONE;
      const at = new Date(lead.created).toISOString();
      const target = lead.type === 'LeadSold' ? { buyer: lead.data.buyer, bucket: null } : { buyer: null, bucket: lead.data.target.id };
      const doc = {
        lead_id: lead.data.lead_id,
        supplier: received.supplier,
        ...target,
        status: 'pending',
        attempts: 0,
        last_attempt_at: null,
        last_status_code: null,
        last_error: null,
        delivered_at: null,
        next_attempt_at: lead.type === 'LeadSold' ? at : null,
        created_at: at,
      };
      return [{ op: 'put', collection, id, position: lead.position, doc }];
    }
    case 'LeadDeliveryAttempted':
      return write({ attempts: lead.data.attempt, last_attempt_at: lead.data.started_at });
    case 'LeadDeliveryFailed':
      return write({
        status: lead.data.cancelled ? 'cancelled' : lead.data.next_attempt_at === null ? 'failed' : 'pending',
        attempts: lead.data.attempt,
        last_attempt_at: lead.data.failed_at,
        last_status_code: lead.data.status,
        last_error: lead.data.error,
        next_attempt_at: lead.data.next_attempt_at,
      });
    // Pending again and due at once. Why its last attempt failed stays shown until the next one says otherwise.
    case 'LeadRedeliveryRequested':
      return write({ status: 'pending', next_attempt_at: lead.data.requested_at });
    case 'LeadDeliveryCancelled':
      return write({ status: 'cancelled', attempts: lead.data.attempts, next_attempt_at: null });
    case 'LeadPersonalDataErased':
      if (!lead.data.had_delivery) return NONE;
      return write({
        erased: true,
        ...(lead.data.notify_buyer ? { notice: 'pending', notice_next_at: lead.data.erased_at } : {}),
      });
    case 'LeadPersonalDataExpired':
      if (!lead.data.had_delivery) return NONE;
      return write({
        erased: true,
        ...(lead.data.notify_buyer ? { notice: 'pending', notice_next_at: lead.data.expired_at } : {}),
      });
    case 'ErasureNoticeSent':
      return write({ notice: 'sent', notice_next_at: null });
    case 'ErasureNoticeFailed':
      return write({ notice: lead.data.next_attempt_at === null ? 'failed' : 'pending', notice_next_at: lead.data.next_attempt_at });
    // Sent again after failing for good: pending and due at the request, so the worker's poll of
    // due notices finds it.
    case 'ErasureNoticeRedeliveryRequested':
      return write({ notice: 'pending', notice_next_at: lead.data.requested_at });
    case 'LeadDelivered':
      return write({
        status: 'delivered',
        via: lead.data.via,
        attempts: lead.data.attempt,
        last_attempt_at: lead.data.delivered_at,
        last_status_code: lead.data.status,
        last_error: null,
        delivered_at: lead.data.delivered_at,
        next_attempt_at: null,
      });
    default:
      return NONE;
  }
}

export const feedbackProjection: Projection = {
  name: 'feedback',
  version: 1,
  collections: ['feedback'],
  indexes: { feedback: [['recorded_at'], ['supplier', 'recorded_at'], ['buyer', 'recorded_at'], ['type', 'recorded_at']] },
  handle(event, context) {
    const lead = asLead(event);
    if (lead.type !== 'FeedbackRecorded') return NONE;
    return withReceived(context, lead.data.lead_id, (received): ReadWrite[] => {
      const doc = { ...lead.data, supplier: received?.supplier ?? null };
      return [{ op: 'put', collection: context.collection('feedback'), id: event.id, position: event.position, doc }];
    });
  },
};

/** Report dimensions, in the order of a bucket's key after its hour. Never s1: see reportsProjection. */
const REPORT_DIMENSIONS = ['supplier', 'sid', 'state', 'buyer', 'test'] as const;

/**
 * Report counters in hourly buckets by the dimensions above, whose number grows with time and
 * sources, never with leads. s1 is a click id, about one per lead, so a bucket keyed by it would
 * be a row per lead: a report by s1 instead sums the counters each lead's view carries (see the
 * leads projection), along that collection's index on s1.
 * A bucket holds money of one currency (the key ends with it; null for counts without money): after
 * the routing file's currency changes, a report finds both and refuses to add them up.
 * Version 4: the currency in the key. Version 3 added the money of every currency together;
 * version 2 also kept one row per lead, with its s1 (`report_leads`); version 1 kept s1 in the
 * bucket key.
 */
export const reportsProjection: Projection = {
  name: 'reports',
  version: 4,
  collections: ['report_buckets'],
  indexes: { report_buckets: [['hour'], ['supplier', 'hour']] },
  handle(event, context) {
    if (PING_EVENTS.has(event.type)) return pingReportWrites(event as unknown as PingEvent & RecordedEvent, context.collection('report_buckets'));
    const counted = reportCounts(event);
    if (!counted) return NONE;
    const lead = asLead(event);
    return withReceived(context, lead.data.lead_id, (received) => (received ? bucketWrites(event, context.collection('report_buckets'), counted, received) : NONE));
  },
};

const PING_EVENTS = new Set(['LeadPinged', 'PingBidsCollected', 'PingPosted', 'PingPostReleased']);

/**
 * A ping's counters, in the bucket of the hour it was pinged: the ping under its supplier and
 * source, each standing bid under the buyer that bid, a post under the buyer it sold to at its bid.
 * Buckets only: a ping is no lead, so it has no lead row (a report by s1 shows no pings).
 */
function pingReportWrites(event: PingEvent & RecordedEvent, buckets: string): ReadWrite[] {
  const source = event.data;
  const hour = source.pinged_at.slice(0, 13);
  const write = (buyer: string | null, inc: Record<string, number>, currency: string | null = null): ReadWrite => {
    const dims = { supplier: source.supplier, sid: source.sid, state: source.accident_state, buyer, test: source.test };
    const id = JSON.stringify([hour, ...REPORT_DIMENSIONS.map((d) => dims[d]), currency]);
    return { op: 'inc', collection: buckets, id, position: event.position, inc, setOnInsert: { hour, ...dims, currency } };
  };
  switch (event.type) {
    case 'LeadPinged':
      return [write(null, { pings: 1 })];
    case 'PingBidsCollected': {
      // One write per buyer: its bid's counters, summed over the bids of this ping.
      const { currency } = event.data;
      return event.data.bids.filter((bid) => bid.result === 'bid').map((bid) => write(bid.buyer, { bids: 1, bid_cents: cents(bid.amount!) }, currency));
    }
    case 'PingPosted':
      return [write(event.data.buyer, { ping_posts: 1 })];
    case 'PingPostReleased':
      return [write(event.data.buyer, { ping_posts: -1 })];
  }
}

/** The increments of the lead's report bucket: its hour and dimensions. */
function bucketWrites(event: RecordedEvent, buckets: string, counted: ReportCounts, received: NonNullable<Received>): ReadWrite[] {
  // Hourly buckets in UTC: a report in any whole-hour time zone folds them into its local days.
  const hour = received.received_at.slice(0, 13);
  const dims = { supplier: received.supplier, sid: received.sid, state: received.accident_state, buyer: counted.buyer, test: received.test };
  const id = JSON.stringify([hour, ...REPORT_DIMENSIONS.map((d) => dims[d]), counted.currency]);
  return [{ op: 'inc', collection: buckets, id, position: event.position, inc: counted.counts, setOnInsert: { hour, ...dims, currency: counted.currency } }];
}

export const PROJECTIONS: readonly Projection[] = [leadsProjection, deliveriesProjection, feedbackProjection, reportsProjection];

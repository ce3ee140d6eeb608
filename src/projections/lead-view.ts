import type { RecordedEvent } from '../event-store/port.js';
import { type LeadEvent, type LeadReceived, sealedAfterTheFact } from '../events/lead-events.js';
import { type StoredLead, scrubbedLead } from '../leads/lead.js';
import { leadCounterField, reportCounts } from './report-counters.js';

// The lead view: what GET /functions/leads/{id} shows. Each event contributes the
// fields it sets; the projection writes them, and a lead the projection has not reached yet is
// folded from its own stream with the same function, so both always agree.

export interface LeadView {
  lead_id: number;
  supplier: string;
  sid: string | null;
  s1: string | null;
  lead_status: 'received' | 'sold' | 'unsold' | 'rejected';
  code: string | null;
  sold: boolean;
  revenue: number;
  /** The currency its LeadRouted recorded; before that a placeholder that readers replace (see viewCurrency). */
  currency: string;
  buyer: string | null;
  bucket: string | null;
  test: boolean;
  received_at: string;
  accident_state: string | null;
  errors: Array<{ field: string; code: string; message: string }>;
  enrichment: Record<string, unknown> | null;
  delivery: { status: string; attempts: number } | null;
  feedback: Array<{ buyer: string; type: string; reason: string | null; recorded_at: string }>;
  returned: boolean;
  /** The ping the lead was posted with, and the bid it sold at (buyer null: none could take it); null: posted without one. */
  ping?: { ping_id: string; buyer: string | null; bid: number | null } | null;
  /** The normalised consumer fields: shown only to the supplier that sent it, the buyer that bought it, admin. */
  lead: Record<string, unknown> | null;
  /**
   * The keyed hashes of the lead's mobile and e-mail, only on a lead that holds no claim on them: a
   * test lead, a rejected one, or one written in clear and sealed later (see unclaimedContacts). An erasure finds the others by the claims
   * in the contacts' own streams. Absent, too, on leads from before leads recorded them.
   */
  contact_mobile?: string;
  contact_email?: string;
  /** Its personal data was erased or expired: `lead` keeps only the fields that are not personal. */
  erased?: true;
  /**
   * The report counters the lead's events added (`report_received`, `report_sold`,
   * `report_revenue_cents`…; see report-counters.ts): a report by s1 sums them. Never shown as such.
   */
  [counter: `report_${string}`]: number;
}

/** An event as the view reads it: its metadata only says how a LeadReceived was stored. */
type ViewEvent = Pick<RecordedEvent, 'type' | 'data'> & { readonly metadata?: RecordedEvent['metadata'] | undefined };

/** The fields of the lead view an event sets (empty for events that do not change it). */
export function leadViewChanges(event: ViewEvent): Partial<LeadView> {
  const changes = viewChanges(event);
  // Each counter is added by one event of a lead (its outcome, or its return), so setting it is
  // counting it, also when the view is folded again from the stream.
  const counted = reportCounts(event);
  if (counted) {
    // for…in rather than Object.entries: the counts are a fresh object literal, and this runs for every event.
    for (const counter in counted.counts) changes[leadCounterField(counter)] = counted.counts[counter]!;
  }
  return changes;
}

function viewChanges(event: ViewEvent): Partial<LeadView> {
  const e = event as unknown as LeadEvent;
  switch (e.type) {
    case 'LeadReceived':
      return {
        lead_id: e.data.lead_id,
        supplier: e.data.supplier,
        sid: e.data.sid,
        s1: e.data.s1,
        accident_state: e.data.accident_state,
        test: e.data.test,
        received_at: e.data.received_at,
        lead: e.data.lead as unknown as Record<string, unknown> | null,
        // A test lead claims no contact, nor did a lead written in clear by an older release: the
        // view is how an erasure finds them (see unclaimedContacts).
        ...(e.data.test || sealedAfterTheFact(event) ? unclaimedContacts(e.data) : {}),
        lead_status: 'received',
        code: null,
        sold: false,
        revenue: 0,
        // A placeholder until LeadRouted names the currency the lead was priced in: a projection
        // cannot read the routing file (a replay must build what the live projection built), so a
        // reader states an unrouted lead's money in the file's currency (viewCurrency). A literal,
        // as every stored view holds it: another value would need a new version of the projection.
        currency: 'USD',
        buyer: null,
        bucket: null,
        errors: [],
        enrichment: null,
        delivery: null,
        feedback: [],
        returned: false,
      };
    case 'LeadPingMatched':
      return { ping: { ping_id: e.data.ping_id, buyer: e.data.buyer, bid: e.data.amount } };
    case 'LeadRejected':
      return { lead_status: 'rejected', code: e.data.code, errors: e.data.errors };
    case 'LeadEnriched':
      return { enrichment: e.data.checks as unknown as Record<string, unknown> };
    case 'LeadRouted':
      return e.data.target.kind === 'bucket'
        ? { lead_status: 'unsold', code: 'UNSOLD', bucket: e.data.target.id, currency: e.data.currency, delivery: { status: 'pending', attempts: 0 } }
        : { buyer: e.data.target.id, currency: e.data.currency };
    case 'LeadSold':
      return { lead_status: 'sold', code: 'SOLD', sold: true, revenue: e.data.revenue, delivery: { status: 'pending', attempts: 0 } };
    case 'LeadDelivered':
      return { delivery: { status: 'delivered', attempts: e.data.attempt } };
    case 'LeadDeliveryFailed':
      return { delivery: { status: e.data.cancelled ? 'cancelled' : e.data.next_attempt_at === null ? 'failed' : 'pending', attempts: e.data.attempt } };
    // Sent again after failing for good: pending, with the attempts made so far.
    case 'LeadRedeliveryRequested':
      return { delivery: { status: 'pending', attempts: e.data.attempts } };
    case 'LeadReturned':
      return { returned: true };
    case 'LeadDeliveryCancelled':
      return { delivery: { status: 'cancelled', attempts: e.data.attempts } };
    case 'LeadPersonalDataErased':
    case 'LeadPersonalDataExpired':
      // `lead` is scrubbed by whoever holds the LeadReceived (the projection, or the fold below).
      return { erased: true };
    default:
      return {};
  }
}

/**
 * The contact hashes a lead's view carries, for a lead that holds no claim on its contacts: a test
 * lead (it takes none), a rejected one (a duplicate or suppressed lead took none; one rejected
 * after its claims gave them back), or one an older release wrote in clear and that was sealed
 * later (its claims, if any, are under names from before keyed hashes). An accepted lead has claimed both, and the claims in the
 * contacts' streams name it: indexing it in the view as well cost two entries at random places of
 * two indexes, rewritten at every commit of the projection, for every lead. Nothing for a lead
 * that recorded no hashes (rejected before they were made, or from before leads recorded them).
 */
export function unclaimedContacts(received: Pick<LeadReceived['data'], 'contacts'> | null | undefined): Pick<LeadView, 'contact_mobile' | 'contact_email'> {
  const contacts = received?.contacts;
  return contacts ? { contact_mobile: contacts.mobile, contact_email: contacts.email } : {};
}

/**
 * The currency of a view's money: the one its routing recorded, else `configured`, the routing
 * file's in force, for a lead no routing priced (rejected: its revenue is 0 in any currency). Only
 * LeadRouted sets a buyer or a bucket, and with them the currency.
 */
export function viewCurrency(view: Pick<LeadView, 'buyer' | 'bucket' | 'currency'>, configured: string): string {
  return view.buyer !== null || view.bucket !== null ? view.currency : configured;
}

/** The feedback entry an event adds to the view, if any. */
export function leadViewFeedback(event: Pick<RecordedEvent, 'type' | 'data'>): LeadView['feedback'][number] | null {
  const e = event as unknown as LeadEvent;
  return e.type === 'FeedbackRecorded' ? { buyer: e.data.buyer, type: e.data.type, reason: e.data.reason, recorded_at: e.data.recorded_at } : null;
}

/** The view folded straight from a lead's stream; null when the stream is empty. */
export function leadViewFromEvents(events: readonly ViewEvent[]): LeadView | null {
  if (events.length === 0) return null;
  const view = Object.assign({}, ...events.map(leadViewChanges)) as LeadView;
  // A rejected lead's view carries its contacts as the projection writes them (from its LeadReceived).
  if (view.lead_status === 'rejected' && events[0]?.type === 'LeadReceived') Object.assign(view, unclaimedContacts(events[0].data as LeadReceived['data']));
  view.feedback = events.map(leadViewFeedback).filter((f) => f !== null);
  // A test lead is never delivered: its view shows no delivery, as the projection writes it.
  if (view.test) view.delivery = null;
  if (view.erased) view.lead = scrubbedLead(view.lead as unknown as StoredLead | null) as unknown as Record<string, unknown> | null;
  return view;
}

import { createHash } from 'node:crypto';
import type { Enrichment } from '../../src/enrichment/check.js';
import type { EventMetadata } from '../../src/event-store/port.js';
import type {
  FeedbackRecorded,
  FeedbackType,
  LeadDelivered,
  LeadDeliveryAttempted,
  LeadDeliveryFailed,
  LeadContacts,
  LeadEnriched,
  LeadEvent,
  LeadReceived,
  LeadRedeliveryRequested,
  LeadRejected,
  LeadReturned,
  LeadRouted,
  LeadSold,
  RejectionCode,
} from '../../src/events/lead-events.js';
import { leadEventMetadata } from '../../src/events/lead-metadata.js';
import type { FieldError } from '../../src/http/envelope.js';
import type { NormalisedLead } from '../../src/leads/lead.js';

// Small factories for the events of a lead's stream, with the data and metadata the service
// records, for specifications that start from events rather than from requests. Each event's
// metadata carries its time (`occurred_at`), which is also when the log records it.

/** An event as the service appends it: its type, data and metadata; the id is the store's unless given. */
export type NewLeadEvent<E extends LeadEvent = LeadEvent> = E & { readonly metadata: EventMetadata; readonly id?: string };

/** An event of another stream than a lead's, which the lead projections pass over. */
export interface OtherStreamEvent {
  readonly streamId: string;
  readonly type: string;
  readonly data: Record<string, unknown>;
  readonly metadata: EventMetadata;
  readonly id?: string;
}

/** An API key issued (its stream holds only the key's hash; this one is made up). */
export const apiKeyIssued = (at = RECEIVED_AT): OtherStreamEvent => ({
  streamId: 'api-keys',
  type: 'ApiKeyIssued',
  data: { id: 'key-2', role: 'supplier', name: 'sup-b', hash: '0'.repeat(64), issued_at: at },
  metadata: { schema: 1, occurred_at: at },
});

/** When the lead of every spec is received unless it says otherwise. */
export const RECEIVED_AT = '2026-11-20T15:04:05.000Z';

const stamp = <E extends LeadEvent>(event: E, at: string, supplier = 'sup-a'): NewLeadEvent<E> => ({
  ...event,
  metadata: leadEventMetadata({ traceId: 'trace-1', correlationId: 'trace-1', causationId: 'request:trace-1', supplierId: supplier }, new Date(at)),
});

/** The normalised consumer of every spec's lead (invented, never anyone's). */
export const consumer = (fields: Partial<NormalisedLead> = {}): NormalisedLead => ({
  first_name: 'Ada',
  last_name: 'Lovelace',
  email: 'ada.lovelace@example.com',
  mobile: '+12135550143',
  mobile_national: '2135550143',
  zip: '90210',
  zip4: null,
  accident_state: 'CA',
  certificate_url: 'https://cert.trustedform.com/0123456789abcdef0123456789abcdef01234567',
  certificate_id: '0123456789abcdef0123456789abcdef01234567',
  sid: 'sid-1',
  s1: 'click-1',
  test: false,
  ...fields,
});

type ReceivedFields = Partial<Pick<LeadReceived['data'], 'supplier' | 'sid' | 's1' | 'accident_state' | 'test' | 'received_at'>>;

/** The keyed hashes a valid lead records of its contacts (stand-ins: 64 hex digits, one pair per lead). */
export const contactsOf = (leadId: number): LeadContacts => ({
  mobile: createHash('sha256').update(`mobile\n${leadId}`).digest('hex'),
  email: createHash('sha256').update(`email\n${leadId}`).digest('hex'),
});

/** A valid lead received: its source, click id, state and test flag are the consumer's. */
export function leadReceived(leadId: number, fields: ReceivedFields = {}): NewLeadEvent<LeadReceived> {
  const { supplier = 'sup-a', sid = 'sid-1', s1 = 'click-1', accident_state = 'CA', test = false, received_at = RECEIVED_AT } = fields;
  const lead = consumer({ sid: sid ?? 'sid-1', s1, accident_state: accident_state ?? 'CA', test });
  return stamp(
    { type: 'LeadReceived', data: { lead_id: leadId, supplier, key_id: 'key-1', sid, s1, accident_state, test, lead, contacts: contactsOf(leadId), received_at } },
    received_at,
    supplier,
  );
}

/** A lead that failed validation: only the fields that passed are kept, and no consumer. */
function invalidLeadReceived(leadId: number, fields: ReceivedFields = {}): NewLeadEvent<LeadReceived> {
  const { supplier = 'sup-a', sid = 'sid-1', s1 = null, accident_state = null, test = false, received_at = RECEIVED_AT } = fields;
  return stamp({ type: 'LeadReceived', data: { lead_id: leadId, supplier, key_id: 'key-1', sid, s1, accident_state, test, lead: null, received_at } }, received_at, supplier);
}

/** The field errors the service records with each rejection code. */
export const REJECTION_ERRORS: Readonly<Record<RejectionCode, FieldError[]>> = {
  INVALID: [{ field: 'email', code: 'invalid_format', message: 'email is not a valid e-mail address' }],
  VERIFICATION_FAILED: [{ field: 'mobile', code: 'verification_failed', message: 'mobile failed phone verification' }],
  DUPLICATE: [{ field: 'mobile', code: 'duplicate', message: 'mobile matches a lead accepted within the duplicate window' }],
  SUPPRESSED: [{ field: 'mobile', code: 'suppressed', message: 'mobile is on the suppression list' }],
  PING_EXPIRED: [{ field: 'ping_id', code: 'ping_expired', message: 'ping_id is past its expiry' }],
  PING_CONSUMED: [{ field: 'ping_id', code: 'ping_consumed', message: 'ping_id was already posted' }],
  PING_MISMATCH: [{ field: 'zip', code: 'ping_mismatch', message: 'zip differs from the ping' }],
};

function leadRejected(leadId: number, code: RejectionCode, at = RECEIVED_AT): NewLeadEvent<LeadRejected> {
  return stamp({ type: 'LeadRejected', data: { lead_id: leadId, code, errors: REJECTION_ERRORS[code], rejected_at: at } }, at);
}

const pass = (provider: string) => ({ result: 'pass' as const, provider, detail: 'ok' });
export const PASSING_CHECKS: Enrichment = { phone: pass('libphonenumber'), email: pass('dns-mx'), consent: pass('trustedform') };

export function leadEnriched(leadId: number, checks: Enrichment = PASSING_CHECKS, at = RECEIVED_AT): NewLeadEvent<LeadEnriched> {
  return stamp({ type: 'LeadEnriched', data: { lead_id: leadId, checks } }, at);
}

export function leadRoutedToBuyer(leadId: number, buyer: string, price: number, at = RECEIVED_AT): NewLeadEvent<LeadRouted> {
  const candidates = [{ buyer, price, eligible: true, reason: 'eligible' }];
  return stamp(
    { type: 'LeadRouted', data: { lead_id: leadId, target: { kind: 'buyer', id: buyer }, price, currency: 'USD', strategy: 'highest_price', routing_version: 'r1', candidates } },
    at,
  );
}

function leadRoutedToBucket(leadId: number, bucket: string, at = RECEIVED_AT): NewLeadEvent<LeadRouted> {
  return stamp(
    { type: 'LeadRouted', data: { lead_id: leadId, target: { kind: 'bucket', id: bucket }, price: 0, currency: 'USD', strategy: 'highest_price', routing_version: 'r1', candidates: [] } },
    at,
  );
}

export function leadSold(leadId: number, buyer: string, revenue: number, at = RECEIVED_AT): NewLeadEvent<LeadSold> {
  return stamp({ type: 'LeadSold', data: { lead_id: leadId, buyer, revenue, currency: 'USD', sold_at: at } }, at);
}

export function deliveryAttempted(leadId: number, buyer: string, attempt: number, at: string): NewLeadEvent<LeadDeliveryAttempted> {
  return stamp({ type: 'LeadDeliveryAttempted', data: { lead_id: leadId, buyer, attempt, started_at: at, timeout_ms: 5000 } }, at);
}

export function leadDelivered(
  leadId: number,
  buyer: string,
  attempt: number,
  at: string,
  how: { via?: 'webhook' | 'pull'; status?: number | null; latency_ms?: number | null } = {},
): NewLeadEvent<LeadDelivered> {
  const { via = 'webhook', status = via === 'webhook' ? 200 : null, latency_ms = via === 'webhook' ? 42 : null } = how;
  return stamp({ type: 'LeadDelivered', data: { lead_id: leadId, buyer, via, attempt, status, latency_ms, delivered_at: at } }, at);
}

/** A failed attempt; `next_attempt_at` null makes it final. */
export function deliveryFailed(
  leadId: number,
  buyer: string,
  attempt: number,
  at: string,
  outcome: { next_attempt_at: string | null; status?: number | null; error?: string },
): NewLeadEvent<LeadDeliveryFailed> {
  const { next_attempt_at, status = 503, error = status === null ? 'timeout' : status >= 500 ? 'http_5xx' : 'http_4xx' } = outcome;
  return stamp({ type: 'LeadDeliveryFailed', data: { lead_id: leadId, buyer, attempt, status, latency_ms: status === null ? null : 80, error, next_attempt_at, failed_at: at } }, at);
}

/** An admin asked for a delivery that failed for good to be sent again: round `round`, after `attempts` attempts. */
export function redeliveryRequested(leadId: number, buyer: string, round: number, attempts: number, at: string): NewLeadEvent<LeadRedeliveryRequested> {
  const data = { lead_id: leadId, buyer, round, attempts, requested_by: { role: 'admin', name: 'ops' }, reason: 'secret_rotated', requested_at: at };
  return stamp({ type: 'LeadRedeliveryRequested', data }, at);
}

type Of<T extends LeadEvent['type']> = Extract<LeadEvent, { type: T }>;

/** The lead's personal data erased; `notify`, the webhook buyer that received it, is sent a `lead.erased` notice. */
export function personalDataErased(leadId: number, notify: string | null, at: string): NewLeadEvent<Of<'LeadPersonalDataErased'>> {
  return stamp<Of<'LeadPersonalDataErased'>>({ type: 'LeadPersonalDataErased', data: { lead_id: leadId, erasure_id: 'e'.repeat(32), had_delivery: true, notify_buyer: notify, erased_at: at } }, at);
}

/** A `lead.erased` notice attempt failed (503); retried at `next` (null: given up). */
export function noticeFailed(leadId: number, buyer: string, attempt: number, at: string, next: string | null): NewLeadEvent<Of<'ErasureNoticeFailed'>> {
  return stamp<Of<'ErasureNoticeFailed'>>({ type: 'ErasureNoticeFailed', data: { lead_id: leadId, buyer, attempt, status: 503, error: 'http_5xx', next_attempt_at: next, failed_at: at } }, at);
}

/** An admin asked for a `lead.erased` notice that failed for good to be sent again: round `round`, after `attempts` attempts. */
export function noticeRedeliveryRequested(leadId: number, buyer: string, round: number, attempts: number, at: string): NewLeadEvent<Of<'ErasureNoticeRedeliveryRequested'>> {
  const data = { lead_id: leadId, buyer, round, attempts, requested_by: { role: 'admin', name: 'ops' }, reason: 'buyer_outage', requested_at: at };
  return stamp<Of<'ErasureNoticeRedeliveryRequested'>>({ type: 'ErasureNoticeRedeliveryRequested', data }, at);
}

export function feedbackRecorded(leadId: number, buyer: string, type: FeedbackType, at: string, reason: string | null = null): NewLeadEvent<FeedbackRecorded> {
  return stamp({ type: 'FeedbackRecorded', data: { lead_id: leadId, buyer, type, reason, recorded_at: at } }, at);
}

export function leadReturned(leadId: number, buyer: string, revenue: number, reason: string, at: string): NewLeadEvent<LeadReturned> {
  return stamp({ type: 'LeadReturned', data: { lead_id: leadId, buyer, revenue, currency: 'USD', reason, returned_at: at } }, at);
}

/** A return as the service records it: the buyer's feedback, then the revenue reversed. */
export const returned = (leadId: number, buyer: string, revenue: number, reason: string, at: string): NewLeadEvent[] => [
  feedbackRecorded(leadId, buyer, 'return', at, reason),
  leadReturned(leadId, buyer, revenue, reason, at),
];

// The post's events of each outcome, in the order the post-lead decider records them.

export const soldLead = (leadId: number, buyer: string, revenue: number, fields: ReceivedFields = {}): NewLeadEvent[] => [
  leadReceived(leadId, fields),
  leadEnriched(leadId, PASSING_CHECKS, fields.received_at),
  leadRoutedToBuyer(leadId, buyer, revenue, fields.received_at),
  leadSold(leadId, buyer, revenue, fields.received_at),
];

export const unsoldLead = (leadId: number, bucket: string, fields: ReceivedFields = {}): NewLeadEvent[] => [
  leadReceived(leadId, fields),
  leadEnriched(leadId, PASSING_CHECKS, fields.received_at),
  leadRoutedToBucket(leadId, bucket, fields.received_at),
];

export const FAILING_PHONE: Enrichment = { ...PASSING_CHECKS, phone: { result: 'fail', provider: 'libphonenumber', detail: 'toll_free' } };

/** A lead rejected at post time with `code`, with the events the decider records before the rejection. */
export function rejectedLead(leadId: number, code: RejectionCode, fields: ReceivedFields = {}): NewLeadEvent[] {
  const at = fields.received_at ?? RECEIVED_AT;
  switch (code) {
    case 'INVALID':
      return [invalidLeadReceived(leadId, fields), leadRejected(leadId, code, at)];
    case 'DUPLICATE':
    case 'PING_EXPIRED':
    case 'PING_CONSUMED':
    case 'PING_MISMATCH':
      return [leadReceived(leadId, fields), leadRejected(leadId, code, at)];
    case 'SUPPRESSED': {
      // Valid, but its consumer asked to be forgotten: no personal data kept, only its contacts' hashes.
      const received = leadReceived(leadId, fields);
      return [{ ...received, data: { ...received.data, lead: null } }, leadRejected(leadId, code, at)];
    }
    case 'VERIFICATION_FAILED':
      return [leadReceived(leadId, fields), leadEnriched(leadId, FAILING_PHONE, at), leadRejected(leadId, code, at)];
  }
}

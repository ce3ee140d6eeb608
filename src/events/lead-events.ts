import type { Enrichment } from '../enrichment/check.js';
import type { FieldError } from '../leads/outcome.js';
import type { StoredLead } from '../leads/lead.js';
import type { LeadPingMatched } from './ping-events.js';

// The events of a lead's own stream, `lead-{lead_id}`. Facts, never rewritten: a
// change of shape adds a schema version and an upcaster (src/events/codec/), it does not edit these.

export const LEAD_EVENT_SCHEMA = 1;

/**
 * LeadReceived is at version 2: its personal fields are stored encrypted (the codec seals and opens
 * them, so its data reads as in version 1). The post leaves its version to the codec.
 */
export const LEAD_RECEIVED_SCHEMA = 2;

/**
 * Metadata of a LeadReceived that was written in clear by a release from before encryption and
 * sealed later (`leadpost seal-clear-leads`): the version it was written in. Such a lead holds no
 * claim on its contacts under today's keyed names, so its view carries their hashes.
 */
export const SEALED_FROM_SCHEMA = 'sealed_from_schema';

/** True for a LeadReceived written in clear and sealed later (see SEALED_FROM_SCHEMA). */
export const sealedAfterTheFact = (event: { readonly metadata?: Readonly<Record<string, unknown>> | undefined }): boolean =>
  event.metadata?.[SEALED_FROM_SCHEMA] !== undefined;

export const leadStream = (leadId: number): string => `lead-${leadId}`;

/** Every code a LeadRejected may carry: a report has a column for each. */
export const REJECTION_CODES = ['INVALID', 'VERIFICATION_FAILED', 'DUPLICATE', 'SUPPRESSED', 'PING_EXPIRED', 'PING_CONSUMED', 'PING_MISMATCH'] as const;
export type RejectionCode = (typeof REJECTION_CODES)[number];

/** The keyed hashes (HMAC, hex) of a lead's normalised mobile and e-mail: how a consumer's leads are found, never the values. */
export interface LeadContacts {
  readonly mobile: string;
  readonly email: string;
}

export interface LeadReceived {
  readonly type: 'LeadReceived';
  readonly data: {
    readonly lead_id: number;
    readonly supplier: string;
    readonly key_id: string;
    readonly sid: string | null;
    readonly s1: string | null;
    readonly accident_state: string | null;
    readonly test: boolean;
    /**
     * The normalised lead; null when it failed validation (nothing trustworthy to keep). Appended
     * in clear; stored, and read back, with its personal fields sealed (openLead opens them).
     */
    readonly lead: StoredLead | null;
    /** Of a valid lead: its contact hashes, in clear (leads before them have none). */
    readonly contacts?: LeadContacts;
    readonly received_at: string;
  };
}

export interface LeadRejected {
  readonly type: 'LeadRejected';
  readonly data: { readonly lead_id: number; readonly code: RejectionCode; readonly errors: FieldError[]; readonly rejected_at: string };
}

export interface LeadEnriched {
  readonly type: 'LeadEnriched';
  readonly data: { readonly lead_id: number; readonly checks: Enrichment };
}

export interface RoutingCandidate {
  readonly buyer: string;
  readonly price: number;
  readonly eligible: boolean;
  readonly reason: string;
  readonly detail?: string;
}

export interface LeadRouted {
  readonly type: 'LeadRouted';
  readonly data: {
    readonly lead_id: number;
    readonly target: { readonly kind: 'buyer' | 'bucket'; readonly id: string };
    readonly price: number;
    readonly currency: string;
    readonly strategy: string;
    readonly routing_version: string;
    readonly candidates: RoutingCandidate[];
  };
}

export interface LeadSold {
  readonly type: 'LeadSold';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly revenue: number; readonly currency: string; readonly sold_at: string };
}

// After the sale: delivery to the buyer and the buyer's feedback, appended to the same stream at
// the revision read, so two instances never record a second outcome for one attempt.

/** A delivery worker took attempt n; only the instance whose append won sends it. */
export interface LeadDeliveryAttempted {
  readonly type: 'LeadDeliveryAttempted';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly attempt: number; readonly started_at: string; readonly timeout_ms: number };
}

export interface LeadDelivered {
  readonly type: 'LeadDelivered';
  readonly data: {
    readonly lead_id: number;
    readonly buyer: string;
    /** `webhook`: the buyer's endpoint answered 2xx; `pull`: the buyer acknowledged it. */
    readonly via: 'webhook' | 'pull';
    readonly attempt: number;
    readonly status: number | null;
    readonly latency_ms: number | null;
    readonly delivered_at: string;
  };
}

export interface LeadDeliveryFailed {
  readonly type: 'LeadDeliveryFailed';
  readonly data: {
    readonly lead_id: number;
    readonly buyer: string;
    readonly attempt: number;
    /** The HTTP status, or null when there was none (timeout, connection error, lost attempt). */
    readonly status: number | null;
    readonly latency_ms: number | null;
    /** `http_5xx`, `http_4xx`, `http_3xx` (a redirect: not followed), `timeout`, `connection_error`, `attempt_lost`. */
    readonly error: string;
    /** When the next attempt is due; null when this failure is final. */
    readonly next_attempt_at: string | null;
    readonly failed_at: string;
    /**
     * True when the delivery was cancelled while this attempt was in flight (the lead erased,
     * expired or returned meanwhile): no attempt follows, and the delivery stays cancelled.
     * Absent otherwise.
     */
    readonly cancelled?: true;
    /**
     * True when this service cut the attempt short as it stopped (its POST unanswered after the
     * stop's grace): the buyer did not fail it, so it is due again and not counted in the buyer's
     * `max_attempts`. Absent otherwise.
     */
    readonly interrupted?: true;
  };
}

/**
 * A delivery that failed for good is sent again: an admin asked, once the buyer fixed its side (a
 * secret rotated, an outage over). It re-opens the delivery for a fresh round of the buyer's
 * `max_attempts`, due at once; attempt numbers go on from `attempts`, so each attempt stays unique.
 */
export interface LeadRedeliveryRequested {
  readonly type: 'LeadRedeliveryRequested';
  readonly data: {
    readonly lead_id: number;
    readonly buyer: string;
    /** The delivery's round this request opens: 2 for the first redelivery. */
    readonly round: number;
    /** Attempts made before it: the new round's first attempt is `attempts + 1`. */
    readonly attempts: number;
    /** Who asked: a role and the name the key acts for (`cli` from the command line), never a key. */
    readonly requested_by: { readonly role: string; readonly name: string };
    /** A snake_case code saying why, never free text; null when none was given. */
    readonly reason: string | null;
    readonly requested_at: string;
  };
}

export type FeedbackType = 'return' | 'conversion' | 'contacted';

export interface FeedbackRecorded {
  readonly type: 'FeedbackRecorded';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly type: FeedbackType; readonly reason: string | null; readonly recorded_at: string };
}

/** Revenue reversed: the buyer returned a lead it bought. */
export interface LeadReturned {
  readonly type: 'LeadReturned';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly revenue: number; readonly currency: string; readonly reason: string; readonly returned_at: string };
}

// The consumer's personal data is gone: its data key was destroyed. The rest of the lead (outcome,
// price, routing, reports) stays; the projections drop their copy of the sealed fields.

/** Destroyed by an erasure the consumer asked for (the erasure's stream records the request). */
interface LeadPersonalDataErased {
  readonly type: 'LeadPersonalDataErased';
  readonly data: {
    readonly lead_id: number;
    readonly erasure_id: string;
    /** Whether the lead has a delivery (to a buyer or a bucket) whose copy is scrubbed too. */
    readonly had_delivery: boolean;
    /** The webhook buyer that received the lead: it is sent a `lead.erased` notice. */
    readonly notify_buyer: string | null;
    readonly erased_at: string;
  };
}

/** The webhook buyer that received an erased lead acknowledged the `lead.erased` notice (2xx). */
interface ErasureNoticeSent {
  readonly type: 'ErasureNoticeSent';
  readonly data: { readonly lead_id: number; readonly buyer: string; readonly attempt: number; readonly status: number; readonly sent_at: string };
}

/** A `lead.erased` notice failed; retried at `next_attempt_at` (null: given up), like a delivery. */
interface ErasureNoticeFailed {
  readonly type: 'ErasureNoticeFailed';
  readonly data: {
    readonly lead_id: number;
    readonly buyer: string;
    readonly attempt: number;
    readonly status: number | null;
    readonly error: string;
    readonly next_attempt_at: string | null;
    readonly failed_at: string;
    /** As LeadDeliveryFailed's: cut short by this service's stop, due again, not counted in `max_attempts`. */
    readonly interrupted?: true;
  };
}

/**
 * A `lead.erased` notice that failed for good is sent again: an admin asked, once the buyer came
 * back (an outage longer than its `max_attempts` last, a secret rotated). It re-opens the notice
 * for a fresh round of the buyer's `max_attempts`, due at `requested_at`; attempt numbers go on
 * from `attempts`. As LeadRedeliveryRequested is for a delivery: the buyer still holds the erased
 * consumer's data until it takes the notice.
 */
export interface ErasureNoticeRedeliveryRequested {
  readonly type: 'ErasureNoticeRedeliveryRequested';
  /** A redelivery's fields, counting the notice's own rounds and attempts. */
  readonly data: LeadRedeliveryRequested['data'];
}

/** Destroyed because the lead is older than the retention period (PII_RETENTION_DAYS). */
interface LeadPersonalDataExpired {
  readonly type: 'LeadPersonalDataExpired';
  readonly data: {
    readonly lead_id: number;
    readonly retention_days: number;
    readonly had_delivery: boolean;
    /**
     * The webhook buyer that received the lead: it is sent a `lead.erased` notice, as after an
     * erasure. Absent from the events recorded before expiry sent notices (read as null).
     */
    readonly notify_buyer?: string | null;
    readonly expired_at: string;
  };
}

/** A delivery still pending when the lead's personal data was erased: it is never made. */
interface LeadDeliveryCancelled {
  readonly type: 'LeadDeliveryCancelled';
  readonly data: {
    readonly lead_id: number;
    readonly buyer: string | null;
    readonly bucket: string | null;
    readonly attempts: number;
    /** The personal data went first (`erased`, `expired`), or the buyer returned the lead before it was delivered. */
    readonly reason: 'erased' | 'expired' | 'returned';
    readonly cancelled_at: string;
  };
}

export type LeadEvent =
  | LeadReceived
  | LeadRejected
  | LeadEnriched
  | LeadRouted
  | LeadSold
  | LeadPingMatched
  | LeadDeliveryAttempted
  | LeadDelivered
  | LeadDeliveryFailed
  | LeadRedeliveryRequested
  | FeedbackRecorded
  | LeadReturned
  | LeadPersonalDataErased
  | LeadPersonalDataExpired
  | LeadDeliveryCancelled
  | ErasureNoticeSent
  | ErasureNoticeFailed
  | ErasureNoticeRedeliveryRequested;

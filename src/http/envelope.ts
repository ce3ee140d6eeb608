// The decision envelope: every response of the service carries all of its fields.
import { type Acceptance, type FieldError, LEAD_OUTCOMES, type LeadOutcome, type LeadStatus } from '../leads/outcome.js';

export type { Acceptance, FieldError,  } from '../leads/outcome.js';
type ResponseWord = 'Success' | 'Failure' | 'Error';

export interface DecisionEnvelope {
  ok: boolean;
  trace_id: string;
  acceptance: Acceptance;
  lead_id: number | null;
  lead_status: LeadStatus | null;
  sold: boolean;
  revenue: number;
  /** The routing file's (a recorded lead's: the one its routing recorded), also on an answer with no money in it. */
  currency: string;
  code: OutcomeCode;
  message: string;
  Response: ResponseWord;
  errors?: FieldError[];
  test?: true;
  /** On a ping's answer only. */
  ping_id?: string;
  bid?: number | null;
  expires_at?: string;
}

interface Outcome {
  readonly status: number;
  readonly acceptance: Acceptance;
  readonly message: string;
}

/** Every outcome code with its HTTP status, acceptance and default message: a lead's outcomes come from the domain. */
export const OUTCOMES = {
  SOLD: { status: 201, ...LEAD_OUTCOMES.SOLD },
  UNSOLD: { status: 201, ...LEAD_OUTCOMES.UNSOLD },
  INVALID: { status: 422, ...LEAD_OUTCOMES.INVALID },
  VERIFICATION_FAILED: { status: 422, ...LEAD_OUTCOMES.VERIFICATION_FAILED },
  DUPLICATE: { status: 409, ...LEAD_OUTCOMES.DUPLICATE },
  SUPPRESSED: { status: 422, ...LEAD_OUTCOMES.SUPPRESSED },
  PING_EXPIRED: { status: 409, ...LEAD_OUTCOMES.PING_EXPIRED },
  PING_CONSUMED: { status: 409, ...LEAD_OUTCOMES.PING_CONSUMED },
  PING_MISMATCH: { status: 422, ...LEAD_OUTCOMES.PING_MISMATCH },
  BID: { status: 201, acceptance: 'accepted', message: 'Ping answered: a buyer bid; post the lead with this ping_id before expires_at.' },
  NO_BID: { status: 201, acceptance: 'accepted', message: 'Ping answered: no buyer bid; a post would be routed as usual.' },
  MALFORMED_JSON: { status: 400, acceptance: 'rejected', message: 'The body is not a JSON object.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, acceptance: 'rejected', message: 'Content-Type must be application/json.' },
  PAYLOAD_TOO_LARGE: { status: 413, acceptance: 'rejected', message: 'The body is larger than the limit.' },
  UNAUTHORIZED: { status: 401, acceptance: 'rejected', message: 'The API key is missing, unknown, revoked or expired.' },
  FORBIDDEN: { status: 403, acceptance: 'rejected', message: "The API key's role may not do this." },
  HTTPS_REQUIRED: { status: 403, acceptance: 'rejected', message: 'Plain HTTP is not accepted; use HTTPS.' },
  NOT_FOUND: { status: 404, acceptance: 'rejected', message: 'Not found.' },
  METHOD_NOT_ALLOWED: { status: 405, acceptance: 'rejected', message: 'Method not allowed on this route.' },
  RETURN_WINDOW_CLOSED: { status: 409, acceptance: 'rejected', message: "The lead is past the buyer's return window." },
  ALREADY_RETURNED: { status: 409, acceptance: 'rejected', message: 'The lead has already been returned.' },
  NOT_PULLED: { status: 409, acceptance: 'rejected', message: "The lead is delivered to the buyer's webhook, not pulled: it cannot be acknowledged; answer its delivery with a 2xx instead." },
  BUYER_UNKNOWN: { status: 409, acceptance: 'rejected', message: "The lead's buyer is not in the routing file in force: no delivery to it would be made. Put the buyer back first." },
  NOT_FAILED: { status: 409, acceptance: 'rejected', message: 'The delivery has not failed for good (it is pending, under way or delivered): there is nothing to send again.' },
  DELIVERY_CANCELLED: { status: 409, acceptance: 'rejected', message: "The delivery was cancelled (the lead's personal data was erased or expired, or its buyer returned it): it is never made; drop the lead." },
  RATE_LIMITED: { status: 429, acceptance: 'error', message: 'Too many requests for this API key; retry after the delay given.' },
  REQUEST_TIMEOUT: { status: 408, acceptance: 'error', message: 'The request (headers or body) was not received in time; nothing was recorded. Retry it.' },
  IDEMPOTENCY_CONFLICT: { status: 409, acceptance: 'error', message: 'A request with this Idempotency-Key is still in progress.' },
  DUPLICATE_PENDING: { status: 409, acceptance: 'error', message: 'A lead with this mobile or e-mail is still being decided; nothing was recorded. Retry after the delay given.' },
  UNAVAILABLE: { status: 503, acceptance: 'error', message: 'The service is temporarily unavailable; nothing was recorded. Retry later.' },
  INTERNAL_ERROR: { status: 500, acceptance: 'error', message: 'Internal error; nothing was recorded. It has been logged with the trace id.' },
} as const satisfies Record<string, Outcome>;

export type OutcomeCode = keyof typeof OUTCOMES;

const RESPONSE_WORD: Record<Acceptance, ResponseWord> = { accepted: 'Success', rejected: 'Failure', error: 'Error' };

/** The envelope of a recorded lead: its outcome, as the domain folded it from the lead's events. */
export function leadEnvelope(outcome: LeadOutcome, traceId: string): DecisionEnvelope {
  const { acceptance, message } = LEAD_OUTCOMES[outcome.code];
  const envelope: DecisionEnvelope = {
    ok: acceptance === 'accepted',
    trace_id: traceId,
    acceptance,
    lead_id: outcome.lead_id,
    lead_status: outcome.lead_status,
    sold: outcome.sold,
    revenue: outcome.revenue,
    currency: outcome.currency,
    code: outcome.code,
    message,
    Response: RESPONSE_WORD[acceptance],
  };
  if (outcome.errors) envelope.errors = [...outcome.errors];
  if (outcome.test) envelope.test = true;
  return envelope;
}

/**
 * The envelope of a response that recorded no lead (auth, body, routing and store failures).
 * `currency`: the routing file's, so that a client reads one currency off every answer.
 * `acceptance` may be overridden for the one code whose acceptance depends on the case
 * (IDEMPOTENCY_CONFLICT: 409 in flight is `error`, 422 other body is `rejected`).
 */
export function noLeadEnvelope(
  code: OutcomeCode,
  traceId: string,
  currency: string,
  options: { message?: string; acceptance?: Acceptance; errors?: FieldError[] } = {},
): DecisionEnvelope {
  const acceptance = options.acceptance ?? OUTCOMES[code].acceptance;
  const envelope: DecisionEnvelope = {
    ok: false,
    trace_id: traceId,
    acceptance,
    lead_id: null,
    lead_status: null,
    sold: false,
    revenue: 0,
    currency,
    code,
    message: options.message ?? OUTCOMES[code].message,
    Response: RESPONSE_WORD[acceptance],
  };
  if (options.errors) envelope.errors = options.errors;
  return envelope;
}


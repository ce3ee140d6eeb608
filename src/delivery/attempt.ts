import type { LeadDelivered, LeadDeliveryAttempted, LeadDeliveryFailed, LeadEvent, LeadReceived, LeadRedeliveryRequested, LeadSold } from '../events/lead-events.js';
import type { Decider } from '../commands/handler.js';
import { MAX_BACKOFF_MS } from './backoff.js';
import { retryAfterMs } from './retry-after.js';

// The decisions of one webhook delivery attempt, kept free of I/O so every rule can be tested on
// plain events: what the lead's stream says about its delivery, whether to send now, and which
// event records what the buyer's endpoint did.
//
// Delivery is at-least-once on the wire and exactly-once as recorded. Each attempt is claimed by
// appending LeadDeliveryAttempted at the revision read, so two instances never send the same
// attempt, and the outcome is appended after it, so an attempt has at most one. A worker that dies
// between sending and recording leaves a claim with no outcome: the buyer may or may not have the
// lead, so the next attempt sends it again with the same Idempotency-Key (`lead-<id>`) and the
// buyer drops the copy.
//
// A delivery that failed for good stays failed until an admin asks for it to be sent again
// (LeadRedeliveryRequested): that opens a new round of the buyer's `max_attempts`, due at once.
// Attempt numbers go on counting across rounds, so every claim stays unique; the buyer's
// Idempotency-Key stays `lead-<id>`, so a buyer that took the lead after all drops the copy.

/** How long after its time box a claimed attempt with no outcome counts as lost, not in flight on another instance. */
const LOST_AFTER_MS = 30_000;

interface ClaimedAttempt {
  readonly attempt: number;
  readonly started_at: string;
  readonly timeout_ms: number;
}

export interface DeliveryState {
  readonly received: LeadReceived['data'] | null;
  readonly sale: LeadSold['data'] | null;
  /** The trace of the request that sold the lead, carried onto the delivery events. */
  readonly traceId: string | null;
  /** The highest attempt number claimed so far (0: none). */
  readonly lastAttempt: number;
  /** A claimed attempt with no outcome yet: in flight somewhere, or lost in a crash. */
  readonly open: ClaimedAttempt | null;
  readonly delivered: boolean;
  readonly failedFinally: boolean;
  /** Cancelled (the lead's personal data was erased or expired, or its buyer returned it), or the personal data is gone: never sent. */
  readonly cancelled: boolean;
  /** When the last failure said to try again, or when a redelivery was asked for. */
  readonly nextAttemptAt: string | null;
  /** The buyer returned the lead: it is not sent again. */
  readonly returned: boolean;
  /** The delivery's round: 1, then one more per redelivery. */
  readonly round: number;
  /** The last attempt number before this round: the round's budget counts from it. */
  readonly roundStart: number;
  /** Attempts of this round cut short by this service's stop: not counted in the round's budget. */
  readonly interrupted: number;
}

export interface StreamEvent {
  readonly type: string;
  readonly data: unknown;
  readonly metadata?: Record<string, unknown>;
}

const initialDeliveryState: DeliveryState = {
  received: null,
  sale: null,
  traceId: null,
  lastAttempt: 0,
  open: null,
  delivered: false,
  failedFinally: false,
  cancelled: false,
  nextAttemptAt: null,
  returned: false,
  round: 1,
  roundStart: 0,
  interrupted: 0,
};

export function foldDelivery(events: readonly StreamEvent[]): DeliveryState {
  return events.reduce(applyEvent, initialDeliveryState);
}

function applyEvent(state: DeliveryState, recorded: StreamEvent): DeliveryState {
  const event = { type: recorded.type, data: recorded.data } as LeadEvent;
  switch (event.type) {
    case 'LeadReceived':
      return { ...state, received: event.data };
    case 'LeadSold': {
      const trace = recorded.metadata?.trace_id;
      return { ...state, sale: event.data, traceId: typeof trace === 'string' ? trace : null };
    }
    case 'LeadDeliveryAttempted': {
      const { attempt, started_at, timeout_ms } = event.data;
      return { ...state, lastAttempt: Math.max(state.lastAttempt, attempt), open: { attempt, started_at, timeout_ms } };
    }
    case 'LeadDelivered':
      return { ...state, open: closes(state, event.data.attempt), delivered: true, nextAttemptAt: null };
    case 'LeadDeliveryCancelled':
    case 'LeadPersonalDataErased':
    case 'LeadPersonalDataExpired':
      return { ...state, cancelled: true };
    case 'LeadDeliveryFailed': {
      const final = event.data.next_attempt_at === null && event.data.cancelled !== true;
      const interrupted = state.interrupted + (event.data.interrupted === true ? 1 : 0);
      return { ...state, open: closes(state, event.data.attempt), failedFinally: state.failedFinally || final, nextAttemptAt: event.data.next_attempt_at, interrupted };
    }
    case 'LeadRedeliveryRequested': {
      const { round, attempts, requested_at } = event.data;
      return { ...state, failedFinally: false, nextAttemptAt: requested_at, round, roundStart: attempts, interrupted: 0 };
    }
    case 'LeadReturned':
      return { ...state, returned: true };
    default:
      return state;
  }
}

const closes = (state: DeliveryState, attempt: number) => (state.open?.attempt === attempt ? null : state.open);

type SkipReason = 'not_sold' | 'test_lead' | 'delivered' | 'failed' | 'cancelled' | 'not_due' | 'in_flight';

export type Step =
  | { readonly kind: 'skip'; readonly reason: SkipReason }
  /** Claim and send attempt `attempt`; `lost` records the outcome-less attempt before it. */
  | { readonly kind: 'send'; readonly attempt: number; readonly lost: LeadDeliveryFailed['data'] | null }
  /** The lost attempt was the buyer's last allowed one (or the buyer returned the lead): record it as the final failure. */
  | { readonly kind: 'give_up'; readonly lost: LeadDeliveryFailed['data'] }
  /** Returned by its buyer before it was delivered: the delivery is cancelled, never made. */
  | { readonly kind: 'cancel' };

export interface StepContext {
  readonly now: Date;
  readonly maxAttempts: number;
  readonly lostAfterMs?: number;
}

export function nextStep(state: DeliveryState, context: StepContext): Step {
  const { sale, received } = state;
  if (!sale || !received) return { kind: 'skip', reason: 'not_sold' };
  if (received.test) return { kind: 'skip', reason: 'test_lead' };
  if (state.delivered) return { kind: 'skip', reason: 'delivered' };
  if (state.failedFinally) return { kind: 'skip', reason: 'failed' };
  if (state.cancelled) return { kind: 'skip', reason: 'cancelled' };
  const now = context.now.getTime();
  if (state.open) {
    const lostAt = Date.parse(state.open.started_at) + state.open.timeout_ms + (context.lostAfterMs ?? LOST_AFTER_MS);
    if (now < lostAt) return { kind: 'skip', reason: 'in_flight' };
    // The round's own budget: a redelivered lead gets max_attempts more, counted from its round's
    // start. A lead its buyer returned meanwhile is not sent again.
    const final = state.returned || state.open.attempt - state.roundStart - state.interrupted >= context.maxAttempts;
    const lost: LeadDeliveryFailed['data'] = {
      lead_id: sale.lead_id,
      buyer: sale.buyer,
      attempt: state.open.attempt,
      status: null,
      latency_ms: null,
      error: 'attempt_lost',
      next_attempt_at: final ? null : context.now.toISOString(),
      failed_at: context.now.toISOString(),
    };
    return final ? { kind: 'give_up', lost } : { kind: 'send', attempt: state.lastAttempt + 1, lost };
  }
  // A buyer that returned the lead does not want it. A return cancels a pending delivery itself;
  // this cancels one a return left pending (recorded by a release from before it did).
  if (state.returned) return { kind: 'cancel' };
  // The read model can lag behind the stream; the stream's own retry time is the one that counts.
  if (state.nextAttemptAt !== null && Date.parse(state.nextAttemptAt) > now) return { kind: 'skip', reason: 'not_due' };
  return { kind: 'send', attempt: state.lastAttempt + 1, lost: null };
}

function claimOf(sale: LeadSold['data'], attempt: number, startedAt: Date, timeoutMs: number): LeadDeliveryAttempted['data'] {
  return { lead_id: sale.lead_id, buyer: sale.buyer, attempt, started_at: startedAt.toISOString(), timeout_ms: timeoutMs };
}

/** What the buyer's endpoint did with one POST. */
export type WireResult =
  | {
      readonly kind: 'response';
      readonly status: number;
      readonly latencyMs: number;
      /** The raw `Retry-After` header, when the buyer sent one. */
      readonly retryAfter?: string | null;
    }
  | { readonly kind: 'timeout'; readonly latencyMs: number }
  | { readonly kind: 'connection_error'; readonly latencyMs: number; readonly code: string | null };

export interface OutcomeContext {
  /** Whose delivery it is: the outcome names the lead and the buyer. */
  readonly sale: Pick<LeadSold['data'], 'lead_id' | 'buyer'>;
  readonly attempt: number;
  readonly maxAttempts: number;
  /** The last attempt number before this round (see DeliveryState.roundStart); 0 in the first. */
  readonly roundStart?: number;
  /** Attempts of this round before this one that this service cut short as it stopped: not counted (DeliveryState.interrupted). */
  readonly interruptedBefore?: number;
  /**
   * This attempt was cut short by this service's stop, not failed by the buyer: due again at the
   * backoff, whatever the budget, and recorded `interrupted`.
   */
  readonly interrupted?: boolean;
  readonly now: Date;
  /** The backoff before the next attempt, should this one be retried and the buyer not say when. */
  readonly retryInMs: number;
}

/**
 * Answers that say "not now" rather than "no": request timeout, too early, too many requests, and
 * every 5xx. Any other answer (a 4xx, or a redirect we do not follow) would come back the same.
 */
function retryableStatus(status: number): boolean {
  return status === 408 || status === 425 || status === 429 || (status >= 500 && status < 600);
}

export type Outcome = { readonly type: 'LeadDelivered'; readonly data: LeadDelivered['data'] } | { readonly type: 'LeadDeliveryFailed'; readonly data: LeadDeliveryFailed['data'] };

export function outcomeOf(result: WireResult, context: OutcomeContext): Outcome {
  const { sale, attempt, now } = context;
  const at = now.toISOString();
  const latency_ms = Math.round(result.latencyMs);
  // A status outside 100–599 is no HTTP status (a stub or a broken proxy sends 600 or 999): the
  // buyer did not answer in HTTP, as on a connection that failed, and no class `http_9xx` is recorded.
  const status = result.kind === 'response' && result.status >= 100 && result.status <= 599 ? result.status : null;
  if (status !== null && status >= 200 && status < 300) {
    return { type: 'LeadDelivered', data: { lead_id: sale.lead_id, buyer: sale.buyer, via: 'webhook', attempt, status, latency_ms, delivered_at: at } };
  }
  const error = status !== null ? `http_${Math.floor(status / 100)}xx` : result.kind === 'response' ? 'connection_error' : result.kind;
  // No answer at all (timeout, connection error) is the buyer being down or slow: worth another try.
  const retryable = status === null || retryableStatus(status);
  const interrupted = context.interrupted === true && result.kind !== 'response';
  const spent = attempt - (context.roundStart ?? 0) - (context.interruptedBefore ?? 0);
  const final = !interrupted && (!retryable || spent >= context.maxAttempts);
  // A buyer that says when to come back is taken at its word, up to the backoff's own maximum.
  const asked = result.kind === 'response' ? retryAfterMs(result.retryAfter, now, MAX_BACKOFF_MS) : null;
  const next_attempt_at = final ? null : new Date(now.getTime() + (asked ?? context.retryInMs)).toISOString();
  const data = { lead_id: sale.lead_id, buyer: sale.buyer, attempt, status, latency_ms, error, next_attempt_at, failed_at: at };
  return { type: 'LeadDeliveryFailed', data: interrupted ? { ...data, interrupted: true } : data };
}

/** Why a redelivery is refused, in the words of the answer's code. */
export type RedeliveryRefusal = 'NOT_FOUND' | 'NOT_FAILED' | 'DELIVERY_CANCELLED' | 'ALREADY_RETURNED' | 'BUYER_UNKNOWN';

export class RedeliveryRefusedError extends Error {
  /** `subject`: what was refused, the lead's delivery or, once its personal data is gone, its `lead.erased` notice. */
  constructor(
    readonly code: RedeliveryRefusal,
    readonly subject: 'delivery' | 'notice' = 'delivery',
  ) {
    super(code);
  }
}

export interface RedeliveryRequest {
  readonly requestedBy: LeadRedeliveryRequested['data']['requested_by'];
  readonly reason: string | null;
  readonly now: Date;
  /** Whether the routing file in force has this buyer: one removed since would never be sent the lead. */
  readonly buyerKnown: (buyer: string) => boolean;
}

/**
 * Only a sold, non-test lead whose delivery failed for good is sent again. Not one still pending
 * or in flight (its worker sends it), nor one delivered; a pull buyer's lead never fails (it waits
 * for its acknowledgement), so it is never sent again either. Not a lead whose personal data was
 * erased or expired: there is nothing left to send. Not a lead the buyer returned: a buyer that
 * sent it back does not want it. Not a lead of a buyer the routing file no longer has.
 */
function redelivery(state: DeliveryState, request: RedeliveryRequest): LeadEvent[] {
  const { sale, received } = state;
  if (!sale || !received || received.test) throw new RedeliveryRefusedError('NOT_FOUND');
  // Before `cancelled`: a return cancels a pending delivery, and the answer says why.
  if (state.returned) throw new RedeliveryRefusedError('ALREADY_RETURNED');
  if (state.cancelled) throw new RedeliveryRefusedError('DELIVERY_CANCELLED');
  if (!state.failedFinally) throw new RedeliveryRefusedError('NOT_FAILED');
  // Re-opened, it would wait for ever: no worker sends to a buyer the routing file no longer has.
  if (!request.buyerKnown(sale.buyer)) throw new RedeliveryRefusedError('BUYER_UNKNOWN');
  return [{ type: 'LeadRedeliveryRequested', data: nextRound(sale, state.round, state.lastAttempt, request) }];
}

/** A request to send something that failed for good again: a new round after `round`, numbered on from `attempts`. */
export function nextRound(
  to: { readonly lead_id: number; readonly buyer: string },
  round: number,
  attempts: number,
  request: RedeliveryRequest,
): LeadRedeliveryRequested['data'] {
  const { lead_id, buyer } = to;
  return { lead_id, buyer, round: round + 1, attempts, requested_by: request.requestedBy, reason: request.reason, requested_at: request.now.toISOString() };
}

export type DeliveryCommand =
  /** Take the next attempt if one is due (recording a lost one first); nothing when none is. */
  | { readonly type: 'ClaimAttempt'; readonly context: StepContext; readonly timeoutMs: number }
  /** Record what the buyer's endpoint did with attempt n, unless the lead was settled or n taken for lost meanwhile. */
  | { readonly type: 'RecordOutcome'; readonly attempt: number; readonly outcome: Outcome }
  /** Send a delivery that failed for good again, in a new round; throws RedeliveryRefusedError to refuse. */
  | { readonly type: 'RequestRedelivery'; readonly request: RedeliveryRequest };

export const deliveryDecider: Decider<DeliveryCommand, DeliveryState, LeadEvent> = {
  initialState: initialDeliveryState,
  evolve: (state, event) => applyEvent(state, event),
  decide(command, state) {
    if (command.type === 'RequestRedelivery') return redelivery(state, command.request);
    if (command.type === 'RecordOutcome') {
      if (state.delivered || state.failedFinally || state.open?.attempt !== command.attempt) return [];
      // Cancelled while the attempt was in flight: a lead that landed is recorded delivered (the
      // buyer has it), one that did not is recorded as the attempt's end, with none to follow.
      if (state.cancelled && command.outcome.type === 'LeadDeliveryFailed') {
        return [{ type: 'LeadDeliveryFailed', data: { ...command.outcome.data, next_attempt_at: null, cancelled: true } }];
      }
      return [command.outcome as LeadEvent];
    }
    const step = nextStep(state, command.context);
    if (step.kind === 'skip') return [];
    if (step.kind === 'cancel') {
      const { lead_id, buyer } = state.sale!;
      const cancelled_at = command.context.now.toISOString();
      return [{ type: 'LeadDeliveryCancelled', data: { lead_id, buyer, bucket: null, attempts: state.lastAttempt, reason: 'returned', cancelled_at } }];
    }
    const events: LeadEvent[] = [];
    if (step.lost) events.push({ type: 'LeadDeliveryFailed', data: step.lost });
    if (step.kind === 'send') events.push({ type: 'LeadDeliveryAttempted', data: claimOf(state.sale!, step.attempt, command.context.now, command.timeoutMs) });
    return events;
  },
};

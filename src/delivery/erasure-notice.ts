import { type Decider, type Folded, handleCommand, readFolded } from '../commands/handler.js';
import type { EventStore } from '../event-store/port.js';
import { type LeadEvent, leadStream } from '../events/lead-events.js';
import { leadCorrelation, leadEventMetadata } from '../events/lead-metadata.js';
import type { Buyer } from '../routing/load-config.js';
import { RedeliveryRefusedError, type RedeliveryRequest, nextRound, outcomeOf } from './attempt.js';
import { type WebhookPost, postWebhook } from './post-webhook.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, signDelivery } from './signature.js';

// The `lead.erased` notice: a webhook buyer that received a lead whose personal data was later
// erased is told so, with a POST of {"type": "lead.erased", "lead_id", "reason"} signed like a
// delivery (X-Leadpost-Signature over the timestamp and body, with the buyer's secret), so it can
// delete its own copy. `reason` says why: `consumer_request` (an erasure) or `retention` (the lead
// passed PII_RETENTION_DAYS). Both are one notice type, because what the buyer must do is the
// same: a buyer that deletes on `lead.erased` needs no change to honour retention too. Recorded
// on the lead's stream (ErasureNoticeSent / ErasureNoticeFailed) and retried like a delivery: the
// same backoff, Retry-After and max_attempts. An outcome is appended
// at the revision read, so two instances never record one attempt twice; the buyer drops a copy
// it already had by the Idempotency-Key `lead-erased-<id>`.
//
// A notice that failed for good stays failed until an admin asks for it to be sent again
// (ErasureNoticeRedeliveryRequested), as a delivery does: until the buyer takes it, it keeps the
// erased consumer's data. That opens a new round of the buyer's `max_attempts`; attempt numbers go
// on counting across rounds, and the Idempotency-Key stays the same.

/** Why the lead's personal data is gone, as the notice says it. */
type NoticeReason = 'consumer_request' | 'retention';

export interface NoticeState {
  readonly leadId: number | null;
  /** The buyer to be told (null: the lead has no notice). */
  readonly buyer: string | null;
  readonly reason: NoticeReason;
  readonly correlationId: string | null;
  readonly supplier: string | null;
  /** The highest notice attempt recorded (0: none). */
  readonly attempts: number;
  readonly sent: boolean;
  /** Given up: sent again only when an admin asks. */
  readonly failedFinally: boolean;
  readonly nextAttemptAt: string | null;
  /** The notice's round: 1, then one more per redelivery. */
  readonly round: number;
  /** The last attempt before this round: the round's budget of max_attempts counts from it. */
  readonly roundStart: number;
  /** Attempts of this round cut short by this service's stop: not counted in the round's budget. */
  readonly interrupted: number;
  /** A delivery attempt claimed with no outcome yet, and when its time box ends: it may still be on its way to the buyer. */
  readonly delivering: { readonly attempt: number; readonly until: number } | null;
}

type NoticeOutcome = Extract<LeadEvent, { type: 'ErasureNoticeSent' | 'ErasureNoticeFailed' }>;

type NoticeCommand =
  /** Record what the buyer's endpoint did with notice attempt n, unless it is recorded already. */
  | { readonly type: 'RecordNoticeOutcome'; readonly attempt: number; readonly outcome: NoticeOutcome }
  /** Send a notice that failed for good again, in a new round; throws RedeliveryRefusedError to refuse. */
  | { readonly type: 'RequestNoticeRedelivery'; readonly request: RedeliveryRequest };

/**
 * Only a notice that failed for good is sent again. Not one sent (the buyer took it), nor one
 * pending or under way (the worker sends it): NOT_FAILED. Not a lead with no notice: NOT_FOUND.
 * Not to a buyer the routing file no longer has: no worker would send it.
 */
function noticeRedelivery(state: NoticeState, request: RedeliveryRequest): LeadEvent[] {
  if (state.buyer === null || state.leadId === null) throw new RedeliveryRefusedError('NOT_FOUND', 'notice');
  if (!state.failedFinally) throw new RedeliveryRefusedError('NOT_FAILED', 'notice');
  if (!request.buyerKnown(state.buyer)) throw new RedeliveryRefusedError('BUYER_UNKNOWN', 'notice');
  return [{ type: 'ErasureNoticeRedeliveryRequested', data: nextRound({ lead_id: state.leadId, buyer: state.buyer }, state.round, state.attempts, request) }];
}

export const noticeDecider: Decider<NoticeCommand, NoticeState, LeadEvent> = {
  initialState: {
    leadId: null,
    buyer: null,
    reason: 'consumer_request',
    correlationId: null,
    supplier: null,
    attempts: 0,
    sent: false,
    failedFinally: false,
    nextAttemptAt: null,
    round: 1,
    roundStart: 0,
    interrupted: 0,
    delivering: null,
  },
  evolve(state, recorded) {
    const event = recorded as LeadEvent;
    switch (event.type) {
      case 'LeadReceived':
        return { ...state, leadId: event.data.lead_id, supplier: event.data.supplier, correlationId: leadCorrelation(recorded) };
      case 'LeadPersonalDataErased':
        return event.data.notify_buyer ? { ...state, buyer: event.data.notify_buyer, reason: 'consumer_request' } : state;
      case 'LeadPersonalDataExpired':
        return event.data.notify_buyer ? { ...state, buyer: event.data.notify_buyer, reason: 'retention' } : state;
      case 'LeadDeliveryAttempted':
        return { ...state, delivering: { attempt: event.data.attempt, until: Date.parse(event.data.started_at) + event.data.timeout_ms } };
      case 'LeadDelivered':
      case 'LeadDeliveryFailed':
        return state.delivering?.attempt === event.data.attempt ? { ...state, delivering: null } : state;
      case 'ErasureNoticeSent':
        return { ...state, attempts: event.data.attempt, sent: true, nextAttemptAt: null };
      case 'ErasureNoticeFailed':
        return {
          ...state,
          attempts: event.data.attempt,
          failedFinally: event.data.next_attempt_at === null,
          nextAttemptAt: event.data.next_attempt_at,
          interrupted: state.interrupted + (event.data.interrupted === true ? 1 : 0),
        };
      case 'ErasureNoticeRedeliveryRequested': {
        const { round, attempts, requested_at } = event.data;
        return { ...state, failedFinally: false, nextAttemptAt: requested_at, round, roundStart: attempts, interrupted: 0 };
      }
      default:
        return state;
    }
  },
  decide(command, state) {
    if (command.type === 'RequestNoticeRedelivery') return noticeRedelivery(state, command.request);
    // An attempt is recorded once: a second instance that sent the same attempt records nothing.
    const open = state.buyer !== null && !state.sent && !state.failedFinally;
    return open && state.attempts === command.attempt - 1 ? [command.outcome] : [];
  },
};

export interface NoticeDeps {
  readonly events: EventStore;
  readonly buyer: (id: string) => Buyer | undefined;
  readonly env: NodeJS.ProcessEnv;
  readonly now: () => Date;
  readonly backoff: (attempt: number) => number;
  readonly agent: WebhookPost['agent'];
  readonly signal?: AbortSignal;
}

/** Sends the lead's `lead.erased` notice if one is due now; what it recorded, or why not. */
export async function sendErasureNotice(deps: NoticeDeps, leadId: number): Promise<NoticeOutcome['type'] | 'skipped' | 'delivery_in_flight'> {
  const stream = leadStream(leadId);
  const read = await readFolded(deps.events, stream, noticeDecider);
  const { buyer: buyerId, sent, failedFinally, nextAttemptAt } = read.state;
  if (buyerId === null || sent || failedFinally) return 'skipped';
  if (nextAttemptAt !== null && Date.parse(nextAttemptAt) > deps.now().getTime()) return 'skipped';
  // The lead is still on its way to the buyer (the erasure came while it was sent): told first to
  // delete it, the buyer would find nothing, then store what arrives. The notice waits for the
  // attempt's outcome, or for its time box to end (an attempt whose worker died has none).
  if (read.state.delivering && read.state.delivering.until > deps.now().getTime()) return 'delivery_in_flight';
  const buyer = deps.buyer(buyerId);
  const attempt = read.state.attempts + 1;
  // The buyer takes no webhook now (switched to pull, or gone from the routing file): the notice
  // cannot go, and left pending it would say "being sent" for ever while the buyer keeps the
  // consumer's data. It fails for good, `not_webhook`, for an operator to see: told some other way,
  // or sent again (an admin's redelivery) once the buyer is a webhook buyer again.
  if (!buyer || buyer.delivery.kind !== 'webhook') return recordNotice(deps, read, leadId, attempt, notWebhook(leadId, buyerId, attempt, deps.now()));
  const delivery = buyer.delivery;
  const body = JSON.stringify({ type: 'lead.erased', lead_id: leadId, reason: read.state.reason });
  const timestamp = String(Math.floor(deps.now().getTime() / 1000));
  const secret = delivery.secret_env ? deps.env[delivery.secret_env] || null : null;
  const headers: Record<string, string> = { 'Content-Type': 'application/json', 'Idempotency-Key': `lead-erased-${leadId}`, [TIMESTAMP_HEADER]: timestamp };
  if (secret) headers[SIGNATURE_HEADER] = signDelivery(secret, timestamp, body);
  const result = await postWebhook({ url: delivery.url, body, headers, timeoutMs: delivery.timeout_ms, agent: deps.agent, signal: deps.signal });
  const at = deps.now();
  // The delivery's rules decide what the answer means (2xx done; 408, 425, 429, 5xx and no answer retried).
  // A re-opened notice has the round's own budget of max_attempts, counted from the round's start.
  const judged = outcomeOf(result, {
    sale: { lead_id: leadId, buyer: buyerId },
    attempt,
    maxAttempts: delivery.max_attempts,
    roundStart: read.state.roundStart,
    interruptedBefore: read.state.interrupted,
    interrupted: deps.signal?.aborted === true,
    now: at,
    retryInMs: deps.backoff(attempt),
  });
  const outcome: NoticeOutcome =
    judged.type === 'LeadDelivered'
      ? { type: 'ErasureNoticeSent', data: { lead_id: leadId, buyer: buyerId, attempt, status: judged.data.status ?? 0, sent_at: at.toISOString() } }
      : {
          type: 'ErasureNoticeFailed',
          data: {
            lead_id: leadId,
            buyer: buyerId,
            attempt,
            status: judged.data.status,
            error: judged.data.error,
            next_attempt_at: judged.data.next_attempt_at,
            failed_at: at.toISOString(),
            ...(judged.data.interrupted ? { interrupted: true as const } : {}),
          },
        };
  return recordNotice(deps, read, leadId, attempt, outcome);
}

/** The final failure of a notice whose buyer takes no webhook now: nothing was sent. */
function notWebhook(leadId: number, buyer: string, attempt: number, at: Date): NoticeOutcome {
  return { type: 'ErasureNoticeFailed', data: { lead_id: leadId, buyer, attempt, status: null, error: 'not_webhook', next_attempt_at: null, failed_at: at.toISOString() } };
}

async function recordNotice(deps: NoticeDeps, read: Folded<NoticeState>, leadId: number, attempt: number, outcome: NoticeOutcome): Promise<NoticeOutcome['type'] | 'skipped'> {
  const at = deps.now();
  const handled = await handleCommand(deps.events, leadStream(leadId), noticeDecider, { type: 'RecordNoticeOutcome', attempt, outcome }, {
    from: read,
    metadata: (state) =>
      leadEventMetadata({ traceId: null, correlationId: state.correlationId, causationId: `erasure-notice:${leadId}`, supplierId: state.supplier }, at),
  });
  return handled.events.length > 0 ? outcome.type : 'skipped';
}

import type { Logger } from 'pino';
import { type Folded, handleCommand, readFolded } from '../commands/handler.js';
import type { EventStore } from '../event-store/port.js';
import { leadStream } from '../events/lead-events.js';
import { leadEventMetadata } from '../events/lead-metadata.js';
import { openLead } from '../events/codec/index.js';
import type { PersonalDataKeys } from '../personal-data/index.js';
import type { Buyer } from '../routing/load-config.js';
import { type DeliveryState, type Outcome, deliveryDecider, nextStep, outcomeOf } from './attempt.js';
import { deliveryBody, deliveryHeaders } from './payload.js';
import type { BuyerConnections } from './buyer-agent.js';
import { postWebhook } from './post-webhook.js';

// One delivery attempt of one lead, end to end: read its stream, make the payload, claim the next
// attempt, POST, record the outcome. Consumer fields and secrets never reach the log: only ids, numbers, codes.

export interface DeliverDeps {
  readonly events: EventStore;
  /** Opens the lead's personal fields for the buyer's payload. */
  readonly personalData: PersonalDataKeys;
  /** The buyer as the current routing file has it, or undefined once it is gone. */
  readonly buyer: (id: string) => Buyer | undefined;
  readonly env: NodeJS.ProcessEnv;
  readonly now: () => Date;
  readonly backoff: (attempt: number) => number;
  readonly agent: BuyerConnections;
  /** Cuts the POST short when the worker stops; the attempt is then recorded as failed, due again. */
  readonly signal?: AbortSignal;
  readonly lostAfterMs?: number;
  readonly logger?: Logger;
}

export type AttemptReport =
  | { readonly kind: 'skipped'; readonly reason: string }
  | {
      readonly kind: 'recorded';
      readonly attempt: number;
      readonly outcome: Outcome['type'] | 'given_up';
      /** When the lead is due again; null when its delivery is settled. */
      readonly retryAt: string | null;
    }
  /** Sent, but the lead was settled or the attempt taken for lost before its outcome could be recorded. */
  | { readonly kind: 'superseded'; readonly attempt: number };

const RECORD_RETRIES = 3;

export async function deliverLead(deps: DeliverDeps, leadId: number): Promise<AttemptReport> {
  const stream = leadStream(leadId);
  const read = await readFolded(deps.events, stream, deliveryDecider);
  const buyer = read.state.sale ? deps.buyer(read.state.sale.buyer) : undefined;
  // A buyer switched to pull (or removed) after the sale: nothing to POST; the row waits for it.
  if (!buyer || buyer.delivery.kind !== 'webhook') return { kind: 'skipped', reason: 'not_webhook' };
  const delivery = buyer.delivery;
  const startedAt = deps.now();
  const context = { now: startedAt, maxAttempts: delivery.max_attempts, lostAfterMs: deps.lostAfterMs };
  const step = nextStep(read.state, context);
  if (step.kind === 'skip') return { kind: 'skipped', reason: step.reason };
  // The payload is made before the attempt is claimed: a lead that cannot be opened now (the key
  // store unreachable) then leaves no claim behind, to be judged lost later at the cost of an
  // attempt the buyer never saw.
  const payload = (state: DeliveryState) => payloadOf(deps, leadId, state);
  let body = step.kind === 'send' ? await payload(read.state) : null;
  // The lead's key destroyed before its erasure mark was appended (an erasure under way, or one cut
  // short between the two): there is no lead left to send, and a delivery without one is no
  // delivery. The mark, when it comes, cancels it; until then it is left alone like a settled one.
  if (body === ERASED) return { kind: 'skipped', reason: 'cancelled' };

  const claimed = await handleCommand(deps.events, stream, deliveryDecider, { type: 'ClaimAttempt', context, timeoutMs: delivery.timeout_ms }, {
    from: read,
    metadata: (state) => metadataOf(state, startedAt),
  });
  const attempted = claimed.events.find((event) => event.type === 'LeadDeliveryAttempted');
  const lost = claimed.events.find((event) => event.type === 'LeadDeliveryFailed');
  // Another instance moved first: it sends this attempt, or the next tick reads what it did.
  if (claimed.events.length === 0) return { kind: 'skipped', reason: 'claimed_elsewhere' };
  if (claimed.events.some((event) => event.type === 'LeadDeliveryCancelled')) return { kind: 'skipped', reason: 'cancelled' };
  const sale = claimed.state.sale!;
  const log = deps.logger?.child({ lead_id: leadId, buyer: sale.buyer });
  if (lost?.type === 'LeadDeliveryFailed') log?.warn({ attempt: lost.data.attempt, final: !attempted }, 'delivery attempt lost, outcome unknown');
  if (attempted?.type !== 'LeadDeliveryAttempted') return { kind: 'recorded', attempt: lost!.data.attempt as number, outcome: 'given_up', retryAt: null };
  const attempt = attempted.data.attempt;

  const secret = delivery.secret_env ? deps.env[delivery.secret_env] || null : null;
  if (delivery.secret_env && !secret) log?.warn({ secret_env: delivery.secret_env }, 'buyer secret variable is not set: delivery goes unsigned');
  // Made already, unless a conflict on the claim found an attempt to send that the first read did not.
  body ??= await payload(claimed.state);
  // Claimed, but the lead is gone meanwhile: the claim is judged lost later, by when its mark cancels it.
  if (body === ERASED) return { kind: 'skipped', reason: 'cancelled' };
  const result = await postWebhook({
    url: delivery.url,
    body,
    headers: deliveryHeaders(leadId, body, deps.now(), secret),
    timeoutMs: delivery.timeout_ms,
    agent: deps.agent,
    signal: deps.signal,
  });
  // A redelivered lead's round starts its backoff again from the first wait.
  const { roundStart } = claimed.state;
  const outcome = outcomeOf(result, {
    sale,
    attempt,
    maxAttempts: delivery.max_attempts,
    roundStart,
    interruptedBefore: claimed.state.interrupted,
    // Cut short by the worker's stop: the buyer did not fail it (see outcomeOf).
    interrupted: deps.signal?.aborted === true,
    now: deps.now(),
    retryInMs: deps.backoff(attempt - roundStart),
  });
  const recorded = await recordOutcome(deps, stream, attempt, outcome, claimed);
  const summary = { attempt, status: outcome.data.status, latency_ms: outcome.data.latency_ms };
  if (!recorded) {
    log?.warn(summary, 'delivery outcome not recorded: the lead was settled or the attempt taken for lost meanwhile');
    return { kind: 'superseded', attempt };
  }
  if (outcome.type === 'LeadDelivered') log?.info(summary, 'lead delivered');
  else {
    // The socket error code (CERT_HAS_EXPIRED, ECONNREFUSED…) is what an operator acts on; the event keeps only the class.
    const code = result.kind === 'connection_error' ? { code: result.code } : {};
    log?.warn({ ...summary, ...code, error: outcome.data.error, next_attempt_at: outcome.data.next_attempt_at }, 'lead delivery failed');
  }
  const retryAt = outcome.type === 'LeadDeliveryFailed' ? outcome.data.next_attempt_at : null;
  return { kind: 'recorded', attempt, outcome: outcome.type, retryAt };
}

/** A lead whose personal data cannot be opened any more: nothing to send. */
const ERASED = Symbol('erased');

/** The JSON body the buyer is sent: the sale, and the lead with its personal fields opened; ERASED when they are gone. */
async function payloadOf(deps: DeliverDeps, leadId: number, state: DeliveryState): Promise<string | typeof ERASED> {
  const received = state.received!;
  const lead = received.lead === null ? null : await openLead(deps.personalData, leadId, received.lead);
  const body = deliveryBody(received, lead, state.sale!);
  return body.lead === null ? ERASED : JSON.stringify(body);
}

/**
 * Records the outcome right after the claim. Other events may land on the stream meanwhile (the
 * buyer's feedback can arrive before its 200 does); the decider records it as long as the claim is
 * still the open one and the lead is not settled. A store failure is retried a few times: left
 * unrecorded, the attempt would read as lost and the lead be sent again.
 */
async function recordOutcome(deps: DeliverDeps, stream: string, attempt: number, outcome: Outcome, claimed: Folded<DeliveryState>): Promise<boolean> {
  for (let failures = 0; ; failures++) {
    try {
      const at = deps.now();
      const handled = await handleCommand(deps.events, stream, deliveryDecider, { type: 'RecordOutcome', attempt, outcome }, {
        from: claimed,
        metadata: (state) => metadataOf(state, at),
      });
      return handled.events.length > 0;
    } catch (error) {
      if (failures >= RECORD_RETRIES) throw error;
      await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** (failures + 1)));
    }
  }
}

function metadataOf(state: DeliveryState, at: Date) {
  // The worker acts on the sale, not on a request: the sale's trace is both trace and correlation.
  const origin = { traceId: state.traceId, correlationId: state.traceId, causationId: `delivery:${state.sale?.lead_id ?? ''}`, supplierId: state.received?.supplier ?? null };
  return leadEventMetadata(origin, at);
}

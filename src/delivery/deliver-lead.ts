import type { Agent } from 'node:https';
import type { Logger } from 'pino';
import { type EventData, type EventStore, WrongExpectedRevisionError } from '../event-store/port.js';
import { leadStream } from '../events/lead-events.js';
import { leadEventMetadata } from '../events/lead-metadata.js';
import type { Buyer } from '../routing/load-config.js';
import { type DeliveryState, type Outcome, claimOf, foldDelivery, nextStep, outcomeOf } from './attempt.js';
import { deliveryBody, deliveryHeaders } from './payload.js';
import { postWebhook } from './post-webhook.js';

// One delivery attempt of one lead, end to end: read its stream, claim the next attempt, POST,
// record the outcome. Consumer fields and secrets never reach the log: only ids, numbers, codes.

export interface DeliverDeps {
  readonly events: EventStore;
  /** The buyer as the current routing file has it, or undefined once it is gone. */
  readonly buyer: (id: string) => Buyer | undefined;
  readonly env: NodeJS.ProcessEnv;
  readonly now: () => Date;
  readonly backoff: (attempt: number) => number;
  readonly agent: Agent;
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
const MAX_RACES = 20;

export async function deliverLead(deps: DeliverDeps, leadId: number): Promise<AttemptReport> {
  const stream = leadStream(leadId);
  const state = foldDelivery(await deps.events.readStream(stream));
  const buyer = state.sale ? deps.buyer(state.sale.buyer) : undefined;
  // A buyer switched to pull (or removed) after the sale: nothing to POST; the row waits for it.
  if (!buyer || buyer.delivery.kind !== 'webhook') return { kind: 'skipped', reason: 'not_webhook' };
  const delivery = buyer.delivery;
  const startedAt = deps.now();
  const step = nextStep(state, { now: startedAt, maxAttempts: delivery.max_attempts, lostAfterMs: deps.lostAfterMs });
  if (step.kind === 'skip') return { kind: 'skipped', reason: step.reason };
  const sale = state.sale!;
  const received = state.received!;
  const log = deps.logger?.child({ lead_id: leadId, buyer: sale.buyer });

  const claim: EventData[] = [];
  if (step.lost) claim.push(leadEvent('LeadDeliveryFailed', step.lost, state, startedAt));
  if (step.kind === 'send') claim.push(leadEvent('LeadDeliveryAttempted', claimOf(sale, step.attempt, startedAt, delivery.timeout_ms), state, startedAt));
  let claimedAt: number;
  try {
    claimedAt = (await deps.events.append(stream, claim, { expectedRevision: state.revision ?? 'no_stream' })).nextExpectedRevision;
  } catch (error) {
    // Another instance moved first; the next tick reads what it did.
    if (error instanceof WrongExpectedRevisionError) return { kind: 'skipped', reason: 'claimed_elsewhere' };
    throw error;
  }
  if (step.lost) log?.warn({ attempt: step.lost.attempt, final: step.kind === 'give_up' }, 'delivery attempt lost, outcome unknown');
  if (step.kind === 'give_up') return { kind: 'recorded', attempt: step.lost.attempt, outcome: 'given_up', retryAt: null };

  const secret = delivery.secret_env ? deps.env[delivery.secret_env] || null : null;
  if (delivery.secret_env && !secret) log?.warn({ secret_env: delivery.secret_env }, 'buyer secret variable is not set: delivery goes unsigned');
  const body = JSON.stringify(deliveryBody(received, sale));
  const result = await postWebhook({
    url: delivery.url,
    body,
    headers: deliveryHeaders(leadId, body, deps.now(), secret),
    timeoutMs: delivery.timeout_ms,
    agent: deps.agent,
  });
  const outcome = outcomeOf(result, {
    sale,
    attempt: step.attempt,
    maxAttempts: delivery.max_attempts,
    now: deps.now(),
    retryInMs: deps.backoff(step.attempt),
  });
  const recorded = await recordOutcome(deps, stream, step.attempt, outcome, state, claimedAt);
  const summary = { attempt: step.attempt, status: outcome.data.status, latency_ms: outcome.data.latency_ms };
  if (!recorded) {
    log?.warn(summary, 'delivery outcome not recorded: the lead was settled or the attempt taken for lost meanwhile');
    return { kind: 'superseded', attempt: step.attempt };
  }
  if (outcome.type === 'LeadDelivered') log?.info(summary, 'lead delivered');
  else {
    // The socket error code (CERT_HAS_EXPIRED, ECONNREFUSED…) is what an operator acts on; the event keeps only the class.
    const code = result.kind === 'connection_error' ? { code: result.code } : {};
    log?.warn({ ...summary, ...code, error: outcome.data.error, next_attempt_at: outcome.data.next_attempt_at }, 'lead delivery failed');
  }
  const retryAt = outcome.type === 'LeadDeliveryFailed' ? outcome.data.next_attempt_at : null;
  return { kind: 'recorded', attempt: step.attempt, outcome: outcome.type, retryAt };
}

/**
 * Appends the outcome right after the claim. Other events may land on the stream meanwhile (the
 * buyer's feedback can arrive before its 200 does), so a conflict re-reads: as long as the claim
 * is still the open one and the lead is not settled, the outcome is still ours to record.
 */
async function recordOutcome(deps: DeliverDeps, stream: string, attempt: number, outcome: Outcome, state: DeliveryState, claimedAt: number): Promise<boolean> {
  let expected = claimedAt;
  let failures = 0;
  for (let race = 0; race < MAX_RACES; ) {
    try {
      await deps.events.append(stream, [leadEvent(outcome.type, outcome.data, state, deps.now())], { expectedRevision: expected });
      return true;
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) {
        // Unrecorded, the attempt would read as lost and the lead be sent again: worth a short wait.
        if (++failures > RECORD_RETRIES) throw error;
        await new Promise((resolve) => setTimeout(resolve, 100 * 2 ** failures));
        continue;
      }
      race += 1;
      const now = foldDelivery(await deps.events.readStream(stream));
      // Settled meanwhile (the buyer acknowledged it by pull) or taken for lost: not ours to record.
      if (now.delivered || now.failedFinally || now.open?.attempt !== attempt || now.revision === null) return false;
      expected = now.revision;
    }
  }
  return false;
}

function leadEvent(type: string, data: unknown, state: DeliveryState, at: Date): EventData {
  // The worker acts on the sale, not on a request: the sale's trace is both trace and correlation.
  const origin = { traceId: state.traceId, correlationId: state.traceId, causationId: `delivery:${state.sale?.lead_id ?? ''}`, supplierId: state.received?.supplier ?? null };
  return { type, data, metadata: leadEventMetadata(origin, at) };
}

import type { Enrichment } from '../../enrichment/check.js';
import { verificationFailed } from '../../enrichment/enricher.js';
import type { EventStore } from '../../event-store/index.js';
import { LEAD_EVENT_SCHEMA, type LeadEvent, type RoutingCandidate, leadStream } from '../../events/lead-events.js';
import { noLeadEnvelope } from '../../http/envelope.js';
import type { PostLead, PostLeadRequest, PostLeadResponse } from '../../http/post-lead-port.js';
import type { NormalisedLead } from '../../leads/lead.js';
import type { LeadValidation } from '../../leads/validate.js';
import type { LoadedRoutingConfig } from '../../routing/load-config.js';
import { capPeriods, chooseBucket, evaluateBuyers, rankEligible } from '../../routing/rules.js';
import type { CapLedger, CapPeriod } from '../caps.js';
import type { ContactClaim, ContactClaims, ContactKind, ContactRegistry } from '../contacts.js';
import { retryWhileClaimsBlock } from '../contacts.js';
import type { IdempotencyKeys } from '../idempotency.js';
import type { LeadIdAllocator } from '../lead-ids.js';
import { type PostLeadCommand, type RoutingDecision, envelopeOf, leadDecider } from './decider.js';
import { handleCommand } from '../handler.js';

export interface PostLeadDeps {
  readonly store: EventStore;
  readonly leadIds: LeadIdAllocator;
  readonly validate: (body: Readonly<Record<string, unknown>>) => LeadValidation;
  readonly enrich: (lead: NormalisedLead) => Promise<Enrichment>;
  /** The routing file in force (read per lead, so a reload needs no restart). */
  readonly routing: () => LoadedRoutingConfig;
  readonly contacts: ContactRegistry;
  readonly caps: CapLedger;
  readonly idempotency: IdempotencyKeys;
  readonly now: () => Date;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

interface Reservation {
  readonly buyer: string;
  readonly price: number;
  /** The cap periods a slot was taken in, to give back if the lead is not recorded (none for a test lead). */
  readonly caps: readonly CapPeriod[];
}

/**
 * POST /functions/leads behind the HTTP shell: idempotency → validate → dedupe → enrich → route →
 * one atomic append of the lead's events → the envelope folded from them. Whatever support-stream
 * claims a lead took (contacts, cap slots) are given back if its events could not be appended.
 */
export function createPostLead(deps: PostLeadDeps): PostLead {
  let roundRobinTurn = 0;

  async function route(config: LoadedRoutingConfig, lead: NormalisedLead, enrichment: Enrichment, leadId: number, now: Date) {
    const decisions = evaluateBuyers(config, lead, enrichment, now);
    // evaluateBuyers made these objects for this lead alone; a buyer found full is replaced below.
    const candidates: RoutingCandidate[] = [...decisions];
    let reservation: Reservation | null = null;
    for (const buyerId of rankEligible(config, decisions, roundRobinTurn++)) {
      const buyer = config.buyers.find((b) => b.id === buyerId)!;
      const caps = capPeriods(buyer, now);
      // A test lead meets a full cap as a real lead would, but only looks: it takes no slot.
      const room = caps.length === 0 || (lead.test ? await deps.caps.hasRoom(buyerId, caps) : await deps.caps.reserve(buyerId, caps, leadId));
      if (room) {
        reservation = { buyer: buyerId, price: buyer.price, caps: lead.test ? [] : caps };
        break;
      }
      const index = candidates.findIndex((c) => c.buyer === buyerId);
      const full = caps.map((c) => `${c.key} cap ${c.max}`).join(', ');
      candidates[index] = { ...candidates[index]!, eligible: false, reason: 'cap_reached', detail: full };
    }
    const decision: RoutingDecision = {
      target: reservation ? { kind: 'buyer', id: reservation.buyer } : { kind: 'bucket', id: chooseBucket(config, lead) },
      price: reservation?.price ?? 0,
      currency: config.currency,
      strategy: config.strategy,
      version: config.version,
      candidates,
    };
    return { decision, reservation };
  }

  async function record(request: PostLeadRequest, command: PostLeadCommand): Promise<PostLeadResponse> {
    const metadata = {
      trace_id: request.traceId,
      schema: LEAD_EVENT_SCHEMA,
      occurred_at: new Date().toISOString(),
      supplier_id: request.principal.name,
      correlation_id: request.traceId,
      causation_id: `request:${request.traceId}`,
    };
    // A lead's stream is new by construction (its id was just reserved): no read before the append.
    const { state } = await handleCommand(deps.store, leadStream(command.leadId), leadDecider, command, { assumeNew: true, metadata });
    return envelopeOf(state, request.traceId);
  }

  async function processLead(request: PostLeadRequest): Promise<PostLeadResponse> {
    const leadId = await deps.leadIds.nextId();
    const now = deps.now();
    const base = { leadId, supplier: request.principal.name, keyId: request.principal.keyId, now };
    const validation = deps.validate(request.body);
    if (!validation.ok) return record(request, { ...base, validation });

    const lead = validation.lead;
    // One routing file for the whole lead, even if it is reloaded meanwhile.
    const routing = deps.routing();
    const windowDays = routing.duplicate_window_days;
    const contacts: Array<[ContactKind, string]> = [
      ['mobile', lead.mobile],
      ['email', lead.email],
    ];
    // A test lead is checked against real claims but takes none, so test traffic never blocks a real lead.
    const claimed: ContactClaims = lead.test
      ? { duplicates: await deps.contacts.duplicates(contacts, now, windowDays) }
      : await deps.contacts.claim(contacts, leadId, now, windowDays);
    const duplicates = 'duplicates' in claimed ? claimed.duplicates : [];
    if (duplicates.length > 0) return record(request, { ...base, validation, duplicates });
    const claims = 'claims' in claimed ? claimed.claims : [];

    let reservation: Reservation | null = null;
    try {
      const enrichment = await deps.enrich(lead);
      let command: PostLeadCommand = { ...base, validation, enrichment };
      if (!verificationFailed(enrichment)) {
        const routed = await route(routing, lead, enrichment, leadId, now);
        reservation = routed.reservation;
        command = { ...command, routing: routed.decision };
      }
      // A rejected lead's claims need no release: a claim counts only while its lead is accepted.
      return await record(request, command);
    } catch (error) {
      giveBack(claims, reservation, leadId, now);
      throw error;
    }
  }

  function giveBack(claims: ContactClaim[], reservation: Reservation | null, leadId: number, now: Date): void {
    // A supplier's retry should not meet its own lead's claim (a cap slot not given back is merely unused).
    retryWhileClaimsBlock(async () => {
      await deps.contacts.release(claims, now);
      if (reservation) await deps.caps.release(reservation.buyer, reservation.caps, leadId);
    });
  }

  return async (request) => {
    const key = request.idempotencyKey;
    if (key === undefined) return processLead(request);
    if (!IDEMPOTENCY_KEY.test(key)) {
      return {
        status: 422,
        envelope: noLeadEnvelope('IDEMPOTENCY_CONFLICT', request.traceId, {
          acceptance: 'rejected',
          message: 'Idempotency-Key must be 1 to 255 visible ASCII characters.',
        }),
      };
    }
    const claim = await deps.idempotency.claim(request.principal.name, key, request.rawBody);
    switch (claim.kind) {
      case 'replay':
        return { ...claim.response, headers: { 'Idempotency-Replayed': 'true' } };
      case 'in_flight':
        return { status: 409, envelope: noLeadEnvelope('IDEMPOTENCY_CONFLICT', request.traceId), headers: { 'Retry-After': '1' } };
      case 'other_body':
        return {
          status: 422,
          envelope: noLeadEnvelope('IDEMPOTENCY_CONFLICT', request.traceId, {
            acceptance: 'rejected',
            message: 'This Idempotency-Key was used with a different body.',
          }),
        };
      case 'claimed': {
        let response: PostLeadResponse;
        try {
          response = await processLead(request);
        } catch (error) {
          await claim.abandon().catch(() => {});
          throw error;
        }
        // The lead is durable whether or not this lands; a replay then re-runs the key after it goes stale.
        await claim.complete({ status: response.status, envelope: response.envelope }).catch(() => {});
        return response;
      }
    }
  };
}

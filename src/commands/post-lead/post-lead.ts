import type { Enrichment } from '../../enrichment/check.js';
import { verificationFailed } from '../../enrichment/enricher.js';
import type { EventStore } from '../../event-store/index.js';
import { EventStoreUnavailableError, mayLandLater } from '../../event-store/port.js';
import { type RoutingCandidate, leadStream } from '../../events/lead-events.js';
import type { NormalisedLead } from '../../leads/lead.js';
import type { LeadOutcome } from '../../leads/outcome.js';
import type { LeadValidator } from '../../leads/validate.js';
import type { LoadedRoutingConfig } from '../../routing/load-config.js';
import { pingStream } from '../../events/ping-events.js';
import type { FieldError } from '../../leads/outcome.js';
import { type CandidateDecision, capPeriods, capReached, chooseBucket, evaluateBuyers, rankEligible } from '../../routing/rules.js';
import type { CapLedger, CapPeriod } from '../caps.js';
import { RECORD_BY_MS, type Contact, pendingRetryAfterMs, type ContactClaim, type ContactRegistry, type PendingContacts, retryWhileClaimsBlock } from '../contacts.js';
import { type Folded, handleCommand, readFolded } from '../handler.js';
import { standingBids } from '../ping/bidding.js';
import { PingConsumedError, type PingState, pingDecider } from '../ping/decider.js';
import { IN_FLIGHT_STALE_MS, type IdempotencyKeys, type IdempotentAnswer } from '../idempotency.js';
import type { LeadIdAllocator } from '../lead-ids.js';
import { type PostLeadCommand, type RoutingDecision, leadDecider, outcomeOf } from './decider.js';
import type { PostLead, PostLeadRequest, PostLeadResult } from './port.js';

// POST /functions/leads behind the HTTP shell (src/http/post-lead-route.ts), in the order a lead
// is decided: Idempotency-Key → validate and normalise → dedupe → enrich → route → one atomic
// append of the lead's events → the outcome folded from them. Each stage either ends the lead
// (recording why) or hands its finding to the next; the decider turns the findings into events.

export interface PostLeadDeps {
  readonly store: EventStore;
  readonly leadIds: LeadIdAllocator;
  readonly validate: LeadValidator;
  readonly enrich: (lead: NormalisedLead) => Promise<Enrichment>;
  /** The routing file in force (read per lead, so a reload needs no restart). */
  readonly routing: () => LoadedRoutingConfig;
  readonly contacts: ContactRegistry;
  readonly caps: CapLedger;
  readonly idempotency: IdempotencyKeys;
  readonly now: () => Date;
}

const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;

/** The cap slots a sale took, to give back if its lead is not recorded (none for a test lead). */
interface Reservation {
  readonly buyer: string;
  readonly caps: readonly CapPeriod[];
}

export function createPostLead(deps: PostLeadDeps): PostLead {
  const { route, routeToBids } = createRouter(deps.caps);

  return async function postLead(request) {
    try {
      return await postOnce(request);
    } catch (error) {
      // Another supplier's ping, or none: as for a lead the caller may not see, it does not exist.
      if (error instanceof PingNotFoundError) return { kind: 'ping_not_found' };
      if (error instanceof ContactsPendingError) {
        const retryAfterSeconds = Math.max(1, Math.ceil(pendingRetryAfterMs(error.pending, deps.now().getTime()) / 1000));
        return { kind: 'contacts_pending', fields: error.pending.kinds, retryAfterSeconds };
      }
      throw error;
    }
  };

  async function postOnce(request: PostLeadRequest): Promise<PostLeadResult> {
    // 1. Idempotency-Key: of several requests with one key, the first records the lead and the
    //    others get its answer, as it was.
    const key = request.idempotencyKey;
    if (key === undefined) return recorded(await decideLead(request, await deps.leadIds.nextId()), request.traceId);
    if (!IDEMPOTENCY_KEY.test(key)) return conflict('malformed_key');
    // The lead's id is reserved before the claim, which records it: a retry that finds the claim
    // stale looks for that lead (a refused retry leaves a gap in the ids, as a crash does).
    const leadId = await deps.leadIds.nextId();
    const claim = await deps.idempotency.claim(request.principal.name, key, request.rawBody, { leadId, recover: recoveredAnswer }).catch((error: unknown) => {
      throw settled(error);
    });
    if (claim.kind === 'replay') return { kind: 'recorded', outcome: claim.answer.outcome, traceId: claim.answer.traceId, replayed: true };
    if (claim.kind === 'in_flight') return { kind: 'idempotency_conflict', reason: 'in_flight', retryAfterSeconds: Math.max(1, Math.ceil(claim.retryAfterMs / 1000)) };
    if (claim.kind !== 'claimed') return conflict(claim.kind);
    let outcome: LeadOutcome;
    try {
      outcome = await decideLead(request, leadId);
    } catch (error) {
      // A lead whose append may still land keeps the key in flight until it goes stale: a retry
      // then finds the lead, if it landed, and gets its answer rather than run again as its duplicate.
      if (!mayLandLater(error)) await claim.abandon().catch(() => {});
      throw error;
    }
    // The lead is durable whether or not this lands. If it does not, it is tried again in the
    // background until the claim would go stale: a retry meanwhile is told the key is in flight
    // (409, retryable), then gets this answer, rather than run the key again as a second lead.
    const answer = { outcome, traceId: request.traceId };
    await claim.complete(answer).catch(() => retryWhileClaimsBlock(() => claim.complete(answer), IN_FLIGHT_STALE_MS));
    return recorded(outcome, request.traceId);
  }

  /**
   * The lead decided and recorded. Of the appends a post makes, only the lead's own can leave a
   * lead that lands later: a failure of any other that may still land is, for the supplier, one
   * where nothing was recorded (see settled).
   */
  async function decideLead(request: PostLeadRequest, leadId: number): Promise<LeadOutcome> {
    const appending = { started: false };
    try {
      return await decideAndRecord(request, leadId, appending);
    } catch (error) {
      throw appending.started ? error : settled(error);
    }
  }

  async function decideAndRecord(request: PostLeadRequest, leadId: number, appending: { started: boolean }): Promise<LeadOutcome> {
    // One clock and one routing file for the whole lead, even if the file is reloaded meanwhile.
    const now = deps.now();
    const routing = deps.routing();
    const who = { leadId, supplier: request.principal.name, keyId: request.principal.keyId, now };
    // 2. Validate and normalise: every failing field is named at once.
    const validation = deps.validate(request.body, request.repeated);
    // The file's currency states the money of a lead it never prices (rejected, revenue 0).
    const currency = routing.currency;
    if (!validation.ok) return recordLead(request, { ...who, validation }, currency);
    const lead = validation.lead;
    // The keyed hashes of its contacts, once: they name the contact streams and are recorded with the lead.
    const hashes = deps.contacts.hashesOf(lead);
    const record = (command: Omit<PostLeadCommand, 'contacts'>) => {
      appending.started = true;
      return recordLead(request, { ...command, contacts: hashes }, currency);
    };

    // 2b. A lead posted with a ping_id: the ping must be the supplier's, unexpired, not posted
    //     yet, and of the same zip, state, source and test flag; else the lead ends here, saying which.
    const pingId = validation.pingId ?? null;
    let ping: Folded<PingState> | null = null;
    let replacing: number | undefined;
    if (pingId !== null) {
      ping = await readFolded(deps.store, pingStream(pingId), pingDecider);
      if (!ping.state.pinged || !ping.state.collected || ping.state.pinged.supplier !== request.principal.name) throw new PingNotFoundError();
      replacing = await lostPost(ping.state, now);
      const pingRejection = refusal(ping.state, lead, now, replacing);
      if (pingRejection) return record({ ...who, validation, pingRejection });
    }

    // 3. Dedupe: an accepted lead claims its mobile and e-mail for the duplicate window. A test
    //    lead is checked against real claims but takes none, so test traffic never blocks a real lead.
    const contacts: Contact[] = [
      ['mobile', lead.mobile, hashes.mobile],
      ['email', lead.email, hashes.email],
    ];
    //    A contact an erasure suppressed is found by the same read: the lead is rejected SUPPRESSED.
    const claimed = lead.test
      ? await deps.contacts.taken(contacts, now, routing.duplicate_window_days)
      : await deps.contacts.claim(contacts, leadId, now, routing.duplicate_window_days);
    if ('suppressed' in claimed && claimed.suppressed) return record({ ...who, validation, suppressed: claimed.suppressed });
    if ('duplicates' in claimed && claimed.duplicates.length > 0) return record({ ...who, validation, duplicates: claimed.duplicates });
    //    A contact claimed by a lead another process has not recorded yet (or a post of this one
    //    waiting for this one's claim; one that is not is waited for): a post under way, or one
    //    lost with a process that died (the supplier's retry of it, often). Neither a duplicate nor
    //    free until the claim lapses: nothing is recorded, and the supplier is asked to retry then.
    if ('pending' in claimed && claimed.pending) throw new ContactsPendingError(claimed.pending);
    const claims = 'claims' in claimed ? claimed.claims : [];

    let reservation: Reservation | null = null;
    /** Whether the lead's append failed with the store unable to say whether it will still land (a cap's or the ping's may too: they lapse by themselves, see catch). */
    let unsettled = false;
    /** The ping this post marked posted (or may have), to take back if its lead is not recorded. */
    let postedPing: string | null = null;
    try {
      // 4. Enrich: phone, e-mail and consent checks; a phone or e-mail that fails rejects the lead.
      //    A rejected lead's claims need no release: a claim counts only while its lead is accepted.
      const enrichment = await deps.enrich(lead);
      if (verificationFailed(enrichment)) return await record({ ...who, validation, enrichment });

      // 5. Route: the buyers that may take it, ranked, the first with room in its caps; else a bucket.
      //    A lead with a ping goes to its standing bids first, best first, at the price bid.
      const foundFull: FoundFull = ping ? new Map() : NONE_FOUND_FULL;
      const atBid = ping ? await routeToBids(routing, lead, enrichment, leadId, now, ping.state, foundFull) : null;
      const routed = atBid ?? (await route(routing, lead, enrichment, leadId, now, foundFull));
      reservation = routed.reservation;

      // 5b. The ping is posted once: of two posts racing, the one whose PingPosted lands first sells.
      let pingMatch: PostLeadCommand['pingMatch'];
      if (ping && pingId !== null) {
        const sale = atBid ? { buyer: atBid.decision.target.id, amount: atBid.decision.price } : { buyer: null, amount: null };
        try {
          await handleCommand(deps.store, pingStream(pingId), pingDecider, { type: 'PostPing', leadId, replacing, ...sale, now }, { from: ping, metadata: pingMetadata(request, now) });
          postedPing = pingId;
        } catch (error) {
          // Its append may have been written, answer or no answer: taken back like one that was
          // (releasePing finds whether it was), or the supplier's retry would meet its own ping consumed.
          if (mayLandLater(error)) postedPing = pingId;
          if (!(error instanceof PingConsumedError)) throw error;
          giveBack([], reservation, leadId, now);
          reservation = null;
          return await record({ ...who, validation, pingRejection: { code: 'PING_CONSUMED', errors: [PING_ERRORS.consumed] } });
        }
        pingMatch = { ping_id: pingId, ...sale };
      }

      // 5c. A claim whose lead is not recorded counts for CLAIM_IN_FLIGHT_MS, and the lead's append
      //     may wait that long, less RECORD_BY_MS, for the store: a post slower than RECORD_BY_MS so
      //     far (its store stalled) could land after its contacts went to another post, so it
      //     records nothing and is answered 503, and the supplier's retry is decided afresh.
      if (deps.now().getTime() - now.getTime() >= RECORD_BY_MS) throw new PostOutlivedClaimsError();

      // 6. One atomic append of the lead's events, and the outcome folded from them.
      return await record({ ...who, validation, enrichment, routing: routed.decision, ...(pingMatch ? { pingMatch } : {}) });
    } catch (error) {
      // The lead's append may have landed with its answer lost (a store timing out, a writer that
      // died after its commit): a lead that is recorded keeps its claims, cap slot and ping, and
      // is answered from its own stream, as the retry would otherwise be refused as its duplicate.
      const landed = await recordedOutcome(leadId, currency).catch(() => null);
      if (landed) return landed;
      // An append the store may still write (a server that never answered it) keeps what the post
      // took, as a post lost with its process does: its contact claims lapse (CLAIM_IN_FLIGHT_MS),
      // its cap slot is given back once orphaned, its ping is free again after LOST_POST_MS. Given
      // back now, they could go to a copy of the consumer and its lead land after all: sold twice.
      unsettled = appending.started && mayLandLater(error);
      if (unsettled) throw error;
      giveBack(claims, reservation, leadId, now);
      if (postedPing !== null) await releasePing(request, postedPing, leadId, now);
      throw error;
    } finally {
      // Recorded or not, the post is over: a copy of this process waiting on its claims reads its lead now.
      if (claims.length > 0) deps.contacts.ended(leadId, unsettled);
    }
  }

  /** A recorded lead's answer, as its post was answered (its own trace), for an Idempotency-Key whose answer was never stored; null when it was never recorded. */
  async function recoveredAnswer(leadId: number): Promise<IdempotentAnswer | null> {
    const events = await deps.store.readStream(leadStream(leadId), { maxCount: 1 });
    const trace = events[0]?.metadata?.trace_id;
    const outcome = events.length === 0 ? null : await recordedOutcome(leadId, deps.routing().currency);
    return outcome && typeof trace === 'string' ? { outcome, traceId: trace } : null;
  }

  /** The outcome of the lead as its stream records it, or null when it has none. */
  async function recordedOutcome(leadId: number, currency: string): Promise<LeadOutcome | null> {
    const { state, revision } = await readFolded(deps.store, leadStream(leadId), leadDecider);
    return revision < 0 ? null : outcomeOf(state, currency);
  }

  /**
   * Takes back the PingPosted of a post whose lead was not recorded, so that the supplier's retry
   * (the same post, after the 503) finds the ping free and sells at its bid, rather than be refused
   * PING_CONSUMED by its own first try. At once, so the retry finds it done; in the background while
   * the store fails. A lead that was recorded after all (its append failed to answer, not to land)
   * keeps its ping.
   */
  async function releasePing(request: PostLeadRequest, pingId: string, leadId: number, now: Date): Promise<void> {
    const release = async () => {
      if ((await deps.store.readStream(leadStream(leadId), { maxCount: 1 })).length > 0) return;
      await handleCommand(deps.store, pingStream(pingId), pingDecider, { type: 'ReleasePing', leadId, now }, { metadata: pingMetadata(request, now) });
    };
    await release().catch(() => retryWhileClaimsBlock(release, LOST_POST_MS));
  }

  /**
   * The lead of the ping's PingPosted when that lead was never recorded and its post is long
   * over (it failed, or its process died, between the ping's append and the lead's): the ping is
   * then the supplier's to post again. A post still under way is given LOST_POST_MS to land.
   */
  async function lostPost(state: PingState, now: Date): Promise<number | undefined> {
    const posted = state.posted;
    if (!posted || now.getTime() - Date.parse(posted.posted_at) < LOST_POST_MS) return undefined;
    const events = await deps.store.readStream(leadStream(posted.lead_id), { maxCount: 1 });
    return events.length === 0 ? posted.lead_id : undefined;
  }

  async function recordLead(request: PostLeadRequest, command: PostLeadCommand, currency: string): Promise<LeadOutcome> {
    // No `schema`: the events of one append share this metadata, and LeadReceived is at a version
    // of its own; the event codec stamps each event's current version.
    const metadata = {
      trace_id: request.traceId,
      occurred_at: command.now.toISOString(),
      supplier_id: request.principal.name,
      correlation_id: request.traceId,
      causation_id: `request:${request.traceId}`,
    };
    // A lead's stream is new by construction (its id was just reserved): no read before the append.
    const { state } = await handleCommand(deps.store, leadStream(command.leadId), leadDecider, command, { assumeNew: true, metadata });
    return outcomeOf(state, currency);
  }

  /** Contact claims and cap slots of a lead that was not recorded go back, so the supplier's retry is not refused. */
  function giveBack(claims: ContactClaim[], reservation: Reservation | null, leadId: number, now: Date): void {
    retryWhileClaimsBlock(async () => {
      await deps.contacts.release(claims, now);
      if (reservation) await deps.caps.release(reservation.buyer, reservation.caps, leadId);
    });
  }
}

/**
 * An append's failure that may still land (see mayLandLater), where that append leaves no lead
 * behind (a contact's, a cap's, the ping's or the Idempotency-Key's claim, each lapsing by itself):
 * for the supplier, nothing was recorded, and its Idempotency-Key is free again.
 */
const settled = (error: unknown): unknown => (mayLandLater(error) ? new EventStoreUnavailableError((error as Error).message, { cause: error }) : error);

/** Far longer than a post takes between its ping's append and its lead's. */
const LOST_POST_MS = 30_000;

/** A post too slow to record its lead while its contact claims last: its lead is not recorded. */
class PostOutlivedClaimsError extends EventStoreUnavailableError {
  constructor() {
    super(`the post took over ${RECORD_BY_MS / 1000} s before its lead's append, too long to land while its contact claims last: nothing was recorded`);
  }
}

/** The lead's ping_id names no ping of the posting supplier. */
class PingNotFoundError extends Error {}

/** Thrown out of decideLead, so that an Idempotency-Key claimed for the lead is abandoned, not answered. */
class ContactsPendingError extends Error {
  constructor(readonly pending: PendingContacts) {
    super('contacts claimed by a lead not recorded yet');
  }
}

const PING_ERRORS = {
  expired: { field: 'ping_id', code: 'ping_expired', message: 'ping_id is past its expiry; ping again' },
  consumed: { field: 'ping_id', code: 'ping_consumed', message: 'ping_id was already posted' },
} as const satisfies Record<string, FieldError>;

/** Why a ping cannot take this lead, or null when it can. The fields are named, never their values. */
function refusal(state: PingState, lead: NormalisedLead, now: Date, replacing: number | undefined): PostLeadCommand['pingRejection'] | null {
  const pinged = state.pinged!;
  if (state.posted && state.posted.lead_id !== replacing) return { code: 'PING_CONSUMED', errors: [PING_ERRORS.consumed] };
  if (Date.parse(pinged.expires_at) <= now.getTime()) return { code: 'PING_EXPIRED', errors: [PING_ERRORS.expired] };
  // A test ping's post must be a test lead, and a real ping's a real one: else a real lead would be
  // sold at a bid the reports count as test, or a test lead spend a real bid.
  const differ = (['zip', 'accident_state', 'sid', 'test'] as const).filter((field) => lead[field] !== pinged[field]);
  if (differ.length === 0) return null;
  return { code: 'PING_MISMATCH', errors: differ.map((field) => ({ field, code: 'ping_mismatch', message: `${field} differs from the ping's` })) };
}

function pingMetadata(request: PostLeadRequest, now: Date) {
  return {
    trace_id: request.traceId,
    occurred_at: now.toISOString(),
    supplier_id: request.principal.name,
    correlation_id: request.traceId,
    causation_id: `request:${request.traceId}`,
  };
}

const recorded = (outcome: LeadOutcome, traceId: string): PostLeadResult => ({ kind: 'recorded', outcome, traceId, replayed: false });
const conflict = (reason: 'other_body' | 'malformed_key'): PostLeadResult => ({ kind: 'idempotency_conflict', reason });

/**
 * The routing stage: filters and strategy rank the buyers (pure, in src/routing), then the first
 * buyer with room in every cap takes the lead and a slot in each. A test lead meets a full cap as
 * a real lead would, but only looks: it takes no slot.
 */
/**
 * The buyers whose caps refused this lead already (at its ping's bid), with the cap found full:
 * not asked again as a plain post. Asked again, a buyer with a day and an hour cap took a second
 * day slot for the lead, and the give-back, once a lead, left one slot taken for ever.
 */
type FoundFull = Map<string, ReturnType<typeof capPeriods>[number]>;
/** A plain post's: no bid was tried, so none is found full (and only routeToBids adds to one). */
const NONE_FOUND_FULL: FoundFull = new Map();

function createRouter(caps: CapLedger) {
  /** For round_robin: when each buyer last got a lead from this instance, by a count of leads sold. */
  const lastSold = new Map<string, number>();
  let sold = 0;
  /** Takes a slot in every cap of the buyer (a test lead only looks): null, else the cap found full. */
  async function take<Cap extends CapPeriod>(buyerId: string, periods: readonly Cap[], lead: NormalisedLead, leadId: number): Promise<Cap | null> {
    if (periods.length === 0) return null;
    return lead.test ? caps.fullCap(buyerId, periods) : caps.reserve(buyerId, periods, leadId);
  }

  /**
   * A lead posted with a ping: its standing bids, best first, each if its buyer may still take the
   * lead (filters, requirements now that the lead is verified, hours) and has room in its caps,
   * at the price it bid. null: no bid could take it, and the lead is routed as a plain post.
   */
  async function routeToBids(config: LoadedRoutingConfig, lead: NormalisedLead, enrichment: Enrichment, leadId: number, now: Date, ping: PingState, foundFull: FoundFull) {
    // Bids made in the currency of a routing file since replaced by one in another are amounts of
    // that currency: sold at them now, a bid of 40 USD would be recorded as 40 EUR.
    if (ping.collected!.currency !== config.currency) return null;
    const bids = standingBids(config, ping.collected!.bids);
    const decisions: CandidateDecision[] = evaluateBuyers(config, lead, enrichment, now);
    const candidates: RoutingCandidate[] = decisions.map((d) => {
      const bid = bids.find((b) => b.buyer === d.buyer);
      return bid ? { ...d, price: bid.amount! } : d;
    });
    for (const bid of bids) {
      const index = candidates.findIndex((c) => c.buyer === bid.buyer);
      if (index < 0 || !candidates[index]!.eligible) continue;
      const buyer = config.buyers[index]!;
      const periods = capPeriods(buyer, now);
      const full = await take(buyer.id, periods, lead, leadId);
      if (full === null) {
        const reservation: Reservation | null = !lead.test && periods.length > 0 ? { buyer: buyer.id, caps: periods } : null;
        const decision: RoutingDecision = {
          target: { kind: 'buyer', id: buyer.id },
          price: bid.amount!,
          currency: config.currency,
          strategy: 'ping',
          version: config.version,
          candidates,
        };
        return { decision, reservation };
      }
      candidates[index] = capReached(candidates[index]!, full);
      foundFull.set(buyer.id, full);
    }
    return null;
  }

  async function route(config: LoadedRoutingConfig, lead: NormalisedLead, enrichment: Enrichment, leadId: number, now: Date, foundFull: FoundFull) {
    const decisions = evaluateBuyers(config, lead, enrichment, now);
    // evaluateBuyers made these objects for this lead alone; a buyer found full is replaced below.
    const candidates: RoutingCandidate[] = [...decisions];
    let winner: { buyer: string; price: number } | null = null;
    let reservation: Reservation | null = null;
    const ranked = rankEligible(config, decisions, lastSold);
    // The first buyer's turn is taken before the first await, so that leads routed at the same
    // moment go round as leads one after another do; a buyer found full passes it on below. A test
    // lead takes no turn: between real leads, it would hand one buyer every real lead.
    const turns = !lead.test;
    if (turns && ranked.length > 0) lastSold.set(ranked[0]!, sold++);
    for (const buyerId of ranked) {
      const buyer = config.buyers.find((b) => b.id === buyerId)!;
      const periods = capPeriods(buyer, now);
      const full = foundFull.get(buyerId) ?? (await take(buyerId, periods, lead, leadId));
      if (full === null) {
        winner = { buyer: buyerId, price: buyer.price };
        if (turns && buyerId !== ranked[0]) lastSold.set(buyerId, sold++);
        if (!lead.test && periods.length > 0) reservation = { buyer: buyerId, caps: periods };
        break;
      }
      const index = candidates.findIndex((c) => c.buyer === buyerId);
      candidates[index] = capReached(candidates[index]!, full);
    }
    const decision: RoutingDecision = {
      target: winner ? { kind: 'buyer', id: winner.buyer } : { kind: 'bucket', id: chooseBucket(config, lead) },
      price: winner?.price ?? 0,
      currency: config.currency,
      strategy: config.strategy,
      version: config.version,
      candidates,
    };
    return { decision, reservation };
  }
  return { route, routeToBids };
}

import { hash } from 'node:crypto';
import { type EventStore, mayLandLater } from '../event-store/index.js';
import type { LeadOutcome } from '../leads/outcome.js';
import { retryWhileClaimsBlock } from './contacts.js';
import { type Decider, handleCommand, readFolded } from './handler.js';
import { hashedStream } from './streams.js';

// Idempotency-Key, per supplier, kept 72 h. The key's stream records a claim before the lead is
// processed and its outcome after; the claim is decided at the revision read, so of several
// concurrent requests with one key exactly one processes the lead and the others see it in flight.
// What is kept is the outcome and the trace of the request that made it, not an HTTP answer: the
// shell renders a replay exactly as it rendered the original.

export const IDEMPOTENCY_TTL_MS = 72 * 3_600_000;
/** A claim older than this with no response is from a process that died: it may be taken over. */
export const IN_FLIGHT_STALE_MS = 30_000;

/** The answer the first request with the key got. */
export interface IdempotentAnswer {
  readonly outcome: LeadOutcome;
  readonly traceId: string;
}

export type IdempotencyClaim =
  | { readonly kind: 'claimed'; complete(answer: IdempotentAnswer): Promise<void>; abandon(): Promise<void> }
  | { readonly kind: 'replay'; readonly answer: IdempotentAnswer }
  /** `retryAfterMs`: when a retry may find the answer, or the key free to take over (see heldBy). */
  | { readonly kind: 'in_flight'; readonly retryAfterMs: number }
  | { readonly kind: 'other_body' };

/** A claim that went stale before its answer was stored: the lead it was for, and the body it was made with. */
interface StaleClaim {
  readonly leadId: number;
  readonly hash: string;
}

type KeyState =
  | { readonly kind: 'free' }
  | { readonly kind: 'in_flight'; readonly hash: string; readonly at: number; readonly leadId: number | null; readonly replaced: StaleClaim | null }
  | { readonly kind: 'done'; readonly hash: string; readonly at: number; readonly answer: IdempotentAnswer };

export type IdempotencyEvent =
  /** `lead_id`: the id reserved for the request's lead (absent in claims of older releases). */
  | { readonly type: 'IdempotencyKeyClaimed'; readonly data: { readonly request_hash: string; readonly at: string; readonly lead_id?: number } }
  | { readonly type: 'IdempotentResponseRecorded'; readonly data: { readonly at: string; readonly outcome: LeadOutcome; readonly trace_id: string } }
  | { readonly type: 'IdempotencyKeyReleased'; readonly data: { readonly at: string } };

export type IdempotencyCommand =
  | { readonly type: 'ClaimIdempotencyKey'; readonly hash: string; readonly now: number; readonly leadId?: number }
  /** The claim made at `claimedAt` ends: with the response it led to, or released when nothing was recorded. */
  | { readonly type: 'CompleteIdempotencyKey'; readonly claimedAt: number; readonly now: number; readonly answer: IdempotentAnswer }
  | { readonly type: 'ReleaseIdempotencyKey'; readonly claimedAt: number; readonly now: number };

/** Is the key taken: answered within its lifetime, or in flight and not stale? */
function taken(state: KeyState, now: number): boolean {
  if (state.kind === 'done') return now - state.at < IDEMPOTENCY_TTL_MS;
  return state.kind === 'in_flight' && now - state.at < IN_FLIGHT_STALE_MS;
}

export const idempotencyDecider: Decider<IdempotencyCommand, KeyState, IdempotencyEvent> = {
  initialState: { kind: 'free' },
  evolve(state, { type, data }) {
    if (type === 'IdempotencyKeyClaimed') {
      // Taken over from a claim that went stale: which lead that one was for, to look for it.
      const replaced = state.kind === 'in_flight' && state.leadId !== null ? { leadId: state.leadId, hash: state.hash } : null;
      return { kind: 'in_flight', hash: data.request_hash, at: Date.parse(data.at), leadId: data.lead_id ?? null, replaced };
    }
    if (type === 'IdempotencyKeyReleased') return { kind: 'free' };
    if (type === 'IdempotentResponseRecorded' && state.kind === 'in_flight') {
      return { kind: 'done', hash: state.hash, at: state.at, answer: { outcome: data.outcome, traceId: data.trace_id } };
    }
    return state;
  },
  decide(command, state) {
    const at = new Date(command.now).toISOString();
    if (command.type === 'ClaimIdempotencyKey') {
      if (taken(state, command.now)) return [];
      return [{ type: 'IdempotencyKeyClaimed', data: { request_hash: command.hash, at, ...(command.leadId === undefined ? {} : { lead_id: command.leadId }) } }];
    }
    // A claim taken over after it went stale is no longer this request's to end.
    if (state.kind !== 'in_flight' || state.at !== command.claimedAt) return [];
    if (command.type === 'ReleaseIdempotencyKey') return [{ type: 'IdempotencyKeyReleased', data: { at } }];
    return [{ type: 'IdempotentResponseRecorded', data: { at, outcome: command.answer.outcome, trace_id: command.answer.traceId } }];
  },
};

/** The plain SHA-256 of a body, as claims were recorded before their fingerprints were keyed. */
export const requestHash = (body: Buffer): string => hash('sha256', body, 'hex');

/** A keyed fingerprint is marked, so that a claim recorded with a plain hash is still told apart and matched. */
export const KEYED_FINGERPRINT = 'keyed:';

/** Whether the claim was made with this body: by the fingerprint it was recorded with. */
function sameBody(recorded: string, fingerprint: string, body: Buffer): boolean {
  return recorded === fingerprint || (!recorded.startsWith(KEYED_FINGERPRINT) && recorded === requestHash(body));
}

/**
 * A claim older than this is not a post still being answered (one takes a second or two), but one
 * whose process died: its key is free to take over only once it is stale, so a retry is told that.
 */
const LIVE_CLAIM_MS = 10_000;

/** What a request with this body is told of a key another request holds: its answer, in flight, or another body's. */
function heldBy(state: KeyState, fingerprint: string, body: Buffer, now: number): IdempotencyClaim {
  if (state.kind === 'free' || !sameBody(state.hash, fingerprint, body)) return { kind: 'other_body' };
  if (state.kind === 'done') return { kind: 'replay', answer: state.answer };
  const age = now - state.at;
  return { kind: 'in_flight', retryAfterMs: age < LIVE_CLAIM_MS ? 1_000 : IN_FLIGHT_STALE_MS - age };
}

/**
 * How a key's stream is named. A supplier may make its keys of the consumer's e-mail or phone, so
 * the service names them by a keyed hash; stores from older releases hold them under a plain hash,
 * which is read while an answer there may still count.
 */
export interface IdempotencyNames {
  stream(supplier: string, key: string): string;
  /** The key's stream under its plain name, while one may still hold a live answer; null once none can. */
  olderStream(supplier: string, key: string, now: number): string | null;
  /**
   * What a claim records of the request's body, to tell a retry from another body under the same
   * key. Keyed, like the names: a body holds the consumer's contacts, and its plain hash stays in
   * the event store after an erasure has shredded them.
   */
  fingerprint(body: Buffer): string;
}

/** The plain names of older releases (tests and tools that need no secret). */
const plainIdempotencyNames: IdempotencyNames = {
  stream: (supplier, key) => plainIdempotencyStream(supplier, key),
  olderStream: () => null,
  fingerprint: requestHash,
};

export const plainIdempotencyStream = (supplier: string, key: string): string => hashedStream('idempotency', supplier, key);

export class IdempotencyKeys {
  constructor(
    private readonly store: EventStore,
    private readonly now: () => number = Date.now,
    private readonly names: IdempotencyNames = plainIdempotencyNames,
  ) {}

  /**
   * Claims the key for a request with this body. `leadId`: the id reserved for its lead, recorded
   * with the claim. `recover`: the answer a lead's own stream gives, null when it was never
   * recorded. A process that died after recording its lead and before storing the answer left a
   * claim that goes stale; the request that takes it over finds that lead by the claim's id and is
   * answered with it, rather than make a second lead that the first would refuse as its duplicate.
   */
  async claim(supplier: string, key: string, body: Buffer, lead: { readonly leadId: number; recover(leadId: number): Promise<IdempotentAnswer | null> } | null = null): Promise<IdempotencyClaim> {
    const stream = this.names.stream(supplier, key);
    const hash = this.names.fingerprint(body);
    // A key used just before this release was named plainly: its answer still stands.
    const older = this.names.olderStream(supplier, key, this.now());
    if (older !== null) {
      const { state } = await readFolded(this.store, older, idempotencyDecider);
      if (taken(state, this.now())) return heldBy(state, hash, body, this.now());
    }
    // A key is usually new: the claim is first tried as a new stream, without reading it.
    const claim = { type: 'ClaimIdempotencyKey' as const, hash, now: this.now(), ...(lead ? { leadId: lead.leadId } : {}) };
    const claimed = await handleCommand(this.store, stream, idempotencyDecider, claim, { assumeNew: true }).catch(async (error: unknown) => {
      // Written, or still to be, with no answer: taken back if it was, so that the retry the post
      // asks for goes through at once rather than find its own claim in flight for 30 s.
      if (mayLandLater(error)) await this.release(stream, hash, claim.now, lead?.leadId ?? null).catch(() => {});
      throw error;
    });
    const { state } = claimed;
    if (claimed.events.length === 0) return heldBy(state, hash, body, this.now());
    if (state.kind !== 'in_flight') throw new Error('a claimed idempotency key is in flight');
    const end = (command: IdempotencyCommand) => handleCommand(this.store, stream, idempotencyDecider, command, { from: claimed }).then(() => {});
    const recovered = state.replaced && lead ? await lead.recover(state.replaced.leadId) : null;
    if (recovered) {
      // The key's answer is that lead's, stored now: this request is its retry, or another body's.
      // Stored in the background while the store fails: a retry meanwhile recovers it again.
      const store = () => end({ type: 'CompleteIdempotencyKey', claimedAt: state.at, now: this.now(), answer: recovered });
      await store().catch(() => retryWhileClaimsBlock(store, IN_FLIGHT_STALE_MS));
      return sameBody(state.replaced!.hash, hash, body) ? { kind: 'replay', answer: recovered } : { kind: 'other_body' };
    }
    return {
      kind: 'claimed',
      complete: (answer) => end({ type: 'CompleteIdempotencyKey', claimedAt: state.at, now: this.now(), answer }),
      // Nothing was recorded (the store failed): let the client's retry go through at once.
      abandon: () => end({ type: 'ReleaseIdempotencyKey', claimedAt: state.at, now: this.now() }),
    };
  }

  /**
   * Releases the claim this request made at `at` with `hash` for `leadId`, if the stream holds it
   * (and nothing since): never the claim of another request with the same body in the same
   * millisecond, which the lead id it reserved tells apart.
   */
  private async release(stream: string, hash: string, at: number, leadId: number | null): Promise<void> {
    const folded = await readFolded(this.store, stream, idempotencyDecider);
    const { state } = folded;
    if (state.kind !== 'in_flight' || state.hash !== hash || state.at !== at || state.leadId !== leadId) return;
    await handleCommand(this.store, stream, idempotencyDecider, { type: 'ReleaseIdempotencyKey', claimedAt: at, now: this.now() }, { from: folded });
  }
}

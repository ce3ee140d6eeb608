import { createHash } from 'node:crypto';
import type { EventStore } from '../../event-store/index.js';
import { pingStream } from '../../events/ping-events.js';
import type { Principal } from '../../keys/principal.js';
import type { FieldError } from '../../leads/outcome.js';
import type { NormalisedPing, PingValidator } from '../../leads/validate.js';
import type { LoadedRoutingConfig } from '../../routing/load-config.js';
import { StreamContendedError, handleCommand, readFolded } from '../handler.js';
import { hashedStream } from '../streams.js';
import { type BiddingDeps, collectBids } from './bidding.js';
import { type PingState, pingDecider, pingLookupDecider } from './decider.js';

// POST /functions/pings behind the HTTP shell (src/http/ping-route.ts): validate → find the
// supplier's unexpired ping of the same fields (then answer as it did, asking no buyer) → ask the
// buyers → record the ping and its bids in one append → remember it under its fields' hash.
// Identical pings at once share one round in a process; across processes, one ping is recorded.

interface PingRequest {
  readonly principal: Principal;
  readonly traceId: string;
  /** The parsed body; objects with a null prototype (see PostLeadRequest). */
  readonly body: Record<string, unknown>;
  /** The names `body` was sent with more than once (it holds the last value of each). */
  readonly repeated?: readonly string[];
}

/** A ping's answer in the lead business's terms; the shell renders it as the envelope. */
export interface PingAnswer {
  readonly ping_id: string;
  readonly code: 'BID' | 'NO_BID';
  readonly bid: number | null;
  readonly currency: string;
  readonly expires_at: string;
  readonly test: boolean;
}

type PingResult = { readonly kind: 'invalid'; readonly errors: FieldError[] } | { readonly kind: 'answered'; readonly answer: PingAnswer };

export type Ping = (request: PingRequest) => Promise<PingResult>;

export interface PingDeps extends BiddingDeps {
  readonly store: EventStore;
  readonly validate: PingValidator;
  readonly routing: () => LoadedRoutingConfig;
  readonly now: () => Date;
  /** How long a ping's answer stands (PING_TTL_SECONDS). */
  readonly ttlSeconds: number;
  /** The ping answers by then, with the bids it has (PING_DEADLINE_MS). */
  readonly deadlineMs: number;
}

/**
 * What the answer needs after the bidding round closes: two appends and the response. The round
 * closes a tenth of the deadline before it (never before half of it has passed), so the ping
 * answers by the deadline, not the deadline plus recording, also on a busy machine.
 */
const recordingReserveMs = (deadlineMs: number): number => Math.max(20, deadlineMs / 10);

/** Every value that makes two pings "the same": hashed into the lookup stream's name, never written out. */
const lookupStream = (supplier: string, ping: NormalisedPing): string =>
  hashedStream('ping-fields', supplier, ping.zip, ping.accident_state, ping.sid, ping.s1 ?? '', String(ping.test));

function answerOf(state: PingState): PingAnswer {
  const { pinged, collected } = state;
  if (!pinged || !collected) throw new Error('the ping has no answer yet');
  return {
    ping_id: pinged.ping_id,
    code: collected.winner ? 'BID' : 'NO_BID',
    bid: collected.winner?.amount ?? null,
    currency: collected.currency,
    expires_at: pinged.expires_at,
    test: pinged.test,
  };
}

/**
 * The id of the ping that answers the fields of `lookup` once the lookup stream is at `revision`:
 * the same in every process that read that revision, so when two of them answer the same fields
 * at once, both decide on the same ping stream and only the first append lands. A UUID (version 8:
 * its bits are the hash's) like the ids the post's ping_id takes.
 */
function pingIdOf(lookup: string, revision: number): string {
  const bytes = createHash('sha256').update(`${lookup}\n${revision}`).digest();
  bytes[6] = (bytes[6]! & 0x0f) | 0x80;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex', 0, 16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** A ping a repeat may be answered with: answered, not posted, not expired. */
const standing = (state: PingState, now: Date): boolean =>
  state.collected !== null && state.posted === null && Date.parse(state.pinged!.expires_at) > now.getTime();

/** A lookup whose recorded ping is not standing (expired before it was ever answered) is looked at again, a few times. */
const MAX_ROUNDS = 3;

export function createPing(deps: PingDeps): Ping {
  /**
   * The rounds this process is running, by the lookup stream of their fields: an identical ping
   * arriving meanwhile waits for the round under way and gets its answer, instead of asking the
   * buyers again. (Its failure, too: a store that failed the round would fail the repeat.)
   */
  const rounds = new Map<string, Promise<PingAnswer>>();

  return async function ping(request) {
    const started = performance.now();
    const validation = deps.validate(request.body, request.repeated);
    if (!validation.ok) return { kind: 'invalid', errors: validation.errors };
    const lookup = lookupStream(request.principal.name, validation.ping);
    let round = rounds.get(lookup);
    if (!round) {
      round = answerPing(deps, request, validation.ping, lookup, started).finally(() => rounds.delete(lookup));
      rounds.set(lookup, round);
    }
    return { kind: 'answered', answer: await round };
  };
}

/**
 * A repeat of a standing ping is answered as it was; else the buyers are asked and the ping
 * recorded in its own stream (appended as new) and in the lookup (over what was read). The ping's
 * id comes from the lookup as read, so processes answering the same fields at once ask their
 * buyers each but decide on the same ping stream: the first append records the ping, the others
 * find it answered, record nothing and answer with it.
 */
async function answerPing(deps: PingDeps, request: PingRequest, fields: NormalisedPing, lookup: string, started: number): Promise<PingAnswer> {
  const supplier = request.principal.name;
  const now = deps.now();
  for (let round = 1; ; round++) {
    // A repeat before expiry is answered as the first was. A ping already posted is spent: the
    // same fields may well be another consumer's lead, so it gets a ping of its own.
    const seen = await readFolded(deps.store, lookup, pingLookupDecider);
    let pingId = pingIdOf(lookup, seen.revision);
    if (seen.state && Date.parse(seen.state.expires_at) > now.getTime()) {
      const earlier = await readFolded(deps.store, pingStream(seen.state.ping_id), pingDecider);
      if (standing(earlier.state, now)) return answerOf(earlier.state);
      // Named but not answered: its stream is being appended by the process that named it (the
      // two appends run at once), or never landed. Answering that same ping joins the former and
      // takes over the latter; either way one answer is recorded.
      if (!earlier.state.pinged) pingId = seen.state.ping_id;
    }

    const routing = deps.routing();
    const closeAfterMs = Math.max(deps.deadlineMs / 2, deps.deadlineMs - recordingReserveMs(deps.deadlineMs) - (performance.now() - started));
    const { bids, winner } = await collectBids(routing, pingId, fields, now, closeAfterMs, deps);
    const expiresAt = new Date(now.getTime() + deps.ttlSeconds * 1000);
    const metadata = {
      trace_id: request.traceId,
      occurred_at: now.toISOString(),
      supplier_id: supplier,
      correlation_id: request.traceId,
      causation_id: `request:${request.traceId}`,
    };
    const command = { type: 'AnswerPing', pingId, supplier, keyId: request.principal.keyId, ping: fields, now, expiresAt, bids, winner, currency: routing.currency } as const;
    const issued = { ping_id: pingId, expires_at: expiresAt.toISOString() };
    const [answered] = await Promise.all([
      handleCommand(deps.store, pingStream(pingId), pingDecider, command, { assumeNew: true, metadata }),
      handleCommand(deps.store, lookup, pingLookupDecider, { issued, replaces: seen.state?.ping_id ?? null }, { from: seen, metadata }),
    ]);
    if (standing(answered.state, now)) return answerOf(answered.state);
    // Found answered but expired: a ping whose lookup entry never landed (its process stopped
    // between the two appends). The lookup names it now, so the next round has an id of its own.
    if (round === MAX_ROUNDS) throw new StreamContendedError(lookup);
  }
}

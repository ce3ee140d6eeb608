import type { EventStore } from '../../event-store/index.js';
import { pingStream } from '../../events/ping-events.js';
import type { Principal } from '../../keys/principal.js';
import type { FieldError } from '../../leads/outcome.js';
import type { NormalisedPing, PingValidation } from '../../leads/validate.js';
import type { LoadedRoutingConfig } from '../../routing/load-config.js';
import { handleCommand, readFolded } from '../handler.js';
import { hashedStream } from '../streams.js';
import { type BiddingDeps, collectBids } from './bidding.js';
import { type PingState, pingDecider, pingLookupDecider } from './decider.js';

// POST /functions/pings behind the HTTP shell (src/http/ping-route.ts): validate → find the
// supplier's unexpired ping of the same fields (then answer as it did, asking no buyer) → ask the
// buyers → record the ping and its bids in one append → remember it under its fields' hash.

interface PingRequest {
  readonly principal: Principal;
  readonly traceId: string;
  /** The parsed body; objects with a null prototype (see PostLeadRequest). */
  readonly body: Record<string, unknown>;
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
  readonly validate: (body: Readonly<Record<string, unknown>>) => PingValidation;
  readonly routing: () => LoadedRoutingConfig;
  readonly now: () => Date;
  readonly newId: () => string;
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

export function createPing(deps: PingDeps): Ping {
  return async function ping(request) {
    const started = performance.now();
    const validation = deps.validate(request.body);
    if (!validation.ok) return { kind: 'invalid', errors: validation.errors };
    const fields = validation.ping;
    const supplier = request.principal.name;
    const now = deps.now();

    // A repeat before expiry is answered as the first was. A ping already posted is spent: the
    // same fields may well be another consumer's lead, so it gets a ping of its own.
    const lookup = lookupStream(supplier, fields);
    const seen = await readFolded(deps.store, lookup, pingLookupDecider);
    if (seen.state && Date.parse(seen.state.expires_at) > now.getTime()) {
      const earlier = await readFolded(deps.store, pingStream(seen.state.ping_id), pingDecider);
      if (earlier.state.collected && !earlier.state.posted) return { kind: 'answered', answer: answerOf(earlier.state) };
    }

    const routing = deps.routing();
    const pingId = deps.newId();
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
    // Both appends at once: a lookup entry whose ping failed to land only makes the next repeat a
    // new ping (the repeat finds no answer in its stream). Two identical pings racing both ask the
    // buyers; the later one to land is the one repeats get.
    const [answered] = await Promise.all([
      handleCommand(deps.store, pingStream(pingId), pingDecider, command, { assumeNew: true, metadata }),
      handleCommand(deps.store, lookup, pingLookupDecider, { ping_id: pingId, expires_at: expiresAt.toISOString() }, { from: seen, metadata }),
    ]);
    return { kind: 'answered', answer: answerOf(answered.state) };
  };
}

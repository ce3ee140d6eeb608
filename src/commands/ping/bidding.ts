import { request } from 'node:https';
import { type BuyerConnections, staleConnection } from '../../delivery/buyer-agent.js';
import type { CapLedger } from '../caps.js';
import type { BidderRest } from './bidder-rest.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, signDelivery } from '../../delivery/signature.js';
import type { PingBid } from '../../events/ping-events.js';
import type { NormalisedPing } from '../../leads/validate.js';
import type { Buyer, LoadedRoutingConfig } from '../../routing/load-config.js';
import { capPeriods, pingSkip } from '../../routing/rules.js';

// Asking the buyers what a ping is worth. Every buyer that bids and may take the lead now
// (filters, hours, room in its caps) is asked at once: a static bidder bids its price, a webhook
// bidder is sent the ping's fields, signed as deliveries are, and has its own timeout. The whole
// round has a deadline: a buyer still silent then is recorded as timed out and its answer, if it
// ever comes, is dropped (its request is aborted), so one hanging buyer never holds the ping.

/** What a webhook bidder is sent: the ping's qualifying fields, never a consumer's. */
interface BidRequestBody {
  readonly ping_id: string;
  readonly zip: string;
  readonly accident_state: string;
  readonly sid: string;
  readonly s1: string | null;
  readonly test: boolean;
  readonly currency: string;
}

export interface BiddingDeps {
  readonly caps: CapLedger;
  /** Where a bidder's `secret_env` is looked up. */
  readonly env: NodeJS.ProcessEnv;
  readonly agent: BuyerConnections;
  /** Told every round's answers, for /metrics. */
  readonly countBids?: (bids: readonly PingBid[]) => void;
  /** Which webhook bidders are asked, after how they answered lately (bidder-rest.ts); all of them without it. */
  readonly rest?: BidderRest;
}

export interface CollectedBids {
  readonly bids: PingBid[];
  readonly winner: { readonly buyer: string; readonly amount: number } | null;
}

/** An answer's body is a number or null; anything bigger than this is not a bid. */
const MAX_ANSWER_BYTES = 4096;

/** Asks every bidder; after `closeAfterMs` the round ends with the bids it has. */
export async function collectBids(config: LoadedRoutingConfig, pingId: string, ping: NormalisedPing, now: Date, closeAfterMs: number, deps: BiddingDeps): Promise<CollectedBids> {
  const round = new AbortController();
  const deadline = setTimeout(() => round.abort(), closeAfterMs);
  const body = JSON.stringify({
    ping_id: pingId, zip: ping.zip, accident_state: ping.accident_state, sid: ping.sid, s1: ping.s1, test: ping.test, currency: config.currency,
  } satisfies BidRequestBody);
  try {
    const bidders = config.buyers.filter((buyer) => buyer.ping !== null);
    const bids = await Promise.all(bidders.map((buyer) => bidOf(buyer, config, ping, now, body, round.signal, deps)));
    deps.countBids?.(bids);
    return { bids, winner: highest(config, bids) };
  } finally {
    clearTimeout(deadline);
  }
}

async function bidOf(buyer: Buyer, config: LoadedRoutingConfig, ping: NormalisedPing, now: Date, body: string, round: AbortSignal, deps: BiddingDeps): Promise<PingBid> {
  const kind = buyer.ping!.kind;
  const skip = pingSkip(buyer, ping, now);
  if (skip) return { buyer: buyer.id, kind, result: 'ineligible', amount: null, latency_ms: null, detail: skip.reason };
  const periods = capPeriods(buyer, now);
  if (periods.length > 0 && !(await deps.caps.hasRoom(buyer.id, periods))) {
    return { buyer: buyer.id, kind, result: 'ineligible', amount: null, latency_ms: null, detail: 'cap_reached' };
  }
  // A static bidder bids its price, which the operator wrote in the routing file: no ceiling to guard.
  if (buyer.ping!.kind === 'static') return judged(buyer.id, kind, buyer.price, 0, config.min_bid, null);
  const { url, timeout_ms, secret_env, max_bid } = buyer.ping!;
  if (deps.rest && !deps.rest.ask(buyer.id)) return { buyer: buyer.id, kind, result: 'ineligible', amount: null, latency_ms: null, detail: 'bidder_resting' };
  // Set empty signs nothing, as for deliveries.
  const secret = secret_env ? deps.env[secret_env] || null : null;
  const answer = await askBid(url, body, secret, now, timeout_ms, round, deps.agent);
  deps.rest?.answered(buyer.id, answer.kind === 'answered');
  if (answer.kind !== 'answered') return { buyer: buyer.id, kind, result: answer.kind, amount: null, latency_ms: answer.latencyMs, detail: answer.detail };
  const amount = answer.bid;
  if (amount === undefined) return { buyer: buyer.id, kind, result: 'invalid', amount: null, latency_ms: answer.latencyMs, detail: 'not_a_bid' };
  if (amount === null) return { buyer: buyer.id, kind, result: 'no_bid', amount: null, latency_ms: answer.latencyMs };
  // A bid names its currency or is taken in the one it was asked in; 40 EUR is not 40 of the
  // file's currency, so its number is not recorded as an amount of it. A code in lower case
  // (`"usd"`, as Stripe and many billing systems write it) names the same currency.
  const named = typeof answer.currency === 'string' ? answer.currency.toUpperCase() : answer.currency;
  if (named !== undefined && named !== config.currency) {
    return { buyer: buyer.id, kind, result: 'invalid', amount: null, latency_ms: answer.latencyMs, detail: 'currency_mismatch' };
  }
  return judged(buyer.id, kind, amount, answer.latencyMs, config.min_bid, max_bid);
}

/**
 * Within this many cents of a whole cent, an amount is that cent. Binary floating point holds no
 * price with cents exactly (19.99 * 100 is 1998.9999999999998), and a bidder's own sums add a little
 * more (0.1 + 0.2); both are far under a millionth of a cent, and a third decimal far over it.
 */
const CENT_TOLERANCE = 1e-6;

/** An amount of money in whole cents, or null when it is none: not finite, negative, or a fraction of a cent. */
function wholeCents(amount: number): number | null {
  if (!Number.isFinite(amount) || amount < 0) return null;
  const cents = Math.round(amount * 100);
  return Math.abs(amount * 100 - cents) <= CENT_TOLERANCE ? cents : null;
}

/**
 * A number a buyer bid, kept or ignored: negative, a fraction of a cent, under the floor or over the
 * ceiling (null: none) is not a standing bid. A bid stands at its whole cents, so 19.990000001 and
 * 19.99 are the same bid, and the amount recorded is the one a price of 19.99 is.
 */
function judged(buyer: string, kind: PingBid['kind'], answered: number, latencyMs: number, minBid: number, maxBid: number | null): PingBid {
  const latency_ms = Math.round(latencyMs);
  const cents = wholeCents(answered);
  if (cents === null) return { buyer, kind, result: 'invalid', amount: Number.isFinite(answered) ? answered : null, latency_ms, detail: 'not_a_price' };
  const amount = cents / 100;
  if (amount < minBid) return { buyer, kind, result: 'below_min_bid', amount, latency_ms, detail: `min_bid ${minBid}` };
  if (maxBid !== null && amount > maxBid) return { buyer, kind, result: 'above_max_bid', amount, latency_ms, detail: `max_bid ${maxBid}` };
  return { buyer, kind, result: 'bid', amount, latency_ms };
}

/** Highest standing bid; ties go to the lower priority number, then to the buyer listed first. */
function highest(config: LoadedRoutingConfig, bids: readonly PingBid[]): CollectedBids['winner'] {
  const ranked = standingBids(config, bids);
  return ranked.length === 0 ? null : { buyer: ranked[0]!.buyer, amount: ranked[0]!.amount! };
}

/** The bids that stood, best first: the order a post tries them in. */
export function standingBids(config: Pick<LoadedRoutingConfig, 'buyers'>, bids: readonly PingBid[]): PingBid[] {
  const position = new Map(config.buyers.map((b, i) => [b.id, i]));
  const priority = (id: string) => config.buyers.find((b) => b.id === id)?.priority ?? Number.MAX_SAFE_INTEGER;
  return bids
    .filter((b) => b.result === 'bid')
    .sort((a, b) => b.amount! - a.amount! || priority(a.buyer) - priority(b.buyer) || (position.get(a.buyer) ?? 0) - (position.get(b.buyer) ?? 0));
}

type BidAnswer =
  /** `bid` undefined: the body was not `{"bid": number|null}`; `currency` undefined: the body named none. */
  | { readonly kind: 'answered'; readonly bid: number | null | undefined; readonly currency: unknown; readonly latencyMs: number }
  | { readonly kind: 'timeout' | 'error'; readonly latencyMs: number; readonly detail: string };

/** One signed POST to a bidder, ended by its own timeout or the round's deadline, whichever comes first. */
function askBid(url: string, body: string, secret: string | null, now: Date, timeoutMs: number, round: AbortSignal, agent: BuyerConnections): Promise<BidAnswer> {
  const started = performance.now();
  const latencyMs = () => Math.round(performance.now() - started);
  let own: AbortSignal;
  try {
    own = AbortSignal.timeout(timeoutMs);
  } catch {
    // A timeout Node cannot time (over 2^32-1 ms) fails this bidder alone: thrown here, it would
    // fail the whole round, every other buyer's bid with it, and answer the ping 500. The routing
    // file refuses such a value; this guards a config that reached the code another way.
    return Promise.resolve({ kind: 'error', latencyMs: 0, detail: 'bad_timeout_ms' });
  }
  const signal = AbortSignal.any([round, own]);
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const headers: Record<string, string> = { 'Content-Type': 'application/json', 'Content-Length': String(Buffer.byteLength(body)), [TIMESTAMP_HEADER]: timestamp };
  if (secret) headers[SIGNATURE_HEADER] = signDelivery(secret, timestamp, body);
  return new Promise<BidAnswer>((resolve) => {
    let settled = false;
    const settle = (answer: BidAnswer) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      resolve(answer);
    };
    // Settled the moment the signal fires, not when the socket gets round to closing.
    const onAbort = () => settle({ kind: 'timeout', latencyMs: latencyMs(), detail: own.aborted ? 'timeout_ms' : 'deadline' });
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort);
    // Sent once more, on a new connection, when the kept one it went out on turns out closed by the bidder.
    const send = (retried: boolean) => {
      let answered = false;
      const req = request(url, { method: 'POST', agent, headers, signal }, (res) => {
        answered = true;
        const status = res.statusCode ?? 0;
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) {
            settle({ kind: 'answered', bid: undefined, currency: undefined, latencyMs: latencyMs() });
            res.destroy();
          } else chunks.push(chunk);
        });
        res.on('error', () => settle({ kind: 'error', latencyMs: latencyMs(), detail: 'connection_error' }));
        res.on('end', () => {
          if (status < 200 || status > 299) return settle({ kind: 'error', latencyMs: latencyMs(), detail: `http_${status}` });
          settle({ kind: 'answered', ...bidIn(Buffer.concat(chunks).toString('utf8')), latencyMs: latencyMs() });
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (!retried && !answered && !settled && !signal.aborted && staleConnection(req, error)) {
          agent.sentAgain?.();
          return send(true);
        }
        settle({ kind: 'error', latencyMs: latencyMs(), detail: error.code ?? 'connection_error' });
      });
      req.end(body);
    };
    try {
      send(false);
    } catch {
      settle({ kind: 'error', latencyMs: latencyMs(), detail: 'bad_url' });
    }
  });
}

/**
 * The bid in an answer's body, `{"bid": number|null}` and optionally `"currency"`: the bid a number,
 * null, or undefined when the body is not such an answer; the currency as answered, undefined when
 * it names none (or null).
 */
function bidIn(text: string): { readonly bid: number | null | undefined; readonly currency: unknown } {
  const none = { bid: undefined, currency: undefined };
  try {
    const answer = JSON.parse(text) as unknown;
    if (typeof answer !== 'object' || answer === null || !Object.hasOwn(answer, 'bid')) return none;
    const { bid, currency } = answer as { bid: unknown; currency?: unknown };
    return bid === null || typeof bid === 'number' ? { bid, currency: currency ?? undefined } : none;
  } catch {
    return none;
  }
}

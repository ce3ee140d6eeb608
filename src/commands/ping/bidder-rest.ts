// A webhook bidder that keeps failing is rested, in this process, instead of asked by every ping.
// While a buyer's bid endpoint is down or hanging, each ping waited for it until its timeout_ms
// or the round's deadline (up to PING_DEADLINE_MS, a second by default): every supplier's pings
// were that slow for as long as the outage lasted, for a bid that never came. After
// FAILURES_TO_REST timeouts or errors in a row the bidder is not asked for a rest (recorded as
// `ineligible`, detail `bidder_resting`); then one ping asks it again while the others still pass
// it by. An answer, of any kind, ends the rest; another failure rests it twice as long, up to
// MAX_REST_MS.

const FAILURES_TO_REST = 5;
const FIRST_REST_MS = 10_000;
const MAX_REST_MS = 300_000;

interface BidderStanding {
  /** Timeouts and errors in a row. */
  failures: number;
  /** Not asked until then (epoch ms); 0 when not resting. */
  restUntil: number;
  restMs: number;
  /** One ping asks a bidder whose rest is over; the others pass it by until that one is answered. */
  probing: boolean;
}

export class BidderRest {
  private readonly standings = new Map<string, BidderStanding>();

  constructor(private readonly now: () => number) {}

  /** Whether this ping asks the bidder: false while it rests, or while another ping tries it after its rest. */
  ask(buyer: string): boolean {
    const standing = this.standings.get(buyer);
    if (!standing || standing.restUntil === 0) return true;
    if (standing.probing || this.now() < standing.restUntil) return false;
    standing.probing = true;
    return true;
  }

  /** What came of asking it: an answer (of any kind), or none (a timeout, an error). */
  answered(buyer: string, answered: boolean): void {
    if (answered) {
      this.standings.delete(buyer);
      return;
    }
    const standing = this.standings.get(buyer) ?? { failures: 0, restUntil: 0, restMs: 0, probing: false };
    standing.failures += 1;
    if (standing.probing || standing.failures >= FAILURES_TO_REST) {
      standing.restMs = standing.probing ? Math.min(standing.restMs * 2, MAX_REST_MS) : FIRST_REST_MS;
      standing.restUntil = this.now() + standing.restMs;
      standing.probing = false;
    }
    this.standings.set(buyer, standing);
  }
}


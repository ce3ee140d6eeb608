// The events of a ping's own stream, `ping-{ping_id}`: a supplier asked what a lead would fetch
// (LeadPinged), the buyers answered (PingBidsCollected), and the lead was posted against it
// (PingPosted, appended at the revision read, so a ping is posted once; PingPostReleased when that
// lead could not be recorded). A ping carries no
// consumer: no name, e-mail or phone is ever in these events. Each event repeats the supplier and
// source it reports under, so a projection can count it without reading another stream.

export const pingStream = (pingId: string): string => `ping-${pingId}`;

/** Where a ping is reported: the supplier, its source, the state and whether it was a test. */
interface PingSource {
  readonly ping_id: string;
  readonly supplier: string;
  readonly sid: string;
  readonly accident_state: string;
  readonly test: boolean;
  /** When the ping arrived: reports count all of a ping's events in that hour. */
  readonly pinged_at: string;
}

export interface LeadPinged {
  readonly type: 'LeadPinged';
  readonly data: PingSource & {
    readonly key_id: string;
    readonly zip: string;
    readonly s1: string | null;
    readonly expires_at: string;
  };
}

/** What one buyer did with a ping. */
export interface PingBid {
  readonly buyer: string;
  readonly kind: 'static' | 'webhook';
  /**
   * `bid`: it bid `amount`; `no_bid`: it answered null; `ineligible`: its filters, caps or hours
   * ruled it out, or it was resting after failing pings in a row (detail `bidder_resting`), so it was not asked; `below_min_bid`, `above_max_bid`, `invalid`: it answered,
   * and the answer was ignored; `timeout`, `error`: no usable answer in time.
   */
  readonly result: 'bid' | 'no_bid' | 'ineligible' | 'below_min_bid' | 'above_max_bid' | 'invalid' | 'timeout' | 'error';
  /** The amount it answered (null when it did not bid or the answer was no number). */
  readonly amount: number | null;
  /** Milliseconds until its answer (null when it was not asked). */
  readonly latency_ms: number | null;
  /** A few machine-readable words: `state_not_allowed`, `http_500`, `deadline`; never PII. */
  readonly detail?: string;
}

export interface PingBidsCollected {
  readonly type: 'PingBidsCollected';
  readonly data: PingSource & {
    readonly bids: readonly PingBid[];
    /** The highest standing bid (ties by priority), or null: NO_BID. */
    readonly winner: { readonly buyer: string; readonly amount: number } | null;
    readonly currency: string;
    readonly collected_at: string;
  };
}

export interface PingPosted {
  readonly type: 'PingPosted';
  readonly data: PingSource & {
    readonly lead_id: number;
    /** The buyer the lead was sold to at its bid, or null when no bid could take it (routed as a plain post). */
    readonly buyer: string | null;
    readonly amount: number | null;
    readonly posted_at: string;
  };
}

/**
 * A PingPosted taken back: its lead's append failed, so the lead was never recorded and the ping is
 * the supplier's to post again at once (a retry of the same post sells at the same bid).
 */
interface PingPostReleased {
  readonly type: 'PingPostReleased';
  readonly data: PingSource & {
    readonly lead_id: number;
    /** The buyer and bid of the post taken back, so that reports take its count back too. */
    readonly buyer: string | null;
    readonly amount: number | null;
    readonly released_at: string;
  };
}

export type PingEvent = LeadPinged | PingBidsCollected | PingPosted | PingPostReleased;

/**
 * In the lead's own stream: the lead was posted with a ping, and sold at one of its bids (or at
 * none: `buyer` null). The lead view and its events route find the ping through it.
 */
export interface LeadPingMatched {
  readonly type: 'LeadPingMatched';
  readonly data: { readonly lead_id: number; readonly ping_id: string; readonly buyer: string | null; readonly amount: number | null };
}

/** The stream that finds a supplier's earlier ping of the same fields (a hash of them: never the values). */
export interface PingIssued {
  readonly type: 'PingIssued';
  readonly data: { readonly ping_id: string; readonly expires_at: string };
}

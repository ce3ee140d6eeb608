// The defaults of the limits the HTTPS API enforces, where the configuration (which reads the
// variables that change them) and src/http (which applies them) both see them, and the OpenAPI
// document states them.

export interface RateLimitConfig {
  readonly ratePerSecond: number;
  readonly burst: number;
}

/** Lead posts per key (RATE_LIMIT_PER_SECOND, RATE_LIMIT_BURST). */
export const DEFAULT_RATE_LIMIT: RateLimitConfig = { ratePerSecond: 50, burst: 100 };
/**
 * Read-back requests per key (READ_RATE_LIMIT_PER_SECOND, READ_RATE_LIMIT_BURST). A report costs
 * the store far more than a post: a lower rate, in buckets apart, so reading never starves posting.
 */
export const DEFAULT_READ_RATE_LIMIT: RateLimitConfig = { ratePerSecond: 20, burst: 40 };

/**
 * Pings per key (PING_RATE_LIMIT_PER_SECOND, PING_RATE_LIMIT_BURST), in buckets apart: a ping
 * records no lead but asks every bidding buyer, and a supplier pings more leads than it posts.
 */
export const DEFAULT_PING_RATE_LIMIT: RateLimitConfig = { ratePerSecond: 100, burst: 200 };

export interface Timeouts {
  /** All request headers must have arrived within this long (slowloris). */
  readonly headersMs: number;
  /** The whole request, body included, within this long (a slow or short body). */
  readonly requestMs: number;
}

/** HEADERS_TIMEOUT_MS, REQUEST_TIMEOUT_MS. */
export const DEFAULT_TIMEOUTS: Timeouts = { headersMs: 10_000, requestMs: 30_000 };

/**
 * The highest PING_DEADLINE_MS: a supplier waiting longer than a minute for a ping's answer has
 * given up on it. The routing file's bidder timeouts are held under it too.
 */
export const MAX_PING_DEADLINE_MS = 60_000;

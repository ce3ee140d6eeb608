// A token bucket per API key: `burst` requests at once, refilled at `ratePerSecond`. The map only
// ever holds authenticated key ids, so it is bounded by the number of issued keys.

import type { Middleware } from 'koa';
import type { RateLimitConfig } from '../limits.js';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

export interface TakeResult {
  readonly allowed: boolean;
  readonly limit: number;
  /** Whole tokens left after this request. */
  readonly remaining: number;
  /** Seconds until the bucket is full again (0 when it is full). */
  readonly resetSeconds: number;
  /** Seconds until one token is available; only meaningful when not allowed. */
  readonly retryAfterSeconds: number;
}

interface Bucket {
  tokens: number;
  at: number;
}

export class TokenBuckets {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly config: RateLimitConfig,
    private readonly now: () => number,
  ) {
    const { ratePerSecond, burst } = config;
    if (!(Number.isFinite(ratePerSecond) && ratePerSecond > 0)) throw new RangeError('rateLimit.ratePerSecond must be a positive number');
    if (!(Number.isFinite(burst) && burst >= 1)) throw new RangeError('rateLimit.burst must be at least 1');
  }

  take(key: string): TakeResult {
    const { ratePerSecond, burst } = this.config;
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: burst, at: now };
    // A clock that steps back (injected, or wall time adjusted) must not drain the bucket.
    const elapsedSeconds = Math.max(0, now - bucket.at) / 1000;
    bucket.tokens = Math.min(burst, bucket.tokens + elapsedSeconds * ratePerSecond);
    bucket.at = now;
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    return {
      allowed,
      limit: Math.floor(burst),
      remaining: Math.floor(bucket.tokens),
      resetSeconds: Math.ceil((burst - bucket.tokens) / ratePerSecond),
      retryAfterSeconds: Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerSecond)),
    };
  }
}

/** Runs after authentication: the bucket is the key's, never the caller's IP. */
export function rateLimit(buckets: TokenBuckets | null): Middleware<ShellState> {
  // Named: the docs tests find the routes it guards by it (they must document 429).
  return function rateLimited(ctx, next) {
    if (!buckets || !ctx.state.principal) return next();
    const result = buckets.take(ctx.state.principal.keyId);
    const headers: Record<string, string> = {
      'RateLimit-Limit': String(result.limit),
      'RateLimit-Remaining': String(result.remaining),
      'RateLimit-Reset': String(result.resetSeconds),
    };
    if (!result.allowed) throw new ShellError('RATE_LIMITED', { ...headers, 'Retry-After': String(result.retryAfterSeconds) });
    ctx.set(headers);
    return next();
  };
}

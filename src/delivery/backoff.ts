// When a failed webhook delivery is tried again. Doubling from 2 s keeps the first retry within
// 5 s (a buyer's blip costs the lead seconds, not minutes) while a buyer that is down for longer
// is not hammered; the jitter spreads the retries of a burst of leads sold in the same second.

const FIRST_MS = 2000;
export const MAX_BACKOFF_MS = 5 * 60 * 1000;
const JITTER = 0.2;

/** Milliseconds to wait after failed attempt `attempt` (1-based): 2 s × 2^(attempt-1) ±20%, at most 5 min. */
export function backoffMs(attempt: number, random: () => number = Math.random): number {
  const base = FIRST_MS * 2 ** Math.max(0, attempt - 1);
  const jittered = base * (1 - JITTER + 2 * JITTER * random());
  // Capped after the jitter, so 5 min is a promise to the operator, not an average.
  return Math.round(Math.min(jittered, MAX_BACKOFF_MS));
}

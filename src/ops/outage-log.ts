import type { Logger } from 'pino';

// A store that is down fails every request that needs it: logged once each, a locked keys.db
// under load wrote thousands of identical warnings a minute, burying the lines an on-call engineer
// looks for. An outage is logged instead in a few lines: its first failure at once, in full (the
// error, the trace id); while failures go on, one line every REPORT_MS counting those since the
// line before (with the latest error, should it have changed); and once QUIET_MS pass without one,
// a last line counting them all, from when to when. A lone failure is its first line only. The
// lines of one outage begin with the same words, so one search finds them all.

/** How often an outage that goes on is reported. */
export const REPORT_MS = 10_000;
/** How long without a failure ends an outage: shorter than REPORT_MS, so that a burst of failures at one moment is two lines. */
export const QUIET_MS = 5_000;

export interface OutageWords {
  /** The first failure's message, e.g. `store unavailable`. */
  readonly begins: string;
  /** The message of a line that counts the failures since the line before. */
  readonly goesOn: string;
  /** The message of the last line, which counts them all. */
  readonly ends: string;
  /** The name of the field that counts the failures, e.g. `answered_503`. */
  readonly counted: string;
}

interface Outage {
  readonly startedAt: Date;
  lastDate: Date;
  /** performance.now() of the latest failure, and of the latest line. */
  lastAt: number;
  lineAt: number;
  total: number;
  sinceLine: number;
  latest: unknown;
}

export class OutageLog {
  private outage: Outage | null = null;

  constructor(
    private readonly logger: Logger,
    private readonly words: OutageWords,
  ) {}

  /** One failure: logged when it begins an outage, else counted. `fields` go on the first line only. */
  failed(error: unknown, fields: Record<string, unknown> = {}): void {
    const at = performance.now();
    const outage = this.outage;
    if (outage) {
      Object.assign(outage, { lastAt: at, lastDate: new Date(), total: outage.total + 1, sinceLine: outage.sinceLine + 1, latest: error });
      return;
    }
    const now = new Date();
    this.outage = { startedAt: now, lastDate: now, lastAt: at, lineAt: at, total: 1, sinceLine: 0, latest: error };
    this.later(QUIET_MS);
    this.logger.warn({ ...fields, err: error }, this.words.begins);
  }

  private later(ms: number): void {
    // An outage being counted never keeps a stopping process alive.
    setTimeout(() => this.report(), Math.max(1, ms)).unref();
  }

  /** Due QUIET_MS after the latest failure (the outage may be over), or REPORT_MS after the latest line when failures came since. */
  private report(): void {
    const outage = this.outage;
    if (!outage) return;
    const now = performance.now();
    const span = { started_at: outage.startedAt.toISOString(), last_at: outage.lastDate.toISOString() };
    if (now - outage.lastAt >= QUIET_MS) {
      this.outage = null;
      if (outage.total > 1) this.logger.warn({ [this.words.counted]: outage.total, ...span }, this.words.ends);
      return;
    }
    if (outage.sinceLine > 0 && now - outage.lineAt >= REPORT_MS) {
      this.logger.warn({ [this.words.counted]: outage.sinceLine, ...span, err: outage.latest }, this.words.goesOn);
      outage.sinceLine = 0;
      outage.lineAt = now;
    }
    this.later(Math.min(outage.lastAt + QUIET_MS, outage.sinceLine > 0 ? outage.lineAt + REPORT_MS : Infinity) - now);
  }
}

/**
 * The outage log of something done over and over that fails while a store is down (a poll, a
 * read, a renewal): `what failed` for its first failure, then counts in `counted`, of `things`.
 */
export function repeatedFailures(logger: Logger, what: string, counted: string, things: { one: string; many: string }): OutageLog {
  return new OutageLog(logger, {
    begins: what,
    goesOn: `${what}: still failing (${counted}: the ${things.many} since the line before, not logged one by one)`,
    ends: `${what}: over, no ${things.one} failed for ${QUIET_MS / 1000} s (${counted}: the outage's total)`,
    counted,
  });
}

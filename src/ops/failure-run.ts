// Whether this instance's own uses of a store are all failing, for /readyz: its appends to the
// event store, and its reads and writes of the data keys. Reading the event store's head (the
// readiness probe's own check) can succeed while every append fails: a full or read-only disk
// still serves reads, and an EventStoreDB client can keep failing its appends on a connection that
// still reads. An instance in that state answers every post 503, so the load balancer should stop
// sending it posts. Nothing is written to find out: the posts' own appends are the evidence. The
// key store the same: its probe reads no key, and a damaged keys.db answers it while every use fails.
//
// It is a circuit breaker whose half-open state costs nothing: after `windowMs` with no failed
// append (as when the load balancer has taken the instance out, and no posts come), the run is
// forgotten and the instance reports ready again; the posts then sent are the trial. So an
// instance comes back by itself once the disk is freed or the server is back.

import type { AppendResultLabel } from './counting-event-store.js';

/** A run of failed appends long enough to make the instance unready. */
export interface FailingRun {
  /** Since the first failure of the run. */
  readonly seconds: number;
  readonly failures: number;
  /** The last failure, for its error code (never its text, which may hold a URL with a password). */
  readonly cause: unknown;
}

export class FailureRun {
  #since: number | null = null;
  #last = 0;
  #failures = 0;
  #cause: unknown = undefined;

  constructor(
    /** How long a run of failures with no success must last, and how long a quiet spell forgets it. */
    private readonly windowMs: number,
    private readonly now: () => number = Date.now,
    /** Fewer failures than this in the window is not a run: a lone post failing says little. */
    private readonly minFailures = 3,
  ) {}

  /** Every append's result: any answer from the store (a conflict too) ends a run. */
  readonly record = (result: AppendResultLabel, error?: unknown): void => {
    if (result === 'ok' || result === 'conflict') {
      if (this.#since !== null) this.#reset();
      return;
    }
    const at = this.now();
    if (this.#since === null || at - this.#last > this.windowMs) {
      this.#since = at;
      this.#failures = 0;
    }
    this.#failures++;
    this.#last = at;
    this.#cause = error;
  };

  /** The run of failures that makes the instance unready, or null when there is none. */
  failing(): FailingRun | null {
    if (this.#since === null) return null;
    const at = this.now();
    if (at - this.#last > this.windowMs) {
      this.#reset();
      return null;
    }
    if (at - this.#since < this.windowMs || this.#failures < this.minFailures) return null;
    return { seconds: Math.round((at - this.#since) / 100) / 10, failures: this.#failures, cause: this.#cause };
  }

  #reset(): void {
    this.#since = null;
    this.#failures = 0;
    this.#cause = undefined;
  }
}

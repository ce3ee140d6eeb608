// The EventStoreDB adapter's client, replaced by a new one when it looks stuck.
//
// The 6.2.1 client can fail every call of a kind for the rest of its life, and nothing short of a
// new client clears that (checked in its source, not assumed):
// - Its `capabilities` getter fetches the server's features once and keeps the promise; every
//   append awaits it to choose between a batch append and the older one. When that fetch fails,
//   its `handleError` resets the kept promise (with the channel) only for the errors it reconnects
//   on: UnavailableError, CancelledError (the server's, not the client's own) and NotLeaderError.
//   Any other failure (DEADLINE_EXCEEDED, INTERNAL or UNKNOWN from a proxy in between, a cluster
//   discovery that gave up) stays kept, rejected, and every later append fails with it.
// - A gRPC channel that stops answering without an UNAVAILABLE (every call past its deadline) is
//   never closed by the client either, for the same reason.
// So a run of failures of one kind of call, with no success of that kind in between, makes a new
// client. The old one is retired rather than disposed of at once: disposing cancels every call in
// flight on it, so the calls already sent keep it for up to 10 s, then it is disposed of and a call
// still unanswered fails. A run is counted per kind because reads do not look at the kept promise:
// reads that succeed say nothing about appends that cannot.
import type { EventStoreDBClient } from '@eventstore/db-client';

export type CallKind = 'append' | 'read';

/**
 * Failures in a run before the client is replaced. Several, so that a few unlucky calls (a proxy
 * restarting) do not replace it; few, because readiness takes the instance out of the load balancer
 * after 3 failed appends (over 5 s by default), and only the posts sent when it comes back in, or
 * the deliveries it appends, fail next.
 */
const RENEW_AFTER_FAILURES = 5;
/**
 * How long a run must have lasted too, so that a burst of posts failing together in one bad second
 * is not taken for a stuck client. The client's own deadline for a call is 10 s.
 */
const RENEW_AFTER_MS = 10_000;
/** A new client that fails the same way (the server itself is at fault) is not replaced more often than this. */
const RENEW_AT_MOST_EVERY_MS = 60_000;
/** How long a replaced client is kept for the calls already sent on it; close waits as long for appends. */
export const RETIRED_CLIENT_WAIT_MS = 10_000;

/** One client and the calls running on it. */
export class ClientInUse {
  readonly #running: Record<CallKind, number> = { append: 0, read: 0 };
  /** Each running call's kind and what fails it, for a call the client leaves unanswered after its disposal. */
  readonly #unanswered = new Map<(error: unknown) => void, CallKind>();
  #idle: (() => void) | undefined;
  #idleWithReads = false;
  /** Its disposal began: a read still running was cut short (the client ends it as if complete). */
  disposing = false;

  constructor(readonly client: EventStoreDBClient) {}

  /** Runs `call` on this client; a call still running after the disposal fails with `abandon`'s error. */
  async run<T>(kind: CallKind, call: (inUse: ClientInUse) => Promise<T>): Promise<T> {
    this.#running[kind]++;
    let abandon: (error: unknown) => void = () => {};
    const abandoned = new Promise<never>((_resolve, reject) => (abandon = reject));
    this.#unanswered.set(abandon, kind);
    try {
      return await Promise.race([call(this), abandoned]);
    } finally {
      this.#unanswered.delete(abandon);
      this.#running[kind]--;
      if (this.#idle && this.#running.append === 0 && (!this.#idleWithReads || this.#running.read === 0)) this.#idle();
    }
  }

  /** Waits for the appends (and reads, with `reads`) running to settle, for `waitMs` at most, then disposes of the client. */
  async dispose(waitMs: number, reads: boolean, unanswered: (kind: CallKind) => unknown): Promise<void> {
    if (this.#running.append > 0 || (reads && this.#running.read > 0)) {
      let timer: NodeJS.Timeout | undefined;
      await new Promise<void>((resolve) => {
        this.#idle = resolve;
        this.#idleWithReads = reads;
        timer = setTimeout(resolve, waitMs);
      });
      clearTimeout(timer);
      this.#idle = undefined;
    }
    this.disposing = true;
    await this.client.dispose();
    for (const [abandon, kind] of this.#unanswered) abandon(unanswered(kind));
  }
}

/** What the run of failures that replaced a client was. */
export interface Renewal {
  readonly kind: CallKind;
  readonly failures: number;
  readonly seconds: number;
  /** The run's last error. */
  readonly cause: unknown;
}

export interface RenewalHooks {
  /** Whether a call's error may come from a stuck client: not a revision conflict, not one the client recovers from itself. */
  readonly counts: (error: unknown) => boolean;
  /** The client was replaced: subscriptions move to the new one. */
  readonly renewed: (renewal: Renewal) => void;
  /** The error of a call a replaced client left unanswered. */
  readonly unanswered: (kind: CallKind) => unknown;
}

interface FailureRun {
  failures: number;
  since: number;
}

/** The adapter's current client, made by `factory` again when stuck; a client given as is is never replaced. */
export class RenewableClient {
  readonly #factory: (() => EventStoreDBClient) | undefined;
  readonly #hooks: RenewalHooks;
  #current: ClientInUse;
  readonly #runs: Record<CallKind, FailureRun | undefined> = { append: undefined, read: undefined };
  #renewedAt = -Infinity;
  readonly #retiring = new Set<Promise<void>>();
  #closed = false;

  constructor(source: EventStoreDBClient | (() => EventStoreDBClient), hooks: RenewalHooks) {
    this.#factory = typeof source === 'function' ? source : undefined;
    this.#current = new ClientInUse(typeof source === 'function' ? source() : source);
    this.#hooks = hooks;
  }

  /** The client new calls and subscriptions go to. */
  get client(): EventStoreDBClient {
    return this.#current.client;
  }

  /** Runs `call` on the current client and counts how it ends, unless the client was replaced or closed meanwhile. */
  async run<T>(kind: CallKind, call: (inUse: ClientInUse) => Promise<T>): Promise<T> {
    const inUse = this.#current;
    let result: T;
    try {
      result = await inUse.run(kind, call);
    } catch (error) {
      if (inUse === this.#current && !inUse.disposing && this.#hooks.counts(error)) this.#failed(kind, error);
      throw error;
    }
    if (inUse === this.#current) this.#runs[kind] = undefined;
    return result;
  }

  /** Retires the current client as close does: its appends may finish for `waitMs`, its reads are cut short. Waits for every retired client too. */
  async close(waitMs: number, unanswered: (kind: CallKind) => unknown): Promise<void> {
    this.#closed = true;
    await Promise.all([this.#current.dispose(waitMs, false, unanswered), ...this.#retiring]);
  }

  /** A quiet spell does not end a run, only a success does: an unready instance gets few posts to fail. */
  #failed(kind: CallKind, cause: unknown): void {
    const now = Date.now();
    const run = (this.#runs[kind] ??= { failures: 0, since: now });
    run.failures++;
    if (!this.#factory || this.#closed || run.failures < RENEW_AFTER_FAILURES || now - run.since < RENEW_AFTER_MS) return;
    if (now - this.#renewedAt < RENEW_AT_MOST_EVERY_MS) return;
    this.#renewedAt = now;
    let client: EventStoreDBClient;
    try {
      client = this.#factory();
    } catch {
      // It made the first client from the same settings; should it fail now, the old client stays, and is tried again later.
      return;
    }
    const old = this.#current;
    this.#current = new ClientInUse(client);
    this.#runs.append = this.#runs.read = undefined;
    this.#hooks.renewed({ kind, failures: run.failures, seconds: Math.round((now - run.since) / 100) / 10, cause });
    const retiring = old.dispose(RETIRED_CLIENT_WAIT_MS, true, this.#hooks.unanswered).catch(() => {});
    this.#retiring.add(retiring);
    void retiring.then(() => this.#retiring.delete(retiring));
  }
}

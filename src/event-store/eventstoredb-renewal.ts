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
// - It gives reads, subscriptions and the batch-append stream no deadline at all (Infinity, which
//   a caller's own `deadline` does not override), and the server-features fetch none either: a
//   server, or a proxy, that takes a call and never answers leaves it pending for good. So each
//   request the adapter makes of the client is held to a deadline of its own (`ask`), and one
//   that runs past it fails, and counts, as any other failure.
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
 * How long a request of the client may go unanswered before the adapter gives up on it: the 10 s
 * the client gives its unary calls by default (`defaultDeadline`), which it sets aside for reads
 * and batch appends.
 */
export const CALL_DEADLINE_MS = 10_000;
/**
 * How long a run must have lasted too, so that a burst of posts failing together in one bad second
 * is not taken for a stuck client. A request's deadline is as long.
 */
const RENEW_AFTER_MS = 10_000;
/** A new client that fails the same way (the server itself is at fault) is not replaced more often than this. */
const RENEW_AT_MOST_EVERY_MS = 60_000;
/** How long a replaced client is kept for the calls already sent on it; close waits as long for appends. */
export const RETIRED_CLIENT_WAIT_MS = 10_000;

/**
 * A request of the client, held to the call's deadline: its outcome when it has one in time, else
 * the call's `expired` error, once `cancel` (when given) has ended the request in the client. A
 * late answer then settles nothing.
 */
export type Ask = <R>(request: Promise<R>, cancel?: () => void) => Promise<R>;

/** How long each request of a call may take, and what one past it fails with. */
interface Deadline {
  readonly ms: number;
  readonly expired: (kind: CallKind) => unknown;
}

/** The request is given up on whatever its cancellation does. */
function cancelQuietly(cancel: (() => void) | undefined): void {
  try {
    cancel?.();
  } catch {
    // Given up on all the same.
  }
}

/** `request`, failed with `expired()` once it has run `ms` without an answer; the timer goes when it settles or `ended` aborts. */
function answerWithin<R>(request: Promise<R>, ms: number, expired: () => unknown, ended: AbortSignal, cancel: (() => void) | undefined): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    if (ended.aborted) {
      // Asked by a call that already ended (a read its disposed client ended as if complete, going
      // on to its next page): nothing waits for the answer, and no timer may outlive the call.
      request.catch(() => {});
      reject(expired());
      cancelQuietly(cancel);
      return;
    }
    const settle = () => {
      clearTimeout(timer);
      ended.removeEventListener('abort', settle);
    };
    const timer = setTimeout(() => {
      settle();
      reject(expired());
      cancelQuietly(cancel);
    }, ms);
    // The call ended without this request's answer (its client was disposed of): nothing waits for it any more.
    ended.addEventListener('abort', settle);
    request.then(
      (value) => {
        settle();
        resolve(value);
      },
      (error: unknown) => {
        settle();
        reject(error);
      },
    );
  });
}

/** One client and the calls running on it. */
export class ClientInUse {
  readonly #running: Record<CallKind, number> = { append: 0, read: 0 };
  /** Each running call's kind and what fails it, for a call the client leaves unanswered after its disposal. */
  readonly #unanswered = new Map<(error: unknown) => void, CallKind>();
  #idle: (() => void) | undefined;
  #idleWithReads = false;
  /** Its disposal began: a read still running was cut short (the client ends it as if complete). */
  disposing = false;

  readonly #deadline: Deadline;

  constructor(
    readonly client: EventStoreDBClient,
    deadline: Deadline,
  ) {
    this.#deadline = deadline;
  }

  /**
   * Runs `call` on this client, each of its requests held to the deadline through `ask`; a call
   * still running after the disposal fails with `abandon`'s error, and its deadlines go with it.
   */
  async run<T>(kind: CallKind, call: (inUse: ClientInUse, ask: Ask) => Promise<T>): Promise<T> {
    this.#running[kind]++;
    const ended = new AbortController();
    const { ms, expired } = this.#deadline;
    const ask: Ask = (request, cancel) => answerWithin(request, ms, () => expired(kind), ended.signal, cancel);
    let abandon: (error: unknown) => void = () => {};
    const abandoned = new Promise<never>((_resolve, reject) => {
      abandon = (error) => {
        ended.abort();
        reject(error);
      };
    });
    this.#unanswered.set(abandon, kind);
    try {
      return await Promise.race([call(this, ask), abandoned]);
    } finally {
      ended.abort();
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
  /** The error of a request of the client that had no answer within the deadline; it counts as `counts` says. */
  readonly expired: (kind: CallKind) => unknown;
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

  readonly #deadline: Deadline;

  /** Each request of the client gets `deadlineMs` for its answer. */
  constructor(source: EventStoreDBClient | (() => EventStoreDBClient), hooks: RenewalHooks, deadlineMs: number) {
    this.#factory = typeof source === 'function' ? source : undefined;
    this.#hooks = hooks;
    this.#deadline = { ms: deadlineMs, expired: hooks.expired };
    this.#current = new ClientInUse(typeof source === 'function' ? source() : source, this.#deadline);
  }

  /** The client new calls and subscriptions go to. */
  get client(): EventStoreDBClient {
    return this.#current.client;
  }

  /** Runs `call` on the current client and counts how it ends, unless the client was replaced or closed meanwhile. */
  async run<T>(kind: CallKind, call: (inUse: ClientInUse, ask: Ask) => Promise<T>): Promise<T> {
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
    this.#current = new ClientInUse(client, this.#deadline);
    this.#runs.append = this.#runs.read = undefined;
    this.#hooks.renewed({ kind, failures: run.failures, seconds: Math.round((now - run.since) / 100) / 10, cause });
    const retiring = old.dispose(RETIRED_CLIENT_WAIT_MS, true, this.#hooks.unanswered).catch(() => {});
    this.#retiring.add(retiring);
    void retiring.then(() => this.#retiring.delete(retiring));
  }
}

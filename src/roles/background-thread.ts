import { Worker } from 'node:worker_threads';
import type { Logger } from 'pino';
import type { ServiceConfig } from '../config.js';
import type { BuyerRequestKind } from '../delivery/buyer-agent.js';
import type { AppendResultLabel } from '../ops/counting-event-store.js';
import type { LoadedRoutingConfig } from '../routing/load-config.js';
import { type LeaseStatus, leaseHolderId } from './lease-keeper.js';

// An API process's projector, delivery worker and retention sweep, on a thread of their own. On
// two cores the API and the projections then each have one, as an `api` process and a
// `projector,delivery` process beside it do (BENCH.md: about 30% more posts a second than one
// thread doing both), in one process to deploy. The thread opens the stores itself, exactly as a
// separate process would: the leases, fences and checkpoints that let processes share a data dir
// are what keep the two threads apart. What the operator sees of it comes back in messages: its
// log lines (written by this process's logger), its leases (for /readyz and /metrics) and what it
// counted for /metrics.

/** What the thread is started with: plain data, copied into it. */
export interface BackgroundThreadData {
  readonly config: ServiceConfig;
  /** Its name in the leases it holds: a new one at every start, so a restarted thread never renews what the dead one held. */
  readonly holder: string;
  readonly routing: LoadedRoutingConfig;
  readonly buyerCa?: string;
  /** The level of the process's logger: the thread logs what it would write. */
  readonly logLevel: string;
  /** Start delivery and retention at once (a restart), not when the process's listeners are up. */
  readonly deliverAtOnce: boolean;
}

export type FromBackground =
  | { readonly kind: 'started'; readonly leases: LeaseStatus[] }
  | { readonly kind: 'delivering' | 'drained'; readonly leases: LeaseStatus[] }
  | { readonly kind: 'failed'; readonly error: { readonly name: string; readonly message: string } }
  | { readonly kind: 'logs'; readonly lines: string[] }
  | {
      readonly kind: 'report';
      readonly leases: LeaseStatus[];
      /** [result, appends, events] since the last report. */
      readonly appends: Array<[AppendResultLabel, number, number]>;
      /** [outcome, attempts] since the last report. */
      readonly attempts: Array<[string, number]>;
      /** [kind, requests sent once more after a stale connection] since the last report. */
      readonly sentAgain: Array<[BuyerRequestKind, number]>;
    };

/**
 * deliver: start delivery and retention; drain: stop them (shutdown, while requests finish); stop:
 * stop all, close the stores, exit; routing: the routing file reloaded (its buyers' endpoints,
 * secrets and attempts from now on).
 */
export type ToBackground = { readonly kind: 'deliver' | 'drain' | 'stop' } | { readonly kind: 'routing'; readonly routing: LoadedRoutingConfig };

export interface BackgroundThreadOptions {
  readonly data: Omit<BackgroundThreadData, 'holder' | 'logLevel' | 'deliverAtOnce'>;
  readonly logger: Logger;
  readonly countAppends: (result: AppendResultLabel, events: number, appends: number) => void;
  readonly countDeliveries: (outcome: string, attempts: number) => void;
  readonly countSentAgain: (kind: BuyerRequestKind, requests: number) => void;
  /** How long a stop waits for the thread to finish its work and close its stores; then it is cut off. */
  readonly stopTimeoutMs?: number;
}

/**
 * The young generation of the thread's heap: V8's default (16 MB semi-spaces) kept some 25 MB more
 * of the process resident under load for no CPU it saved (BENCH.md). The old generation is the
 * process's (`npm start` caps it at 128 MB).
 */
const THREAD_HEAP = { maxYoungGenerationSizeMb: 8 } as const;

/** A thread that died is started again after 1 s, then 2, 4 … up to this. */
const MAX_RESTART_DELAY_MS = 30_000;
/** A thread that ran this long without dying starts the delays over. */
const STABLE_MS = 60_000;

class BackgroundThreadError extends Error {
  override readonly name = 'BackgroundThreadError';
}

export class BackgroundThread {
  /** The thread from the moment it is made until it exits, started or not. */
  private current: Worker | null = null;
  /** The thread once it has said it started. */
  private worker: Worker | null = null;
  /** The leases as the thread last told them (its 'started' message tells them before start() resolves). */
  private seen: LeaseStatus[] = [];
  private stopping: Promise<void> | null = null;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartDelayMs = 1000;
  private startedAt = 0;
  private exited: Promise<void> = Promise.resolve();
  /** Delivery and retention run (or should, in a thread started again). */
  private delivering = false;
  /** Waiting for the current thread to say it started delivery, or drained it. */
  private answer: { kind: 'delivering' | 'drained'; resolve(): void } | null = null;
  private restarted = 0;
  private name = '';
  /** The routing in force: a thread started again gets the one reloaded last, not the one at start. */
  private routing: LoadedRoutingConfig;

  private constructor(private readonly options: BackgroundThreadOptions) {
    this.routing = options.data.routing;
  }

  /** How many times the thread has been started again after it died. */
  get restarts(): number {
    return this.restarted;
  }

  /** The thread's name in the leases, as of its last start. */
  get holder(): string {
    return this.name;
  }

  /**
   * Resolves once the thread has opened its stores and kept the projection leases once; rejects
   * with why it could not. Delivery and retention wait for `deliver()`.
   */
  static async start(options: BackgroundThreadOptions): Promise<BackgroundThread> {
    const thread = new BackgroundThread(options);
    await thread.spawn();
    return thread;
  }

  /** The thread's leases as it last told them; none held while it is down. */
  leases(): LeaseStatus[] {
    return this.worker ? this.seen : this.seen.map((status) => ({ ...status, held: false }));
  }

  /** Whether the thread runs now (false between a death and its restart). */
  get running(): boolean {
    return this.worker !== null;
  }

  /** Whether a thread exists: starting, running or stopping (false once stopped, or while waiting to start again). */
  get alive(): boolean {
    return this.current !== null;
  }

  /** Starts delivery and retention (after the process's listeners are up), here and in any restart. */
  deliver(): Promise<void> {
    this.delivering = true;
    return this.ask('deliver', 'delivering');
  }

  /** Hands the thread a reloaded routing file; a thread still starting takes it once it has. */
  setRouting(routing: LoadedRoutingConfig): void {
    this.routing = routing;
    this.current?.postMessage({ kind: 'routing', routing } satisfies ToBackground);
  }

  /** Stops delivery and retention, with their attempts in flight (shutdown, while requests finish); the projector goes on. */
  drain(): Promise<void> {
    this.delivering = false;
    return this.ask('drain', 'drained');
  }

  /** Asks the thread to stop its work and close its stores; cuts it off if it has not within the limit. */
  stop(): Promise<void> {
    this.stopping ??= this.stopNow();
    return this.stopping;
  }

  /** Kills the thread as a crash would (for tests of the restart). */
  async crashForTest(): Promise<void> {
    await this.worker?.terminate();
  }

  private async stopNow(): Promise<void> {
    clearTimeout(this.restartTimer);
    // A thread still starting (a restart) is stopped too: it acts on the message once it has.
    const worker = this.current;
    if (!worker) return;
    worker.postMessage({ kind: 'stop' } satisfies ToBackground);
    // Delivery was drained while requests finished: what is left (the projector's last commit,
    // closing the stores) takes milliseconds, and a commit cut off is made again from the checkpoint.
    const limitMs = this.options.stopTimeoutMs ?? 2_500;
    const limit = setTimeout(() => {
      this.options.logger.error({ timeout_ms: limitMs }, 'the background thread did not stop in time; cutting it off');
      void worker.terminate();
    }, limitMs);
    await this.exited;
    clearTimeout(limit);
  }

  /** Sends `kind` and resolves on the thread's answer, or when it exits (nothing then runs). */
  private ask(kind: 'deliver' | 'drain', answer: 'delivering' | 'drained'): Promise<void> {
    const worker = this.current;
    if (!worker || this.stopping) return Promise.resolve();
    return new Promise<void>((resolve) => {
      this.answer?.resolve();
      this.answer = { kind: answer, resolve };
      worker.postMessage({ kind } satisfies ToBackground);
    });
  }

  private spawn(): Promise<void> {
    const { logger } = this.options;
    this.name = leaseHolderId();
    const workerData: BackgroundThreadData = { ...this.options.data, routing: this.routing, holder: this.name, logLevel: logger.level, deliverAtOnce: this.delivering };
    const worker = new Worker(new URL('./background-thread-main.js', import.meta.url), { workerData, resourceLimits: THREAD_HEAP });
    this.current = worker;
    // Its lines were redacted and their errors serialised by the thread's own logger.
    const relay = logger.child({ thread: 'background' }, { serializers: { err: (err: unknown) => err } });
    let settle: { resolve: () => void; reject: (error: Error) => void } | null = null;
    const started = new Promise<void>((resolve, reject) => (settle = { resolve, reject }));
    let failure: Error | null = null;
    worker.on('message', (message: FromBackground) => {
      switch (message.kind) {
        case 'logs':
          for (const line of message.lines) relayLogLine(relay, line);
          return;
        case 'report':
          this.seen = message.leases;
          for (const [result, appends, events] of message.appends) this.options.countAppends(result, events, appends);
          for (const [outcome, attempts] of message.attempts) this.options.countDeliveries(outcome, attempts);
          for (const [kind, requests] of message.sentAgain) this.options.countSentAgain(kind, requests);
          return;
        case 'delivering':
        case 'drained':
          this.seen = message.leases;
          if (this.answer?.kind === message.kind) {
            this.answer.resolve();
            this.answer = null;
          }
          return;
        case 'started':
          this.seen = message.leases;
          this.worker = worker;
          this.startedAt = Date.now();
          settle?.resolve();
          settle = null;
          return;
        case 'failed':
          failure = Object.assign(new BackgroundThreadError(message.error.message), { name: message.error.name });
          return;
      }
    });
    // An uncaught error ends the thread; 'exit' follows and says what happens next.
    worker.on('error', (error) => {
      failure ??= error;
      logger.error({ err: error }, 'the background thread failed');
    });
    this.exited = new Promise<void>((resolve) =>
      worker.once('exit', (code) => {
        resolve();
        this.current = null;
        this.worker = null;
        this.answer?.resolve();
        this.answer = null;
        if (settle) {
          settle.reject(failure ?? new BackgroundThreadError(`the background thread exited with code ${code} before it started`));
          settle = null;
          return;
        }
        if (this.stopping) return;
        this.scheduleRestart(code, Date.now() - this.startedAt);
      }),
    );
    return started;
  }

  private scheduleRestart(code: number, ranMs: number): void {
    if (ranMs > STABLE_MS) this.restartDelayMs = 1000;
    const delayMs = this.restartDelayMs;
    this.restartDelayMs = Math.min(MAX_RESTART_DELAY_MS, delayMs * 2);
    // Its leases run out and a standby (or this thread, started again) takes them over.
    this.options.logger.error({ exit_code: code, restart_in_ms: delayMs }, 'the background thread stopped unexpectedly; starting it again');
    this.restartTimer = setTimeout(() => {
      if (this.stopping) return;
      this.restarted++;
      this.spawn().catch((error: unknown) => {
        this.options.logger.error({ err: error }, 'the background thread could not start again');
        if (!this.stopping) this.scheduleRestart(1, 0);
      });
    }, delayMs);
    this.restartTimer.unref();
  }
}

/** One of the thread's JSON log lines, written by this process's logger at its level. */
function relayLogLine(logger: Logger, line: string): void {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(line) as Record<string, unknown>;
  } catch {
    return;
  }
  const { level, time: _time, pid: _pid, hostname: _hostname, service: _service, msg, ...fields } = entry;
  const label = typeof level === 'number' ? logger.levels.labels[level] : undefined;
  const write = label && label in logger ? (logger[label as 'info'] as Logger['info']) : logger.info;
  write.call(logger, fields, typeof msg === 'string' ? msg : '');
}

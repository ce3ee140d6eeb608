import type { Logger } from 'pino';
import { type EventStore, type Position, type RecordedEvent, START, comparePositions } from '../event-store/port.js';
import { type LeadReceived, leadStream } from '../events/lead-events.js';
import { type Fence, LeaseLostError, type ReadModelStore, type ReadWrite } from '../read-models/port.js';
import { TwoGenerationCache } from '../two-generation-cache.js';
import type { MaybePromise, Projection, ProjectionContext } from './projections.js';

export interface RunnerOptions {
  /** Events per commit at most. */
  readonly batchSize?: number;
  /** How long a partial batch waits for more events before it is committed. */
  readonly flushMs?: number;
  readonly logger?: Logger;
  /**
   * A rebuild into new collections: create them without their indexes, and let `createIndexes`
   * add those once the rebuild has caught up. Building an index over a full table is much cheaper
   * than keeping it up to date through every write of the rebuild.
   */
  readonly deferIndexes?: boolean;
  /** Called after each commit with the position reached and the events handled so far. */
  readonly onProgress?: (position: Position, events: number) => void;
  /**
   * The lease this runner's commits are fenced by: once another process has taken it (or it ran
   * out), a commit fails and changes nothing, and the runner stops for good and says so here.
   */
  readonly fence?: Fence;
  readonly onLeaseLost?: (error: LeaseLostError) => void;
  /**
   * The LeadReceived of recent leads, shared with other runners fed the same events (a rebuild):
   * one memory instead of one each, and a lead read back from its stream is read once for all.
   * Whoever feeds them remembers each LeadReceived in it before handing it over, once for all.
   */
  readonly receivedLeads?: ReceivedLeads;
}

/** The LeadReceived of recent leads, by lead id. */
export type ReceivedLeads = TwoGenerationCache<number, LeadReceived['data']>;

/** Leads a rebuild's runner remembers (between this and twice as many): a lead's later events usually come soon after. */
export const REMEMBERED_LEADS = 5_000;
/**
 * Leads a live runner remembers: a second or two of posts at full load, which covers a sale's
 * delivery; what comes later (feedback, returns) is read from the lead's stream either way. Each
 * of the four runners keeps its own, so 5,000 kept some 5–10 MB more of a serving process resident
 * for no CPU it saved (BENCH.md).
 */
const LIVE_REMEMBERED_LEADS = 1_000;

export interface ProjectionStatus {
  readonly projection: string;
  readonly build: string;
  readonly position: Position;
  readonly caughtUp: boolean;
  /**
   * Events not yet projected: counted exactly up to LAG_SAMPLE, estimated from `$all` positions
   * beyond that (see estimateEventsBehind).
   */
  readonly eventsBehind: number;
  /** Seconds between the newest event in the store and the last one this projection committed. */
  readonly lagSeconds: number;
}

const MAX_BACKOFF_MS = 5000;
/**
 * Events a status reads after the checkpoint: the oldest gives the lag in seconds, and a backlog
 * this small is counted exactly. A probe or a scrape reads no more than this per projection, however
 * far behind it is.
 */
export const LAG_SAMPLE = 100;

/** Physical collection names of a projection build: `leads_v1`, `leads_v1_r1732233000`. */
export const collectionName = (base: string, build: string): string => `${base}_${build}`;
export const checkpointName = (projection: Projection, build: string): string => `${projection.name}:${build}`;

/**
 * How many events lie after a checkpoint up to `head`, from the first of them (`sample`, at most
 * LAG_SAMPLE read from the checkpoint): exact when the sample holds them all; otherwise the sample
 * plus the rest of the way to the head at the rate the sample advanced through commit positions.
 * Positions grow by a store's own unit (a commit number in the embedded store, a byte offset in
 * EventStoreDB) and by uneven steps, so beyond the sample this is an estimate; when the whole
 * sample sits in one commit there is no rate, and it says only that more are behind.
 */
export function estimateEventsBehind(sample: readonly RecordedEvent[], head: Position): number {
  const first = sample[0];
  const last = sample.at(-1);
  if (!first || !last || sample.length < LAG_SAMPLE || comparePositions(last.position, head) >= 0) return sample.length;
  const span = last.position.commit - first.position.commit;
  const rest = head.commit - last.position.commit;
  if (span <= 0 || rest <= 0) return sample.length + 1;
  return sample.length + Math.max(1, Math.round((rest * (sample.length - 1)) / span));
}

/**
 * How far a build of a projection that has reached `position` is behind `head`: the runner's own
 * status, or that of a projection another process runs, from its stored checkpoint.
 */
export async function projectionStatus(events: EventStore, projection: Projection, build: string, position: Position, head: Position): Promise<ProjectionStatus> {
  const caughtUp = comparePositions(position, head) >= 0;
  let lagSeconds = 0;
  let eventsBehind = 0;
  if (!caughtUp) {
    // As stored: the first of them may be the event that stopped the projection, which cannot be
    // decoded, and whose wait is the very lag to show.
    const sample = await events.readAll({ fromPosition: position, maxCount: LAG_SAMPLE, asStored: true });
    eventsBehind = estimateEventsBehind(sample, head);
    // How long the oldest event not yet projected has been waiting.
    lagSeconds = sample[0] ? Math.max(0, (Date.now() - sample[0].created) / 1000) : 0;
  }
  return { projection: projection.name, build, position, caughtUp, eventsBehind, lagSeconds };
}

/**
 * Runs one projection: subscribes to `$all` after its checkpoint, handles events in order, and
 * commits their writes with the new checkpoint in batches. After a dropped subscription or a
 * failed commit it resubscribes from the checkpoint with backoff, so nothing is skipped, and the
 * position guard on every write means nothing is counted twice.
 */
export class ProjectionRunner {
  private stopped = false;
  private subscription: { unsubscribe(): Promise<void> } | undefined;
  private running: Promise<void> | undefined;
  private committed: Position = START;
  private pending: ReadWrite[] = [];
  private pendingPosition: Position | null = null;
  private pendingCount = 0;
  private handled = 0;
  private flushTimer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  /** With a store that pipelines commits: the last commit made, which the next one waits for. */
  private lastCommit: Promise<void> = Promise.resolve();
  /** The LeadReceived of recent leads: a lead's later events usually arrive in the same batch. */
  private readonly receivedLeads: ReceivedLeads;
  private readonly waiters: Array<{ position: Position; resolve(): void }> = [];
  private readonly context: ProjectionContext;

  constructor(
    private readonly events: EventStore,
    private readonly readModels: ReadModelStore,
    readonly projection: Projection,
    readonly build: string,
    private readonly options: RunnerOptions = {},
  ) {
    this.receivedLeads = options.receivedLeads ?? new TwoGenerationCache(LIVE_REMEMBERED_LEADS);
    // A projection names its collections at every event: each name is made once.
    const names = new Map<string, string>();
    this.context = {
      collection: (base) => {
        let name = names.get(base);
        if (name === undefined) names.set(base, (name = collectionName(base, build)));
        return name;
      },
      received: (leadId) => this.received(leadId),
    };
  }

  async prepare(): Promise<Position> {
    for (const [base, indexes] of Object.entries(this.projection.indexes)) {
      await this.readModels.ensureIndexes(collectionName(base, this.build), this.options.deferIndexes ? [] : indexes);
    }
    this.advance((await this.readModels.checkpoint(checkpointName(this.projection, this.build))) ?? START);
    return this.committed;
  }

  /** Creates the indexes a `deferIndexes` runner left out (harmless when they exist). */
  async createIndexes(): Promise<void> {
    for (const [base, indexes] of Object.entries(this.projection.indexes)) {
      await this.readModels.ensureIndexes(collectionName(base, this.build), indexes);
    }
  }

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.subscription?.unsubscribe();
    await this.running;
    try {
      await this.flush();
      // A pipelined flush resolves once the commit before its own is done; this waits for the last.
      await this.flushing;
    } catch (error) {
      // Stopped because the lease went to another process: the batch is that process's to make.
      if (!(error instanceof LeaseLostError)) throw error;
    } finally {
      this.settleWaiters();
    }
  }

  /** A stopped runner commits nothing more: whoever waits on it is told, and looks elsewhere. */
  private settleWaiters(): void {
    for (const waiter of this.waiters.splice(0)) waiter.resolve();
  }

  /**
   * Hands the runner an event that someone else read, instead of its own subscription: a rebuild
   * reads `$all` once for several projections. Events must come in `$all` order; those at or
   * below the checkpoint are skipped. Resolves when the event is taken (a full batch committed).
   */
  feed(event: RecordedEvent): Promise<void> | undefined {
    return this.handle(event);
  }

  /**
   * Resolves once everything up to `position` is committed (tests, replay, read-your-writes), or
   * once the runner has stopped, which will commit nothing more: the caller then reads `position`.
   */
  waitFor(position: Position): Promise<void> {
    if (comparePositions(this.committed, position) >= 0 || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ position, resolve }));
  }

  get position(): Position {
    return this.committed;
  }

  /** Events this runner has handled since it started. */
  get handledEvents(): number {
    return this.handled;
  }

  /** `head`: the store's head when the caller has read it already (one read for every runner). */
  async status(head?: Position): Promise<ProjectionStatus> {
    return projectionStatus(this.events, this.projection, this.build, this.committed, head ?? (await this.events.headPosition()));
  }

  private async run(): Promise<void> {
    let backoff = 100;
    // Where the checkpoint stood at the last failure. The wait before resubscribing starts over
    // only once a commit has gone past it: an event that cannot be read fails every attempt after
    // the events before it were handled again, and must not be tried ten times a second for ever.
    let failedAt: Position | null = null;
    while (!this.stopped) {
      try {
        const from = await this.prepare();
        const subscription = this.events.subscribeToAll({ fromPosition: from });
        this.subscription = subscription;
        // stop() may have come while the checkpoint was being read, before there was anything to end.
        if (this.stopped) await subscription.unsubscribe();
        for await (const event of subscription) {
          const handling = this.handle(event);
          if (handling) await handling;
          if (failedAt !== null && comparePositions(this.committed, failedAt) > 0) {
            backoff = 100;
            failedAt = null;
          }
        }
        await this.flush();
      } catch (error) {
        // The batch not yet committed is dropped: the resubscription reads it again from the checkpoint.
        this.takePending();
        this.flushing = Promise.resolve();
        this.lastCommit = Promise.resolve();
        if (error instanceof LeaseLostError) {
          // Another process projects now: resubscribing would only fail again.
          this.stopped = true;
          this.settleWaiters();
          await this.subscription?.unsubscribe();
          this.options.logger?.warn({ projection: this.projection.name }, 'projection stopped: its lease went to another process');
          this.options.onLeaseLost?.(error);
          break;
        }
        this.options.logger?.warn({ err: error, projection: this.projection.name, retry_in_ms: backoff }, 'projection stopped; resubscribing');
        if (this.stopped) break;
        failedAt = this.committed;
        await new Promise((resolve) => setTimeout(resolve, backoff));
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    }
  }

  /** Synchronous unless the projection had to read, or a full batch is being committed. */
  private handle(event: RecordedEvent): Promise<void> | undefined {
    const from = this.pendingPosition ?? this.committed;
    if (comparePositions(event.position, from) <= 0) return undefined;
    if (event.type === 'LeadReceived' && !this.options.receivedLeads) this.remember(event.data as LeadReceived['data']);
    const writes = this.projection.handle(event, this.context);
    return writes instanceof Promise ? writes.then((w) => this.accept(event, w)) : this.accept(event, writes);
  }

  private accept(event: RecordedEvent, writes: readonly ReadWrite[]): Promise<void> | undefined {
    for (const write of writes) this.pending.push(write);
    this.pendingPosition = event.position;
    this.pendingCount += 1;
    this.handled += 1;
    if (this.pendingCount >= (this.options.batchSize ?? 500)) return this.flush();
    // A failed timed commit must reach run(): ending the subscription makes it resubscribe from the
    // checkpoint. `flushing` holds the commit just made (a pipelined flush resolves with the one
    // before it), so its failure is seen even when no later event comes to make another.
    this.flushTimer ??= setTimeout(() => {
      this.flush().catch(() => {});
      this.flushing.catch(() => this.subscription?.unsubscribe().catch(() => {}));
    }, this.options.flushMs ?? 20);
    return undefined;
  }

  private flush(): Promise<void> {
    const { position, writes } = this.takePending();
    if (!position) return this.flushing;
    if (this.readModels.pipelinedCommits) return this.pipeline(position, writes);
    this.flushing = this.flushing.then(async () => {
      await this.readModels.commit(checkpointName(this.projection, this.build), position, writes, this.options.fence);
      this.advance(position);
      this.options.onProgress?.(position, this.handled);
    });
    return this.flushing;
  }

  /**
   * Makes the commit at once, without waiting for the last one: the store applies them in order
   * and fails every commit after a failed one. Resolves when the commit before this one is done,
   * so that one batch is folded while the one before is written, and no more pile up.
   */
  private pipeline(position: Position, writes: ReadWrite[]): Promise<void> {
    const previous = this.lastCommit;
    const committing = this.readModels.commit(checkpointName(this.projection, this.build), position, writes, this.options.fence).then(() => {
      this.advance(position);
      this.options.onProgress?.(position, this.handled);
    });
    // Its failure reaches the caller through `flushing` or the next flush; it is not unhandled
    // meanwhile, and neither is the chain that waits for it (stop() awaits that one).
    committing.catch(() => {});
    this.lastCommit = committing;
    const flushing = this.flushing.then(() => committing);
    flushing.catch(() => {});
    this.flushing = flushing;
    return previous;
  }

  /** The batch gathered so far, leaving none (and no timer to commit it). */
  private takePending(): { position: Position | null; writes: ReadWrite[] } {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    const taken = { position: this.pendingPosition, writes: this.pending };
    this.pending = [];
    this.pendingPosition = null;
    this.pendingCount = 0;
    return taken;
  }

  private advance(position: Position): void {
    this.committed = position;
    for (const waiter of [...this.waiters]) {
      if (comparePositions(position, waiter.position) >= 0) {
        this.waiters.splice(this.waiters.indexOf(waiter), 1);
        waiter.resolve();
      }
    }
  }

  private remember(received: LeadReceived['data']): void {
    this.receivedLeads.set(received.lead_id, received);
  }

  private received(leadId: number): MaybePromise<LeadReceived['data'] | null> {
    const remembered = this.receivedLeads.get(leadId);
    if (remembered) return remembered;
    return this.events.readStream(leadStream(leadId), { maxCount: 1 }).then(([first]) => {
      if (first?.type !== 'LeadReceived') return null;
      // Remembered: the lead's next events (a return follows its feedback) need it too.
      const received = first.data as LeadReceived['data'];
      this.remember(received);
      return received;
    });
  }
}

import { randomBytes } from 'node:crypto';
import { type OutageLog, repeatedFailures } from '../ops/outage-log.js';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { Fence, Lease, ReadModelStore } from '../read-models/port.js';

// One lease of the read-model store kept by one process: it asks for the lease on a heartbeat,
// runs the work while it holds it, and stops the work the moment it cannot say it still does (a
// renewal failed or found another holder, or none came back within the lease's time). A standby
// asks on the same heartbeat and starts the work once the holder's time has run out; a holder that
// stops cleanly gives the lease up, so its standby takes over at the next beat.

/** How long a lease lasts without a renewal; a standby takes over at most this plus a beat after the holder died. */
const LEASE_TTL_MS = 3000;
/** How often the holder renews and a standby asks. */
const LEASE_HEARTBEAT_MS = 1000;

/** Why the work stopped when `giveUp` stopped it: logged as information, not as a warning. */
const GIVEN_UP = 'given up to balance the work over the instances';

/** Work only one process may do at a time. */
interface LeasedWork {
  /** Starts it; its writes are fenced by `fence`, and `lost` is called if one finds the lease gone. */
  start(fence: Fence, lost: () => void): Promise<void>;
  /** Stops it, waiting for what is in flight. */
  stop(): Promise<void>;
}

export interface LeaseStatus {
  readonly lease: string;
  /** Whether this process holds the lease and runs the work. */
  readonly held: boolean;
  /** Who holds it as this process last saw it (host:pid:nonce), null when nobody does (nor this process, once it no longer runs the work). */
  readonly holder: string | null;
}

export interface LeaseKeeperOptions {
  /** With `lease`, a beat that does not ask (see `wanted`) reads who holds it instead. */
  readonly leases: Pick<ReadModelStore, 'acquireLease' | 'releaseLease'> & Partial<Pick<ReadModelStore, 'lease'>>;
  readonly name: string;
  readonly holder: string;
  readonly work: LeasedWork;
  /** Consulted at each beat while the lease is not held here: false, it is not asked for (another process should take it). Omitted: always asked for. */
  readonly wanted?: () => boolean;
  readonly ttlMs?: number;
  readonly heartbeatMs?: number;
  readonly logger?: Logger;
}

/**
 * Every running instance, `--roles api` included, keeps a lease named so (its holder id after the
 * prefix): the steps that need every instance stopped (`seal-clear-leads`, `master-key rotate`)
 * find a running one by it, where the role leases show only the instance doing each role's work.
 */
export const INSTANCE_LEASE_PREFIX = 'instance-';

/** A holder id for this process: its host and pid (so an operator can find it) and a nonce (so two services in one process differ). */
export function leaseHolderId(): string {
  return `${hostname().replace(/[^\x21-\x7e]/g, '_').slice(0, 100)}:${process.pid}:${randomBytes(3).toString('hex')}`;
}

export class LeaseKeeper {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  /** Stops the work when the lease runs out before a renewal has come back. */
  private watchdog: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  /** The token the work runs under; undefined while it does not run. */
  private token: number | undefined;
  private seen: Lease | null = null;
  /** Starting and stopping the work, one at a time. */
  private transitions: Promise<void> = Promise.resolve();
  private everHeld = false;
  /** After the first beat: what it found is in the service's own start-up line, so it logs nothing. */
  private started = false;
  /** When the last beat asked: beats are a heartbeat apart from one asking to the next. */
  private lastAsked = 0;
  /** Set while `giveUp` stops the work and releases the lease: no beat asks for it meanwhile. */
  private givingUp = false;

  /** A store that is down fails every beat, one a second: logged as an outage, not beat by beat. */
  private readonly renewalFailures: OutageLog | undefined;

  constructor(private readonly options: LeaseKeeperOptions) {
    this.renewalFailures = options.logger && repeatedFailures(options.logger, `${options.name} lease renewal failed`, 'failed_renewals', { one: 'renewal', many: 'renewals' });
  }

  private get ttlMs(): number {
    return this.options.ttlMs ?? LEASE_TTL_MS;
  }

  /** Begins the heartbeat; resolves after the first beat, so a free lease is held and its work running. */
  async start(): Promise<void> {
    this.beating = this.beatSafely();
    await this.beating;
    this.started = true;
    this.schedule();
  }

  /** Stops the heartbeat and the work, and gives the lease up for a standby to take at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.beating;
    await this.lose('stopping');
    if (!this.everHeld) return;
    // Waited for no longer than the lease lasts (a store locked by another process, say): past
    // that, giving it up gains a standby nothing, and the shutdown has a budget of its own.
    let warned = false;
    const cannot = (error: unknown) => {
      if (!warned) this.options.logger?.warn({ err: error, lease: this.options.name }, 'could not give the lease up: a standby takes over when it runs out');
      warned = true;
    };
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(() => resolve(cannot(new Error(`no answer within ${this.ttlMs} ms`))), this.ttlMs);
    });
    await Promise.race([this.options.leases.releaseLease(this.options.name, this.options.holder).catch(cannot), late]);
    clearTimeout(timer);
  }

  /**
   * Stops the work and releases the lease, but keeps beating as a standby: another process takes
   * it at its next beat (one that holds fewer leases, see projector-leases.ts). Only a keeper with
   * `wanted` should give up, or its next beat takes the lease back.
   */
  async giveUp(): Promise<void> {
    if (this.stopped || this.givingUp || this.token === undefined) return;
    this.givingUp = true;
    try {
      // A renewal in flight would find the lease still held here and start the work again.
      await this.beating;
      await this.lose(GIVEN_UP);
      await this.options.leases.releaseLease(this.options.name, this.options.holder);
      this.seen = null;
    } finally {
      this.givingUp = false;
    }
  }

  status(): LeaseStatus {
    // The row this process renewed last, until it runs out, is no holder either: the work stopped
    // here (a renewal failed, or came too late) and no other process runs it yet.
    const current = this.seen && this.seen.expiresAt > Date.now() && this.seen.holder !== this.options.holder ? this.seen.holder : null;
    return { lease: this.options.name, held: this.token !== undefined, holder: this.token !== undefined ? this.options.holder : current };
  }

  private schedule(): void {
    if (this.stopped) return;
    const heartbeatMs = this.options.heartbeatMs ?? LEASE_HEARTBEAT_MS;
    // A heartbeat after the last beat asked, not after its answer came: a renewal that takes d to
    // answer then keeps the lease while d is under the lease's time less a beat (2 s), where
    // counting from the answer stopped the work at every other beat once d passed 1 s.
    const untilBeat = this.lastAsked + heartbeatMs - Date.now();
    // A standby asks again just after the holder's time runs out, if that comes before the next beat
    // (not for a row that had run out when read: a lease free but not wanted waits for the beat).
    const untilFree = this.token === undefined && this.seen && this.seen.expiresAt > this.lastAsked ? this.seen.expiresAt - Date.now() + 5 : untilBeat;
    this.timer = setTimeout(
      () => {
        this.beating = this.beatSafely().finally(() => this.schedule());
      },
      Math.max(50, Math.min(untilBeat, untilFree)),
    );
    this.timer.unref();
  }

  private beatSafely(): Promise<void> {
    // A failure to start or stop the work is logged by transition(); the heartbeat goes on.
    return this.beat().catch(() => {});
  }

  private async beat(): Promise<void> {
    if (this.givingUp) return;
    const asked = Date.now();
    this.lastAsked = asked;
    if (this.token === undefined && this.options.wanted && !this.options.wanted()) {
      // Not asked for: who holds it is read, so that the status still says.
      this.seen = (await this.options.leases.lease?.(this.options.name).catch(() => this.seen)) ?? null;
      return;
    }
    let lease: Lease;
    let timer: NodeJS.Timeout | undefined;
    try {
      // An answer later than the lease's time is no answer: the beat ends, and so may stop().
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${this.ttlMs} ms`)), this.ttlMs);
      });
      lease = await Promise.race([this.options.leases.acquireLease(this.options.name, this.options.holder, this.ttlMs), late]);
    } catch (error) {
      // Whether it is still held cannot be said: the work stops, and starts again once a beat can.
      this.renewalFailures?.failed(error, { lease: this.options.name });
      await this.lose('the renewal failed');
      return;
    } finally {
      clearTimeout(timer);
    }
    if (this.stopped && this.token === undefined) {
      // stop() came while asking: a lease just taken is given up by stop() itself.
      if (lease.holder === this.options.holder) this.everHeld = true;
      return;
    }
    this.seen = lease;
    if (lease.holder !== this.options.holder) {
      await this.lose(`held by ${lease.holder}`);
      return;
    }
    this.everHeld = true;
    // Counted from when it was asked: the lease cannot last longer than that from here.
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => void this.lose('not renewed in time'), Math.max(0, asked + this.ttlMs - Date.now()));
    this.watchdog.unref();
    if (this.token === lease.token) return;
    // Held under another token: it ran out and was taken again, and writes under the old one are refused.
    if (this.token !== undefined) await this.lose('taken again under a new token');
    if (this.stopped) return;
    await this.gain(lease.token);
  }

  private gain(token: number): Promise<void> {
    return this.transition(async () => {
      if (this.token !== undefined || this.stopped) return;
      this.token = token;
      const fence = { lease: this.options.name, holder: this.options.holder, token };
      if (this.started) this.options.logger?.info({ lease: this.options.name, holder: this.options.holder, token }, 'lease taken: this instance runs the work');
      await this.options.work.start(fence, () => void this.lose('a write found it held by another', token));
    });
  }

  /** Stops the work (only that of `token`, when given). */
  private lose(reason: string, token?: number): Promise<void> {
    return this.transition(async () => {
      if (this.token === undefined || (token !== undefined && token !== this.token)) return;
      clearTimeout(this.watchdog);
      this.token = undefined;
      this.options.logger?.[reason === 'stopping' || reason === GIVEN_UP ? 'info' : 'warn']({ lease: this.options.name, reason }, 'lease given up: this instance stops the work');
      await this.options.work.stop();
    });
  }

  private transition(change: () => Promise<void>): Promise<void> {
    const next = this.transitions.then(change);
    this.transitions = next.catch((error: unknown) => this.options.logger?.error({ err: error, lease: this.options.name }, 'starting or stopping the leased work failed'));
    return next;
  }
}

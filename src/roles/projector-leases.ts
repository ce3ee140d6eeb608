import type { Logger } from 'pino';
import { type OutageLog, repeatedFailures } from '../ops/outage-log.js';
import { PROJECTIONS, type Projection } from '../projections/projections.js';
import type { Fence, Lease, ReadModelStore } from '../read-models/port.js';
import { LeaseKeeper, type LeaseStatus } from './lease-keeper.js';

// The projections, spread over the processes with the projector role. Each projection has a lease
// of its own (`projector-leads-v4` …), kept by a LeaseKeeper in every such process: its holder runs
// that projection, fenced by it. Each process also keeps a membership lease
// (`projector-process-<holder>`), so that each can count the live ones (N) and what each holds.
// With P projections, a process asks for a free lease only while it holds fewer than ceil(P/N) and
// no member holds fewer than it does; one holding more than ceil(P/N), or ceil(P/N) while a member
// holds fewer than floor(P/N), gives one up per beat (the last it holds, in PROJECTIONS order;
// among members at ceil, only the one whose holder id sorts last). So 2 processes hold 2 + 2, 3
// hold 2 + 1 + 1, 5 hold 1 + 1 + 1 + 1 + 0, and one that dies hands over only its share.
//
// A lease names its projection's version (`projector-leads-v4`): it fences the commits to that
// version's build, and only that build. During a rolling upgrade that changes a projection's
// version, the old release's processes go on building and serving the old build while the new
// ones build theirs beside it, and each instance serves its own release's build. Releases before
// this one named their leases without a version (`projector-leads`, or a single `projector` for
// all four) and may run the same build as this one: a service refuses to start while one holds
// such a lease (older-release.ts), and should one start later, this process stands by for each
// projection whose older lease it holds (and gives the projection up), so that no build is
// written by two processes at once.

/** The lease of one version of a projection. */
export const projectionLease = (projection: Pick<Projection, 'name' | 'version'>): string => `${PROJECTOR_LEASE}-${projection.name}-v${projection.version}`;

/** The prefix of every projection lease, and the single lease the oldest releases ran every projection under. */
export const PROJECTOR_LEASE = 'projector';

/** The lease of this release's version of the projection named so. */
export const leaseOfProjection = (name: string): string | undefined => {
  const projection = PROJECTIONS.find((candidate) => candidate.name === name);
  return projection && projectionLease(projection);
};

/** The leases of every projection, in PROJECTIONS order. */
export const PROJECTION_LEASES: readonly string[] = PROJECTIONS.map(projectionLease);

/** The projector leases of older releases, for the steps that must stop every projector of any release. */
export const OLDER_PROJECTOR_LEASES: readonly string[] = [...PROJECTIONS.map(({ name }) => `${PROJECTOR_LEASE}-${name}`), PROJECTOR_LEASE];

/**
 * Each process with the projector role keeps one named so (its holder id after the prefix) while
 * it runs. Not `projector-member-`, which the previous release counts as its own members: it would
 * count these as holding none of its leases and give its own up to them, and they take none of its.
 */
const MEMBER_PREFIX = `${PROJECTOR_LEASE}-process-`;

/** A member's row is removed once it ran out this long ago (it stopped or died), as an instance's is. */
const GONE_MEMBER_MS = 60_000;

/** What runs the projections here (Projections). */
interface ProjectionWork {
  run(name: string, fence: Fence, lost: () => void): Promise<void>;
  pause(name: string): Promise<void>;
}

export interface ProjectorLeasesOptions {
  readonly leases: Pick<ReadModelStore, 'acquireLease' | 'releaseLease' | 'lease' | 'leasesNamed' | 'removeLeasesNamed'>;
  readonly holder: string;
  readonly projections: ProjectionWork;
  /**
   * Whether this process joins the balancing (a service); false: it takes every free lease and
   * never gives one up (a CLI run alone, bringing the projections up to date). Default true.
   */
  readonly join?: boolean;
  readonly ttlMs?: number;
  readonly heartbeatMs?: number;
  readonly logger?: Logger;
}

export class ProjectorLeases {
  private readonly keepers: Array<{ name: string; keeper: LeaseKeeper }>;
  private readonly member: LeaseKeeper | null;
  /** Every lease named `projector…`, as the last beat read them. */
  private rows: Lease[] = [];
  /** The keepers this process let ask since the last beat read the rows: counted as held until then. */
  private readonly asking = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  private stopped = false;
  /** The older releases' processes already warned of. */
  private readonly warnedOf = new Set<string>();
  /** A store that is down fails every beat, one a second: logged as an outage, not beat by beat. */
  private readonly readFailures: OutageLog | undefined;

  constructor(private readonly options: ProjectorLeasesOptions) {
    const { leases, holder, projections, ttlMs, heartbeatMs, logger } = options;
    this.readFailures = logger && repeatedFailures(logger, 'balancing the projection leases failed', 'failed_beats', { one: 'beat', many: 'beats' });
    const timing = { ...(ttlMs ? { ttlMs } : {}), ...(heartbeatMs ? { heartbeatMs } : {}), ...(logger ? { logger } : {}) };
    this.keepers = PROJECTIONS.map((projection) => ({
      name: projection.name,
      keeper: new LeaseKeeper({
        leases,
        name: projectionLease(projection),
        holder,
        wanted: () => this.wants(projection),
        work: { start: (fence, lost) => projections.run(projection.name, fence, lost), stop: () => projections.pause(projection.name) },
        ...timing,
      }),
    }));
    // Not logged: what it would say (a renewal failing, the process stopping) the projections' keepers say.
    const quiet = { ...(ttlMs ? { ttlMs } : {}), ...(heartbeatMs ? { heartbeatMs } : {}) };
    this.member = options.join === false ? null : new LeaseKeeper({ leases, name: `${MEMBER_PREFIX}${holder}`, holder, work: { start: async () => {}, stop: async () => {} }, ...quiet });
  }

  /** Joins (a service), reads the leases, and takes the free ones this process should at the first beat of each. */
  async start(): Promise<void> {
    if (this.member) {
      await this.options.leases.removeLeasesNamed(MEMBER_PREFIX, Date.now() - GONE_MEMBER_MS).catch((error: unknown) => this.options.logger?.warn({ err: error }, 'could not remove the leases of projectors gone'));
      await this.member.start();
    }
    // Unread (a store that does not answer yet), it asks as if alone: the keepers' beats fail too,
    // and the next beats share the leases out.
    await this.read().catch((error: unknown) => this.readFailures?.failed(error));
    for (const { keeper } of this.keepers) await keeper.start();
    this.schedule();
  }

  /** Leaves, and gives every lease up for the other members to take at once. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.beating;
    // Leaving first: the others count one member fewer, and so may take what this one gives up.
    await this.member?.stop();
    await Promise.all(this.keepers.map(({ keeper }) => keeper.stop()));
  }

  /** Each projection's lease as this process sees it; one an older release's process runs as held by it. */
  statuses(): LeaseStatus[] {
    return this.keepers.map(({ name, keeper }) => {
      const status = keeper.status();
      const older = status.held || status.holder !== null ? null : this.olderHolder(name);
      return older ? { ...status, holder: older } : status;
    });
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.beating = this.beat()
        .catch((error: unknown) => this.readFailures?.failed(error))
        .finally(() => this.schedule());
    }, this.options.heartbeatMs ?? 1000);
    this.timer.unref();
  }

  private async read(): Promise<void> {
    this.rows = await this.options.leases.leasesNamed(PROJECTOR_LEASE);
    this.asking.clear();
  }

  /** Reads the leases, then gives one up if this process holds more than its share. */
  private async beat(): Promise<void> {
    await this.read();
    if (this.stopped) return;
    this.warnOfOlderReleases();
    const held = this.keepers.filter(({ keeper }) => keeper.status().held);
    if (held.length === 0) return;
    // An older release's process runs these projections, in the same builds: none may run here meanwhile.
    const taken = held.filter(({ name }) => this.olderHolder(name));
    if (taken.length > 0) {
      await Promise.all(taken.map(({ keeper }) => keeper.giveUp()));
      return;
    }
    if (!this.member) return;
    const { floor, ceil, counts } = this.shares();
    const mine = held.length;
    const over = mine > ceil;
    // At ceil while a member is under floor: one of those at ceil gives up, the one sorting last.
    const atCeil = [...counts].filter(([, count]) => count === ceil).map(([holder]) => holder);
    const under = [...counts].some(([, count]) => count < floor);
    const yields = mine === ceil && ceil > floor && under && atCeil.sort().at(-1) === this.options.holder;
    if (over || yields) await held.at(-1)!.keeper.giveUp();
  }

  /** Whether the keeper of `projection`, not holding its lease, should ask for it now. */
  private wants(projection: Projection): boolean {
    const { name } = projection;
    if (this.stopped || this.olderHolder(name)) return false;
    const now = Date.now();
    const row = this.rows.find((lease) => lease.name === projectionLease(projection));
    // Held by another, as far as the last beat saw: asking cannot take it.
    if (row && row.holder !== this.options.holder && row.expiresAt > now) return false;
    const mine = this.keepers.filter(({ name: other, keeper }) => keeper.status().held || (other !== name && this.asking.has(other))).length;
    if (this.member) {
      const { ceil, counts } = this.shares();
      if (mine >= ceil) return false;
      // A member holding fewer takes it first (one that gave a lease up must not take it back).
      const held = this.keepers.filter(({ keeper }) => keeper.status().held).length;
      if ([...counts].some(([holder, count]) => holder !== this.options.holder && count < held)) return false;
    }
    this.asking.add(name);
    return true;
  }

  /** The shares of P projections over the N live members, and what each member holds (this one: as it knows itself). */
  private shares(): { floor: number; ceil: number; counts: Map<string, number> } {
    const now = Date.now();
    const counts = new Map<string, number>([[this.options.holder, 0]]);
    for (const lease of this.rows) {
      if (lease.name.startsWith(MEMBER_PREFIX) && lease.expiresAt > now) counts.set(lease.holder, counts.get(lease.holder) ?? 0);
    }
    for (const lease of this.rows) {
      if (PROJECTION_LEASES.includes(lease.name) && lease.expiresAt > now && counts.has(lease.holder)) counts.set(lease.holder, counts.get(lease.holder)! + 1);
    }
    counts.set(this.options.holder, this.keepers.filter(({ keeper }) => keeper.status().held).length);
    const p = this.keepers.length;
    return { floor: Math.floor(p / counts.size), ceil: Math.ceil(p / counts.size), counts };
  }

  /**
   * Says once per process of an older release that it runs beside this one (started after it: a
   * serve refuses to start beside one). It misses this release's claims and keys, so the operator
   * must stop it; its projections are left to it meanwhile.
   */
  private warnOfOlderReleases(): void {
    for (const { name } of this.keepers) {
      const holder = this.olderHolder(name);
      if (holder === null || this.warnedOf.has(holder)) continue;
      this.warnedOf.add(holder);
      this.options.logger?.warn(
        { holder, projection: name },
        'a process of an older release of leadpost runs beside this one on these stores: it sells again consumers this release accepted and refuses retries this release answered; stop every instance of it (README, "Upgrading"). The projections it holds are left to it meanwhile',
      );
    }
  }

  /**
   * Who holds an older release's lease of the projection (its own, or the single one of all four),
   * when another live process does. One that also holds a lease of this release is a step of this
   * release that needs every instance stopped (service-leases.ts), not an older release.
   */
  private olderHolder(projection: string): string | null {
    const now = Date.now();
    const ours = new Set(this.rows.filter((lease) => PROJECTION_LEASES.includes(lease.name) && lease.expiresAt > now).map((lease) => lease.holder));
    const older = this.rows.find(
      (lease) => (lease.name === PROJECTOR_LEASE || lease.name === `${PROJECTOR_LEASE}-${projection}`) && lease.holder !== this.options.holder && lease.expiresAt > now && !ours.has(lease.holder),
    );
    return older?.holder ?? null;
  }
}

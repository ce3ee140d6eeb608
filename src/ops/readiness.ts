// GET /readyz: may this instance take traffic? Yes when both stores answer, every projection is
// running and no further behind than the threshold, and the process is not shutting down. Each
// check is time-boxed, so a hung store makes the probe say "no" quickly instead of hanging it.
// Each projection has a lease of its own (roles/projector-leases.ts). A projection another instance
// runs (another live instance holds its lease) is reported with its lag but does not make this one
// unready: its posts do not depend on it, and taking every API instance out of a load balancer
// because a projector fell behind would stop posting too. An instance with the projector role that
// sees a projection's lease free (nobody renews it) counts that projection's lag as its own: no
// instance runs it, and it is one that should.
// A process that keeps a lease (the projector or delivery role) writes to the read-model store
// every second: for it the store answers only when it can take the store's write lock; an `api`
// process only reads it, which another connection's write lock does not stop.
// The key store is the other way round: a process serving the API writes to it (a batch of data
// keys for new leads, the keys an erasure destroys), so for it the key store must take a write;
// the other roles only read keys (a webhook's payload is opened with its lead's key).

import type { Logger } from 'pino';
import type { EventStore } from '../event-store/port.js';
import type { ProjectionStatus } from '../projections/runner.js';
import type { Lease, ReadModelStore } from '../read-models/port.js';
import type { LeaseStatus } from '../roles/lease-keeper.js';
import { PROJECTOR_LEASE, leaseOfProjection } from '../roles/projector-leases.js';
import { causeChain } from '../error-causes.js';
import type { FailingRun } from './failure-run.js';

export interface ReadinessDeps {
  readonly events: Pick<EventStore, 'headPosition'>;
  readonly readModels: Pick<ReadModelStore, 'checkpoint' | 'acquireLease' | 'leasesNamed'>;
  /** The data keys of personal data (see DataKeyStore.probe). */
  readonly keyStore: { probe(write: boolean): Promise<void> };
  /** The status of every running projection. */
  readonly projections: () => Promise<ProjectionStatus[]>;
  /** A projection further behind than this (oldest unprojected event, seconds) makes the instance not ready. */
  readonly maxLagSeconds: number;
  /** True once the service has begun to shut down. */
  readonly shuttingDown: () => boolean;
  /** The roles this process runs, and the leases it keeps for them; omitted: every role, no leases. */
  readonly roles?: { readonly running: readonly string[]; readonly leases: () => LeaseStatus[] };
  /** Whether this instance runs the projection itself; omitted: it runs every one. */
  readonly projectionsHere?: (projection: string) => boolean;
  /** A run of this instance's appends all failing (see FailureRun); omitted: not watched. */
  readonly appends?: { failing(): FailingRun | null };
  /** A run of this instance's uses of the key store all failing (the same kind of run); omitted: not watched. */
  readonly keyStoreUses?: { failing(): FailingRun | null };
  /** Per check; defaults to 2000. */
  readonly timeoutMs?: number;
  readonly logger?: Logger;
}

export interface Check {
  readonly ok: boolean;
  /** Why not, in words an on-call engineer can act on; never a store's own error text (it may hold a URL with a password). */
  readonly detail: string;
}

export interface ProjectionCheck extends Check {
  readonly items: Array<{ projection: string; caught_up: boolean; events_behind: number; lag_seconds: number }>;
}

/** What this instance runs: informational, always ok (a standby is as ready as the holder). */
export interface RolesCheck extends Check {
  readonly roles: string[];
  readonly leases: Array<{ lease: string; held: boolean; holder: string | null }>;
}

export interface Readiness {
  readonly ready: boolean;
  readonly checks: {
    readonly shutdown: Check;
    readonly event_store: Check;
    readonly read_models: Check;
    readonly key_store: Check;
    readonly projections: ProjectionCheck;
    readonly roles: RolesCheck;
  };
}

export const READINESS_CHECKS = ['shutdown', 'event_store', 'read_models', 'key_store', 'projections', 'roles'] as const;

/**
 * A lease only the probe takes, for a second: taking it writes its row (its time changes every
 * time), so a store that cannot take a write (a full disk, a read-only one) fails the probe. Giving
 * up a lease never held, as the probe did before, matched no row and wrote nothing: /readyz said
 * ready on a full disk while the process had lost every lease it keeps.
 */
export const PROBE_LEASE = 'readyz-write-probe';
const PROBE_LEASE_MS = 1000;

class TimeoutError extends Error {}

function within<T>(ms: number, run: () => Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    // Its message is what the log line says: an empty one left the on-call engineer guessing.
    timer = setTimeout(() => reject(new TimeoutError(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([run(), timeout]).finally(() => clearTimeout(timer));
}

/**
 * What a store that answered with an error says is wrong, from the error code in its cause chain:
 * an embedded store on a read-only or full disk answers at once, and "unreachable" sent the
 * on-call engineer looking for a network. Only a code is shown, never the store's own text.
 */
const CAUSES: ReadonlyArray<readonly [RegExp, string]> = [
  [/^SQLITE_READONLY/, 'read-only: check the permissions of its file and directory and that its filesystem is mounted read-write'],
  [/^(SQLITE_FULL|ENOSPC)$/, 'disk full'],
  [/^SQLITE_IOERR/, 'disk I/O error'],
  [/^(SQLITE_CORRUPT|SQLITE_NOTADB)/, 'its file is damaged'],
  [/^(SQLITE_CANTOPEN|SQLITE_PERM|SQLITE_AUTH|EACCES|EPERM|EROFS)/, 'its file cannot be opened for writing'],
];

function failure(error: unknown, otherwise = 'unreachable'): string {
  for (const current of causeChain(error)) {
    const code = (current as { code?: unknown }).code;
    if (typeof code !== 'string' || !/^[A-Z][A-Z0-9_]{1,40}$/.test(code)) continue;
    const words = CAUSES.find(([pattern]) => pattern.test(code))?.[1];
    return words ? `${words} (${code})` : `failing (${code})`;
  }
  return otherwise;
}

export class ReadinessProbe {
  private inFlight: Promise<Readiness> | undefined;

  constructor(private readonly deps: ReadinessDeps) {}

  /** Concurrent probes share one round of checks: a burst of load-balancer probes costs one. */
  check(): Promise<Readiness> {
    this.inFlight ??= this.run().finally(() => (this.inFlight = undefined));
    return this.inFlight;
  }

  private async run(): Promise<Readiness> {
    const writes = (this.deps.roles?.leases() ?? []).length > 0;
    const servesApi = (this.deps.roles?.running ?? ['api']).includes('api');
    const [eventStoreReads, readModels, keyStore, projections] = await Promise.all([
      this.reach('event_store', () => this.deps.events.headPosition()),
      // Any checkpoint read proves the store answers a reader; this name is never written. A
      // process that keeps leases needs it to take writes too (see PROBE_LEASE).
      this.reach('read_models', () => (writes ? this.deps.readModels.acquireLease(PROBE_LEASE, PROBE_LEASE, PROBE_LEASE_MS) : this.deps.readModels.checkpoint('readyz'))),
      this.reach('key_store', () => this.deps.keyStore.probe(servesApi)),
      this.projections(),
    ]);
    const eventStore = eventStoreReads.ok ? this.appending() : eventStoreReads;
    const keys = keyStore.ok ? this.usingKeys() : keyStore;
    const shutdown: Check = this.deps.shuttingDown() ? { ok: false, detail: 'shutting down' } : { ok: true, detail: 'serving' };
    const checks = { shutdown, event_store: eventStore, read_models: readModels, key_store: keys, projections, roles: this.roles() };
    return { ready: Object.values(checks).every((check) => check.ok), checks };
  }

  private roles(): RolesCheck {
    const running = [...(this.deps.roles?.running ?? ['api', 'projector', 'delivery'])];
    const leases = this.deps.roles?.leases() ?? [];
    const single = (name: string, lease: (typeof leases)[number]) =>
      `${name} (${lease.held ? 'holds the lease' : lease.holder ? `standby; ${lease.holder} holds the lease` : 'standby; the lease is free'})`;
    const described = running.map((role) => {
      const lease = leases.find((l) => l.lease === role);
      if (lease) return single(role, lease);
      // The projector role: a lease per projection (`projector-leads-v4` …), named here by the projection.
      const several = leases.filter((l) => l.lease.startsWith(`${role}-`));
      return several.length === 0 ? role : `${role} (${describeLeases(several, `${role}-`)})`;
    });
    // A lease of no role (the retention sweep's, where PII_RETENTION_DAYS is set) is said as well:
    // when no instance holds it, that work stands still.
    const ofRoles = (name: string) => running.some((role) => name === role || name.startsWith(`${role}-`));
    for (const lease of leases) if (!ofRoles(lease.lease)) described.push(single(lease.lease, lease));
    return { ok: true, detail: described.join(', '), roles: running, leases: leases.map((l) => ({ lease: l.lease, held: l.held, holder: l.holder })) };
  }

  private get timeoutMs(): number {
    return this.deps.timeoutMs ?? 2000;
  }

  private async reach(name: string, probe: () => Promise<unknown>): Promise<Check> {
    const ms = this.timeoutMs;
    try {
      await within(ms, probe);
      return { ok: true, detail: 'reachable' };
    } catch (error) {
      this.deps.logger?.warn({ err: error, check: name }, 'readiness check failed');
      return { ok: false, detail: error instanceof TimeoutError ? `no answer within ${ms} ms` : failure(error) };
    }
  }

  /** The store answers a reader; the instance's own appends say whether it takes writes. */
  private appending(): Check {
    const run = this.deps.appends?.failing();
    if (!run) return { ok: true, detail: 'reachable' };
    const cause = failure(run.cause, 'failing');
    return { ok: false, detail: `reads answer, but every append has failed for ${run.seconds} s (${run.failures} appends): ${cause}` };
  }

  private usingKeys(): Check {
    const run = this.deps.keyStoreUses?.failing();
    if (!run) return { ok: true, detail: 'reachable' };
    return { ok: false, detail: `it answers a probe, but every read and write of the keys has failed for ${run.seconds} s (${run.failures} uses): ${failure(run.cause, 'failing')}` };
  }

  private async projections(): Promise<ProjectionCheck> {
    const ms = this.timeoutMs;
    let statuses: ProjectionStatus[];
    try {
      statuses = await within(ms, this.deps.projections);
    } catch (error) {
      this.deps.logger?.warn({ err: error, check: 'projections' }, 'readiness check failed');
      return { ok: false, detail: error instanceof TimeoutError ? `no status within ${ms} ms` : 'status unavailable', items: [] };
    }
    const items = statuses.map((s) => ({
      projection: s.projection,
      caught_up: s.caughtUp,
      events_behind: s.eventsBehind,
      lag_seconds: Math.round(s.lagSeconds * 1000) / 1000,
    }));
    if (items.length === 0) return { ok: false, detail: 'no projection is running', items };
    const running = this.deps.roles?.running ?? ['api', 'projector', 'delivery'];
    const rows = running.includes('projector') ? null : await this.projectorLeases();
    const runners = new Map(items.map((item) => [item.projection, this.runner(item.projection, running, rows)]));
    const kinds = new Set(runners.values());
    // One runner for all (the usual case: one instance, or a projector-less one) is said once.
    const single = kinds.size === 1 ? [...kinds][0]! : null;
    const late = items.filter((item) => item.lag_seconds > this.deps.maxLagSeconds);
    if (late.length > 0) {
      // Only while another live instance holds a projection's lease is its lag that instance's to
      // answer for; one that nobody runs is this instance's only if it may run it.
      const own = late.some((item) => {
        const runner = runners.get(item.projection);
        return runner === 'here' || (runner === 'no instance' && running.includes('projector'));
      });
      const by = single === null || single === 'here' ? '' : `run by ${single}, `;
      const which = late.map((item) => `${item.projection} ${item.lag_seconds} s${single === null ? ` (${runBy(runners.get(item.projection)!)})` : ''}`).join(', ');
      return { ok: !own, detail: `${by}behind by more than ${this.deps.maxLagSeconds} s: ${which}`, items };
    }
    const who = single ?? RUNNERS.filter((r) => kinds.has(r)).map((r) => `${runBy(r)}: ${items.filter((item) => runners.get(item.projection) === r).map((item) => item.projection).join(', ')}`).join('; ');
    return { ok: true, detail: `${single ? runBy(single) : who}${single ? ',' : ';'} within ${this.deps.maxLagSeconds} s`, items };
  }

  /**
   * The projector leases as the store has them, for an instance without the projector role (it
   * keeps none of them itself); null when the store does not say in time (then it cannot tell).
   */
  private async projectorLeases(): Promise<Map<string, Lease> | null> {
    try {
      const rows = await within(this.timeoutMs, () => this.deps.readModels.leasesNamed(PROJECTOR_LEASE));
      return new Map(rows.map((row) => [row.name, row]));
    } catch (error) {
      this.deps.logger?.warn({ err: error, check: 'projections' }, 'readiness check could not read the projector leases');
      return null;
    }
  }

  /**
   * Who runs a projection, as this instance sees it: itself; another instance (one holds the
   * projection's lease); or no instance (the lease is free or ran out: no live instance renews
   * it). An instance without the projector role reads the lease's row (`rows`); when it cannot,
   * it says another instance, as it cannot tell.
   */
  private runner(projection: string, running: readonly string[], rows: Map<string, Lease> | null): Runner {
    if (this.deps.projectionsHere?.(projection) ?? true) return 'here';
    if (!running.includes('projector')) {
      if (rows === null) return 'another instance';
      const row = rows.get(leaseOfProjection(projection) ?? '');
      return row !== undefined && row.expiresAt > Date.now() ? 'another instance' : 'no instance';
    }
    const lease = this.deps.roles?.leases().find((l) => l.lease === leaseOfProjection(projection));
    if (!lease) return 'another instance';
    // Held, its projection starting: this instance's to answer for.
    if (lease.held) return 'here';
    return lease.holder === null ? 'no instance' : 'another instance';
  }
}

type Runner = 'here' | 'another instance' | 'no instance';
const RUNNERS: readonly Runner[] = ['here', 'no instance', 'another instance'];
const runBy = (runner: Runner): string => (runner === 'here' ? 'running' : `run by ${runner}`);

/** A role's leases, by the name after `prefix` without its version: `holds leads, deliveries; web-2:42:9f3a1c holds feedback; free: reports`. */
function describeLeases(leases: readonly LeaseStatus[], prefix: string): string {
  const named = (of: readonly LeaseStatus[]) => of.map((l) => l.lease.slice(prefix.length).replace(/-v\d+$/, '')).join(', ');
  const held = leases.filter((l) => l.held);
  const holders = [...new Set(leases.filter((l) => !l.held && l.holder).map((l) => l.holder!))];
  const free = leases.filter((l) => !l.held && !l.holder);
  const parts = [
    ...(held.length > 0 ? [`holds ${named(held)}`] : []),
    ...holders.map((holder) => `${holder} holds ${named(leases.filter((l) => !l.held && l.holder === holder))}`),
    ...(free.length > 0 ? [`free: ${named(free)}`] : []),
  ];
  return `${held.length === 0 ? 'standby; ' : ''}${parts.join('; ')}`;
}

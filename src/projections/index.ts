import type { Logger } from 'pino';
import { type EventStore, type Position, START, comparePositions } from '../event-store/port.js';
import type { Fence, ReadModelStore } from '../read-models/port.js';
import { PROJECTIONS, type Projection } from './projections.js';
import { ProjectionRunner, type ProjectionStatus, checkpointName, collectionName, projectionStatus } from './runner.js';

export { PROJECTIONS } from './projections.js';

/**
 * The build a projection version builds into and is served from until a replay switches it: `v1`.
 * Its rebuilds are named after it: `v1_r<time>`.
 */
export const versionBuild = (projection: Projection): string => `v${projection.version}`;

// Which build of each projection is served lives in the read-model store, so every instance
// and the replay CLI agree on it. A switch is a `put` at a newer position than the last one.
// The collection and checkpoint names, and the `tag` field of their documents, are the ones
// existing data dirs hold (builds were once called tags): they stay as they are.
const SERVED_BUILDS = 'projection_tags';
const SERVED_BUILDS_CHECKPOINT = '__projection_tags';

/** The build of a projection its instances serve: the one last switched to, else `versionBuild`. */
export async function servedBuild(readModels: ReadModelStore, projection: Projection): Promise<string> {
  const doc = await readModels.get(SERVED_BUILDS, projection.name);
  const build = typeof doc?.tag === 'string' ? doc.tag : undefined;
  const own = versionBuild(projection);
  // A build of another version is a build of other code: this version serves its own.
  return build && (build === own || build.startsWith(`${own}_`)) ? build : own;
}

/**
 * Makes `build` the one every instance of the service serves (they follow within a second, each
 * once it has caught up with the build it reads; an instance starting meanwhile reads the furthest
 * along of the builds before it until then: see Projections).
 */
export async function switchBuild(readModels: ReadModelStore, projection: Projection, build: string): Promise<void> {
  // Switches are ordered by their time: the newest one wins, in the checkpoint and in the document.
  const now = Date.now();
  const position = { commit: now, prepare: 0 };
  await readModels.commit(SERVED_BUILDS_CHECKPOINT, position, [
    { op: 'put', collection: SERVED_BUILDS, id: projection.name, position, doc: { tag: build, switched_at: new Date(now).toISOString() } },
  ]);
}

/**
 * Switches to `build` unless the build served now is newer: made by a replay that started after
 * the one that made `build`. Of two replays run over each other, the one started first may finish
 * last; switched back to its older build, it then removed that very build as older than the one
 * served before, and the service read an empty table. The older build is no fresher (both fold
 * the same events to the head), so it stands aside. `previous` is the build served before.
 *
 * Nor is a build switched to while it is behind the one served: the events appended after the
 * rebuild's last read were folded into the served build by the running service, and an erasure
 * that saw its marks there answered; switched to a build without them, the instances served the
 * erased consumer in clear again. `catchUp` folds the build on to the head, as often as it takes
 * (a few rounds while posts keep coming).
 */
export async function switchUnlessNewerServed(
  readModels: ReadModelStore,
  projection: Projection,
  build: string,
  catchUp?: () => Promise<void>,
): Promise<{ switched: boolean; previous: string }> {
  for (let round = 0; ; round++) {
    const previous = await servedBuild(readModels, projection);
    if ((buildTime(projection, previous) ?? 0) > (buildTime(projection, build) ?? 0)) return { switched: false, previous };
    const [served, own] = await Promise.all([readModels.checkpoint(checkpointName(projection, previous)), readModels.checkpoint(checkpointName(projection, build))]);
    if (catchUp && round < MAX_CATCH_UP_ROUNDS && served !== null && (own === null || comparePositions(own, served) < 0)) {
      await catchUp();
      continue;
    }
    await switchBuild(readModels, projection, build);
    return { switched: true, previous };
  }
}

/**
 * Resolves once `runner` has committed `position`, or stopped (its lease lost), or after
 * SWITCH_CATCH_UP_MS: a store failing for that long must not hold the instance's other projection
 * work (run, pause) for longer; the switch then goes ahead as the runner stands. At once when the
 * instance is `stopping`: its stop then stops the new runner with the others.
 */
async function caughtUp(runner: ProjectionRunner, position: Position, stopping: AbortSignal): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let stopped = () => {};
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, SWITCH_CATCH_UP_MS);
    stopped = () => resolve();
    stopping.addEventListener('abort', stopped, { once: true });
  });
  if (!stopping.aborted) await Promise.race([runner.waitFor(position), late]);
  clearTimeout(timer);
  stopping.removeEventListener('abort', stopped);
}

/** How long a switch waits for the new build to catch up with the one served (see caughtUp). */
const SWITCH_CATCH_UP_MS = 30_000;

/** Rounds of catching up before a switch; each reaches the head, so the first almost always does. */
const MAX_CATCH_UP_ROUNDS = 10;

/** Removes one build's collections and its checkpoint. */
export async function dropBuild(readModels: ReadModelStore, projection: Projection, build: string): Promise<void> {
  for (const base of projection.collections) await readModels.drop(collectionName(base, build));
  // A build that never wrote a document (no feedback yet) has a checkpoint no collection names.
  await readModels.resetCheckpoint(checkpointName(projection, build));
}

/** The build a collection of `base` belongs to (`leads_v3_r17…` → `v3_r17…`), or undefined for another base's. */
const buildOf = (base: string, name: string): string | undefined => (name.startsWith(`${base}_`) ? name.slice(base.length + 1) : undefined);

/** When a build of this version was made: `v1_r1700000000000` → its time; the version's own `v1` → 0. */
function buildTime(projection: Projection, build: string): number | undefined {
  const own = versionBuild(projection);
  if (build === own) return 0;
  const match = new RegExp(`^${own}_r(\\d+)$`).exec(build);
  return match ? Number(match[1]) : undefined;
}

/**
 * Removes the builds of a projection that are older than `keep` (the build served before the last
 * switch), so that disk use does not grow with every replay: what is left is the build switched to
 * and the one before it. A build newer than `keep` that was never switched to (a replay still
 * running, or one that failed) is left alone, and so is every build of another version, which an
 * instance of other code may be serving. Nor is one removed while it is ahead of the build served:
 * an instance reads from it until the build served has caught up with it (a projector down since
 * the switch before), and it goes with a later replay. The instances are given FOLLOW_SWITCH_MS
 * first to follow the switch, when there is a build to remove. Returns the builds removed.
 */
export async function dropBuildsOlderThan(readModels: ReadModelStore, projection: Projection, keep: string): Promise<string[]> {
  if ((await buildsOlderThan(readModels, projection, keep)).length === 0) return [];
  await new Promise((resolve) => setTimeout(resolve, FOLLOW_SWITCH_MS));
  const dropped = await buildsOlderThan(readModels, projection, keep);
  for (const build of dropped) await dropBuild(readModels, projection, build);
  return dropped;
}

/** The builds of this version older than `build` that are in the store (`names`: its collections). */
function buildsBefore(projection: Projection, build: string, names: readonly string[]): string[] {
  const time = buildTime(projection, build);
  const before = new Set<string>();
  for (const name of names) {
    for (const base of projection.collections) {
      const other = buildOf(base, name);
      const otherTime = other === undefined ? undefined : buildTime(projection, other);
      if (time !== undefined && otherTime !== undefined && otherTime < time) before.add(other!);
    }
  }
  return [...before];
}

/** The builds dropBuildsOlderThan may remove now, oldest first. */
async function buildsOlderThan(readModels: ReadModelStore, projection: Projection, keep: string): Promise<string[]> {
  // Never the build served now, whatever its age: a switch made meanwhile by another replay may
  // have gone to an older build than `keep`, and the instances read from what is served.
  const served = await servedBuild(readModels, projection);
  const servedAt = await readModels.checkpoint(checkpointName(projection, served));
  const removable: string[] = [];
  for (const build of buildsBefore(projection, keep, await readModels.collections())) {
    if (build === served) continue;
    const reached = await readModels.checkpoint(checkpointName(projection, build));
    if (reached === null || (servedAt !== null && comparePositions(reached, servedAt) <= 0)) removable.push(build);
  }
  return removable.sort((a, b) => buildTime(projection, a)! - buildTime(projection, b)!);
}

/**
 * How long the instances are given to follow a switch (they look every FOLLOWS_EVERY_MS), before
 * a build they may have read from until then is removed.
 */
const FOLLOWS_EVERY_MS = 1000;
const FOLLOW_SWITCH_MS = 2 * FOLLOWS_EVERY_MS + 500;

/** The version a build belongs to: `v3_r17…` → 3; undefined for a name that is no build. */
const versionOf = (build: string): number | undefined => {
  const match = /^v(\d+)(?:_r\d+)?$/.exec(build);
  return match ? Number(match[1]) : undefined;
};

/**
 * Removes the builds of older versions of every projection: what the releases before this one
 * built and served, left behind by an upgrade (a projection's version changed). This release's
 * builds, served or a replay's under way, stay. For once no instance of an older release runs.
 */
export async function dropOlderVersions(readModels: ReadModelStore): Promise<string[]> {
  const dropped: string[] = [];
  const names = await readModels.collections();
  for (const projection of PROJECTIONS) {
    for (const base of [...projection.collections, ...(FORMER_COLLECTIONS[projection.name] ?? [])]) {
      for (const name of names) {
        const build = buildOf(base, name);
        const version = build === undefined ? undefined : versionOf(build);
        if (version === undefined || version >= projection.version) continue;
        await readModels.drop(name);
        await readModels.resetCheckpoint(checkpointName(projection, build!));
        dropped.push(name);
      }
    }
  }
  return dropped;
}

/** Collections older versions of a projection kept and today's does not. */
const FORMER_COLLECTIONS: Readonly<Record<string, readonly string[]>> = { reports: ['report_leads'] };

/**
 * Removes every build of every projection but the one served, of this version or any other: for
 * `leadpost seal-clear-leads`, once every instance runs this release, since an older build may hold
 * what the release it was made by kept in clear. Returns the collections removed.
 */
export async function dropUnservedBuilds(readModels: ReadModelStore): Promise<string[]> {
  const dropped: string[] = [];
  const names = await readModels.collections();
  for (const projection of PROJECTIONS) {
    const served = await servedBuild(readModels, projection);
    for (const base of [...projection.collections, ...(FORMER_COLLECTIONS[projection.name] ?? [])]) {
      for (const name of names) {
        const build = buildOf(base, name);
        if (build === undefined || build === served || !/^v\d+(_r\d+)?$/.test(build)) continue;
        await readModels.drop(name);
        await readModels.resetCheckpoint(checkpointName(projection, build));
        dropped.push(name);
      }
    }
  }
  return dropped;
}

/**
 * Every projection of the service inside `leadpost serve`. Each serves the build last switched to;
 * when `leadpost replay` has rebuilt one and switched to it, every instance notices within a
 * second and reads from the new build. Each projection is run by the instance holding its lease
 * (`run`, fenced by that lease; see roles/projector-leases.ts); for the projections run elsewhere
 * an instance follows the builds and reads the stored checkpoints, for the position its answers
 * reflect and for their lag.
 */
export class Projections {
  /** The runners of the projections this instance runs now. */
  private readonly runners = new Map<string, ProjectionRunner>();
  /** The build each projection is served from. */
  private readonly builds = new Map<string, string>();
  /** Each projection's stored checkpoint, as last read (while another instance runs it). */
  private readonly stored = new Map<string, Position>();
  /** The projections this instance runs, each with the fence of its commits. */
  private readonly running = new Map<string, { fence: Fence | undefined; onLeaseLost: () => void }>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();
  /** Aborted as the instance stops: a switch under way stops waiting for its new build (see caughtUp). */
  private stopping = new AbortController();
  /** run, pause and a switch of builds, one at a time: none may find the runners half made. */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly events: EventStore,
    private readonly readModels: ReadModelStore,
    private readonly logger?: Logger,
    private readonly pollMs = FOLLOWS_EVERY_MS,
  ) {}

  private readonly listeners: Array<(projection: string) => void> = [];

  /** Called after every commit of any projection (e.g. to wake the delivery worker). */
  onCommit(listener: (projection: string) => void): void {
    this.listeners.push(listener);
  }

  get all(): ProjectionRunner[] {
    return [...this.runners.values()];
  }

  runner(name: string): ProjectionRunner | undefined {
    return this.runners.get(name);
  }

  /** Whether this instance runs any projection now. */
  get active(): boolean {
    return this.running.size > 0;
  }

  /** Whether this instance runs the projection `name` now. */
  runs(name: string): boolean {
    return this.running.has(name);
  }

  /** Learns the served builds and their checkpoints, and follows switches from then on. */
  async start(): Promise<void> {
    this.stopping = new AbortController();
    // Switched to a build that is still behind one served before it (no projector has caught it up
    // yet): the furthest along of those is read until then, as the instances already running do
    // (followSwitches). Two switches in a row may have left the instances on the build before the last.
    const names = await this.readModels.collections();
    for (const projection of PROJECTIONS) {
      const served = await servedBuild(this.readModels, projection);
      let read = served;
      for (const older of buildsBefore(projection, served, names)) if (await this.behind(projection, read, older)) read = older;
      this.builds.set(projection.name, read);
    }
    await this.readCheckpoints();
    const poll = () => {
      this.checking = this.exclusive(() => this.followSwitches()).catch((error: unknown) => this.logger?.warn({ err: error }, 'projection tag check failed'));
      void this.checking.then(() => {
        if (this.timer) this.timer = setTimeout(poll, this.pollMs).unref();
      });
    };
    this.timer = setTimeout(poll, this.pollMs).unref();
  }

  /**
   * Runs the projection `name` from its checkpoint, each commit fenced by `fence` (its lease). A
   * commit refused by the fence stops it (the others run on) and calls `onLeaseLost`.
   */
  run(name: string, fence?: Fence, onLeaseLost: () => void = () => {}): Promise<void> {
    const projection = PROJECTIONS.find((p) => p.name === name);
    if (!projection) return Promise.reject(new Error(`no projection is named ${name}`));
    return this.exclusive(async () => {
      if (this.running.has(name)) return;
      this.running.set(name, { fence, onLeaseLost });
      await this.serve(projection, this.builds.get(name)!);
    });
  }

  /** Stops running the projection `name` (another instance may take over); keeps following its build. */
  pause(name: string): Promise<void> {
    return this.exclusive(async () => {
      this.running.delete(name);
      const runner = this.runners.get(name);
      this.runners.delete(name);
      await runner?.stop();
      await this.readCheckpoints();
    });
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.stopping.abort();
    await this.checking;
    await Promise.all(PROJECTIONS.map((projection) => this.pause(projection.name)));
  }

  /** The build a projection is served from (the runners, here or on another thread or process, follow it within a second). */
  build(projection: string): string | undefined {
    return this.builds.get(projection);
  }

  /** The physical collection a base collection is served from. */
  collection(base: string): string {
    for (const projection of PROJECTIONS) {
      if (projection.collections.includes(base)) return collectionName(base, this.builds.get(projection.name) ?? versionBuild(projection));
    }
    return collectionName(base, 'v1');
  }

  /** The position every projection has reached (its runner here, else its stored checkpoint): what a read-back answer reflects at least. */
  position(): Position {
    const positions = PROJECTIONS.map((projection) => this.runners.get(projection.name)?.position ?? this.stored.get(projection.name) ?? START);
    return positions.reduce<Position | null>((low, p) => (low === null || comparePositions(p, low) < 0 ? p : low), null) ?? START;
  }

  /** How far each projection is behind `head`: from its runner here, else from its stored checkpoint. */
  async statuses(head: Position): Promise<ProjectionStatus[]> {
    if (this.runners.size < PROJECTIONS.length) await this.readCheckpoints();
    return Promise.all(
      PROJECTIONS.map((projection) => {
        const runner = this.runners.get(projection.name);
        if (runner) return runner.status(head);
        return projectionStatus(this.events, projection, this.builds.get(projection.name)!, this.stored.get(projection.name) ?? START, head);
      }),
    );
  }

  /**
   * Resolves once every projection has committed `position` (here, or in the instance running it).
   * Runners here may stop meanwhile (the lease lost, a build switched): it then waits on the ones
   * that replace them, or on the checkpoints the instance that took over stores.
   */
  async waitFor(position: Position, signal?: AbortSignal): Promise<void> {
    // Given a signal, the wait ends with its reason once it is aborted (a caller's deadline).
    const aborted = signal
      ? new Promise<never>((_, reject) => {
          if (signal.aborted) reject(signal.reason);
          signal.addEventListener('abort', () => reject(signal.reason), { once: true });
        })
      : undefined;
    aborted?.catch(() => {});
    const until = <T>(promise: Promise<T>): Promise<T> => (aborted ? Promise.race([promise, aborted]) : promise);
    for (;;) {
      await until(Promise.all(this.all.map((runner) => runner.waitFor(position))));
      if (this.runners.size < PROJECTIONS.length) await until(this.readCheckpoints());
      if (comparePositions(this.position(), position) >= 0) return;
      await until(new Promise((resolve) => setTimeout(resolve, 50)));
    }
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work);
    this.queue = next.catch(() => {});
    return next;
  }

  /** The stored checkpoints of the projections not run here (a runner here knows its own). */
  private async readCheckpoints(): Promise<void> {
    for (const projection of PROJECTIONS) {
      if (this.runners.has(projection.name)) continue;
      const position = await this.readModels.checkpoint(checkpointName(projection, this.builds.get(projection.name)!));
      this.stored.set(projection.name, position ?? START);
    }
  }

  /** Whether `build` has not caught up with `other` yet (a build removed has nothing to catch up with). */
  private async behind(projection: Projection, build: string, other: string): Promise<boolean> {
    const [reached, read] = await Promise.all([this.readModels.checkpoint(checkpointName(projection, build)), this.readModels.checkpoint(checkpointName(projection, other))]);
    return read !== null && (reached === null || comparePositions(reached, read) < 0);
  }

  private async serve(projection: Projection, build: string): Promise<void> {
    const running = this.running.get(projection.name)!;
    const runner = new ProjectionRunner(this.events, this.readModels, projection, build, {
      logger: this.logger,
      onProgress: () => this.listeners.forEach((listener) => listener(projection.name)),
      fence: running.fence,
      onLeaseLost: () => running.onLeaseLost(),
    });
    await runner.prepare();
    const previous = this.runners.get(projection.name);
    runner.start();
    if (previous) {
      // A switched-to build may be behind the one served (what the service folded in the moment
      // after the replay's last check): reads stay on the old build until the new one holds all it
      // ever committed, or a list would lose its newest leads, and an erasure already answered
      // show undone, while the new one caught up. The old one stops once the new one has nearly
      // caught up, then the new one folds what the old one took last.
      await caughtUp(runner, previous.position, this.stopping.signal);
      await previous.stop();
      await caughtUp(runner, previous.position, this.stopping.signal);
      this.logger?.info({ projection: projection.name, from: previous.build, to: build }, 'projection switched to a new build');
    }
    this.runners.set(projection.name, runner);
    this.builds.set(projection.name, build);
  }

  private async followSwitches(): Promise<void> {
    for (const projection of PROJECTIONS) {
      const build = await servedBuild(this.readModels, projection);
      const current = this.builds.get(projection.name)!;
      if (current === build) continue;
      if (this.running.has(projection.name)) {
        await this.serve(projection, build);
        continue;
      }
      // Run elsewhere: read from the new build once it is as far along as the one read now (see serve).
      if (await this.behind(projection, build, current)) continue;
      this.builds.set(projection.name, build);
    }
    await this.readCheckpoints();
  }
}

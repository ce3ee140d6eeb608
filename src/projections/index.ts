import type { Logger } from 'pino';
import { type EventStore, type Position, START, comparePositions } from '../event-store/port.js';
import type { ReadModelStore } from '../read-models/port.js';
import { PROJECTIONS, type Projection } from './projections.js';
import { ProjectionRunner, checkpointName, collectionName } from './runner.js';

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

/** Makes `build` the one every instance of the service serves (they follow within a second). */
export async function switchBuild(readModels: ReadModelStore, projection: Projection, build: string): Promise<void> {
  // Switches are ordered by their time: the newest one wins, in the checkpoint and in the document.
  const now = Date.now();
  const position = { commit: now, prepare: 0 };
  await readModels.commit(SERVED_BUILDS_CHECKPOINT, position, [
    { op: 'put', collection: SERVED_BUILDS, id: projection.name, position, doc: { tag: build, switched_at: new Date(now).toISOString() } },
  ]);
}

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
 * and the one before it, which a running instance that has not followed the switch yet still
 * reads from (instances follow within a second). A build newer than `keep` that was never switched
 * to (a replay still running, or one that failed) is left alone, and so is every build of another
 * version, which an instance of other code may be serving. Returns the builds removed.
 */
export async function dropBuildsOlderThan(readModels: ReadModelStore, projection: Projection, keep: string): Promise<string[]> {
  const keptTime = buildTime(projection, keep);
  if (keptTime === undefined) return [];
  const older = new Set<string>();
  for (const name of await readModels.collections()) {
    for (const base of projection.collections) {
      const prefix = `${base}_`;
      if (!name.startsWith(prefix)) continue;
      const build = name.slice(prefix.length);
      const time = buildTime(projection, build);
      if (time !== undefined && time < keptTime) older.add(build);
    }
  }
  const dropped = [...older].sort((a, b) => buildTime(projection, a)! - buildTime(projection, b)!);
  for (const build of dropped) {
    for (const base of projection.collections) await readModels.drop(collectionName(base, build));
    // A build that never wrote a document (no feedback yet) has a checkpoint no collection names.
    await readModels.resetCheckpoint(checkpointName(projection, build));
  }
  return dropped;
}

/**
 * Every projection of the service, running inside `leadpost serve`. Each serves the build last
 * switched to; when `leadpost replay` has rebuilt one and switched to it, the running service notices
 * within a second, moves its runner onto the new build and answers from it.
 */
export class Projections {
  private runners = new Map<string, ProjectionRunner>();
  private timer: NodeJS.Timeout | undefined;
  private checking: Promise<void> = Promise.resolve();

  constructor(
    private readonly events: EventStore,
    private readonly readModels: ReadModelStore,
    private readonly logger?: Logger,
    private readonly pollMs = 1000,
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

  async start(): Promise<void> {
    for (const projection of PROJECTIONS) await this.serve(projection, await servedBuild(this.readModels, projection));
    const poll = () => {
      this.checking = this.followSwitches().catch((error: unknown) => this.logger?.warn({ err: error }, 'projection tag check failed'));
      void this.checking.then(() => {
        if (this.timer) this.timer = setTimeout(poll, this.pollMs).unref();
      });
    };
    this.timer = setTimeout(poll, this.pollMs).unref();
  }

  async stop(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.checking;
    await Promise.all(this.all.map((runner) => runner.stop()));
  }

  /** The physical collection a base collection is served from. */
  collection(base: string): string {
    for (const runner of this.runners.values()) {
      if (runner.projection.collections.includes(base)) return collectionName(base, runner.build);
    }
    return collectionName(base, 'v1');
  }

  /** The position every projection has reached: what a read-back answer reflects at least. */
  position(): Position {
    return this.all.reduce<Position | null>((low, r) => (low === null || comparePositions(r.position, low) < 0 ? r.position : low), null) ?? START;
  }

  async waitFor(position: Position): Promise<void> {
    await Promise.all(this.all.map((runner) => runner.waitFor(position)));
  }

  private async serve(projection: Projection, build: string): Promise<void> {
    const runner = new ProjectionRunner(this.events, this.readModels, projection, build, {
      logger: this.logger,
      onProgress: () => this.listeners.forEach((listener) => listener(projection.name)),
    });
    await runner.prepare();
    const previous = this.runners.get(projection.name);
    this.runners.set(projection.name, runner);
    runner.start();
    if (previous) {
      await previous.stop();
      this.logger?.info({ projection: projection.name, from: previous.build, to: build }, 'projection switched to a new build');
    }
  }

  private async followSwitches(): Promise<void> {
    for (const projection of PROJECTIONS) {
      const build = await servedBuild(this.readModels, projection);
      if (this.runners.get(projection.name)?.build !== build) await this.serve(projection, build);
    }
  }
}

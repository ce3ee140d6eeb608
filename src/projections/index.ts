import type { Logger } from 'pino';
import { type EventStore, type Position, START, comparePositions } from '../event-store/port.js';
import type { ReadModelStore } from '../read-models/port.js';
import { PROJECTIONS, type Projection } from './projections.js';
import { ProjectionRunner, collectionName } from './runner.js';

export { PROJECTIONS } from './projections.js';

/** The tag a projection version builds into and is served from by default: `v1`. */
export const versionTag = (projection: Projection): string => `v${projection.version}`;

// Which build of each projection is served lives in the read-model store, so every instance
// and the replay CLI agree on it. A switch is a `put` at a newer position than the last one.
const TAGS = 'projection_tags';
const TAGS_CHECKPOINT = '__projection_tags';

export async function activeTag(readModels: ReadModelStore, projection: Projection): Promise<string> {
  const doc = await readModels.get(TAGS, projection.name);
  const tag = typeof doc?.tag === 'string' ? doc.tag : undefined;
  // A tag of another version is a build of other code: this version serves its own.
  return tag && (tag === versionTag(projection) || tag.startsWith(`${versionTag(projection)}_`)) ? tag : versionTag(projection);
}

export async function switchTag(readModels: ReadModelStore, projection: Projection, tag: string): Promise<void> {
  // Switches are ordered by their time: the newest one wins, in the checkpoint and in the document.
  const now = Date.now();
  const position = { commit: now, prepare: 0 };
  await readModels.commit(TAGS_CHECKPOINT, position, [
    { op: 'put', collection: TAGS, id: projection.name, position, doc: { tag, switched_at: new Date(now).toISOString() } },
  ]);
}

/**
 * Every projection of the service, running inside `leadpost serve`. Each serves the build its tag
 * names; when `leadpost replay` has rebuilt one and switched the tag, the running service notices
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
    for (const projection of PROJECTIONS) await this.serve(projection, await activeTag(this.readModels, projection));
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
      if (runner.projection.collections.includes(base)) return collectionName(base, runner.tag);
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

  private async serve(projection: Projection, tag: string): Promise<void> {
    const runner = new ProjectionRunner(this.events, this.readModels, projection, tag, {
      logger: this.logger,
      onProgress: () => this.listeners.forEach((listener) => listener(projection.name)),
    });
    await runner.prepare();
    const previous = this.runners.get(projection.name);
    this.runners.set(projection.name, runner);
    runner.start();
    if (previous) {
      await previous.stop();
      this.logger?.info({ projection: projection.name, from: previous.tag, to: tag }, 'projection switched to a new build');
    }
  }

  private async followSwitches(): Promise<void> {
    for (const projection of PROJECTIONS) {
      const tag = await activeTag(this.readModels, projection);
      if (this.runners.get(projection.name)?.tag !== tag) await this.serve(projection, tag);
    }
  }
}

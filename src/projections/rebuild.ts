import { type EventStore, type Position, START, comparePositions } from '../event-store/port.js';
import type { ReadModelStore } from '../read-models/port.js';
import type { Projection } from './projections.js';
import { REMEMBERED_LEADS, type ReceivedLeads, ProjectionRunner } from './runner.js';
import { TwoGenerationCache } from '../two-generation-cache.js';
import type { LeadReceived } from '../events/lead-events.js';
import { switchUnlessNewerServed, versionBuild } from './index.js';

/**
 * How a rebuild opens an embedded read-model store. A rebuild writes all over its tables, so it
 * keeps more of them in its page cache than the service, which keeps the default for its memory;
 * and the rebuild is the only writer of its new builds, so its commits can be stored on their own
 * thread while the next batch is folded.
 */
export const REBUILD_STORE_OPTIONS = { cacheMiB: 64, commitThread: true } as const;

/** Events a rebuild reads from `$all` at a time. */
const READ_PAGE = 5000;

export interface RebuildProgress {
  readonly projection: string;
  readonly position: Position;
  readonly events: number;
  /** True once, when this projection has caught up and has its indexes. */
  readonly done: boolean;
}

export interface RebuildOptions {
  /** Events per read-model commit. */
  readonly batchSize?: number;
  /** Name of each projection's build; default `v<version>_r<now>`, a new build beside the served one. */
  readonly build?: (projection: Projection) => string;
  readonly onProgress?: (progress: RebuildProgress) => void;
}

export interface RebuiltProjection {
  readonly projection: Projection;
  readonly build: string;
  readonly position: Position;
  readonly events: number;
}

/**
 * Rebuilds projections from the first event into new builds, all at once from one read of `$all`:
 * each event is read and decoded once and handed to every projection (reading and decoding are a
 * large part of a rebuild, and runners each following `$all` on their own drift apart and read it
 * again). Indexes are created after the rebuild has caught up, over
 * full tables, unless the store pipelines its commits (then its commit thread maintains them).
 * Events appended meanwhile are followed until every build has caught up with the head; switching
 * the service over is the caller's choice. A failed read-model commit fails the rebuild (run it
 * again: a new build starts clean).
 */
export async function rebuildProjections(
  events: EventStore,
  readModels: ReadModelStore,
  projections: readonly Projection[],
  options: RebuildOptions = {},
): Promise<RebuiltProjection[]> {
  const started = Date.now();
  const buildOf = options.build ?? ((projection: Projection) => `${versionBuild(projection)}_r${started}`);
  // One memory of recent leads for all of them, as large as theirs would be together.
  const receivedLeads: ReceivedLeads = new TwoGenerationCache(REMEMBERED_LEADS * projections.length);
  const runners = projections.map(
    (projection) =>
      new ProjectionRunner(events, readModels, projection, buildOf(projection), {
        receivedLeads,
        batchSize: options.batchSize ?? 5000,
        // A store that pipelines commits writes on its own thread, which has time to spare while
        // this one folds: it keeps the indexes as it goes. Otherwise they are built at the end.
        deferIndexes: !readModels.pipelinedCommits,
        onProgress: (position, handled) => options.onProgress?.({ projection: projection.name, position, events: handled, done: false }),
      }),
  );
  try {
    for (const runner of runners) await runner.prepare();
    const from = runners.reduce<Position | null>((low, r) => (low === null || comparePositions(r.position, low) < 0 ? r.position : low), null) ?? START;
    let target = await events.headPosition();
    let position = from;
    // Read a page at a time rather than through a subscription: an async iteration per event
    // costs more than the event's fold in some projections.
    while (comparePositions(position, target) < 0) {
      const page = await events.readAll({ fromPosition: position, maxCount: READ_PAGE });
      if (page.length === 0) break;
      for (let i = 0; i < page.length; i++) {
        const event = page[i]!;
        // Remembered once for every runner (see RunnerOptions.receivedLeads).
        if (event.type === 'LeadReceived') receivedLeads.set((event.data as LeadReceived['data']).lead_id, event.data as LeadReceived['data']);
        for (let r = 0; r < runners.length; r++) {
          const taking = runners[r]!.feed(event);
          if (taking) await taking;
        }
      }
      position = page[page.length - 1]!.position;
      // At the head read last: follow what was appended since, if anything.
      if (comparePositions(position, target) >= 0) target = await events.headPosition();
    }
  } finally {
    // Commits what each runner still holds.
    await Promise.all(runners.map((runner) => runner.stop()));
  }
  for (const runner of runners) {
    await runner.createIndexes();
    options.onProgress?.({ projection: runner.projection.name, position: runner.position, events: runner.handledEvents, done: true });
  }
  return runners.map((runner) => ({ projection: runner.projection, build: runner.build, position: runner.position, events: runner.handledEvents }));
}

/**
 * Switches the service to a rebuilt `build` (see switchUnlessNewerServed), folding it on to the
 * head first whenever the served build has got ahead of it meanwhile.
 */
export function switchCaughtUp(events: EventStore, readModels: ReadModelStore, projection: Projection, build: string): Promise<{ switched: boolean; previous: string }> {
  const catchUp = () => rebuildProjections(events, readModels, [projection], { build: () => build }).then(() => {});
  return switchUnlessNewerServed(readModels, projection, build, catchUp);
}

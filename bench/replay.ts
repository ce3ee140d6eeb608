import { readFileSync } from 'node:fs';
import { type EventStore, openEventStore } from '../src/event-store/index.js';
import { PROJECTIONS, type Projection } from '../src/projections/projections.js';
import { REBUILD_STORE_OPTIONS, rebuildProjections } from '../src/projections/rebuild.js';
import { EmbeddedReadModelStore } from '../src/read-models/embedded.js';
import { seedLeads } from '../test/support/seed-leads.js';
import { tempDir } from '../test/support/tmp.js';
import { round } from './stats.js';

export interface ReplayResult {
  readonly projection: string;
  readonly events: number;
  readonly seconds: number;
  readonly eventsPerSecond: number;
  /** CPU time of the whole process over the replay: wall time on a quiet machine, and a fair figure on a busy one. */
  readonly cpuSeconds: number;
  /** CPU per event: steadier than events/s on a VM whose speed drifts, and comparable across parts. */
  readonly cpuMicrosPerEvent: number;
  /**
   * Of which the main thread (reading, decoding, folding, stringifying) and the other threads: the
   * read models' commit thread and V8's own (the collector's helpers, which a profile of the main
   * thread does not show). Undefined where the system does not say (Linux's /proc does).
   */
  readonly mainThreadMicrosPerEvent: number | undefined;
  readonly otherThreadsMicrosPerEvent: number | undefined;
}

/** CPU seconds of this process's main thread so far, from /proc (in clock ticks of 10 ms); undefined elsewhere. */
function mainThreadCpuSeconds(): number | undefined {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces: utime and stime are the 12th and 13th.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return undefined;
  }
}

/** Rebuilds `projections` from position 0 into fresh read models, side by side, as `leadpost replay` does. */
async function timedRebuild(store: EventStore, readModels: EmbeddedReadModelStore, projections: readonly Projection[], build: string): Promise<ReplayResult> {
  const cpu0 = process.cpuUsage();
  const main0 = mainThreadCpuSeconds();
  const t0 = performance.now();
  const rebuilt = await rebuildProjections(store, readModels, projections, { build: () => build });
  const seconds = (performance.now() - t0) / 1000;
  const cpu = process.cpuUsage(cpu0);
  const main1 = mainThreadCpuSeconds();
  const events = rebuilt[0]!.events;
  const cpuMicros = cpu.user + cpu.system;
  const mainMicros = main0 === undefined || main1 === undefined ? undefined : (main1 - main0) * 1e6;
  return {
    projection: projections.length === 1 ? projections[0]!.name : `all ${projections.length}, side by side`,
    events,
    seconds: round(seconds),
    eventsPerSecond: Math.round(events / seconds),
    cpuSeconds: round((cpu.user + cpu.system) / 1e6),
    cpuMicrosPerEvent: round(cpuMicros / events),
    mainThreadMicrosPerEvent: mainMicros === undefined ? undefined : round(mainMicros / events),
    otherThreadsMicrosPerEvent: mainMicros === undefined ? undefined : round((cpuMicros - mainMicros) / events),
  };
}

/** Each projection rebuilt alone, then all of them at once (what `leadpost replay` runs by default). */
async function replayEach(store: EventStore, readModels: EmbeddedReadModelStore, build: string): Promise<ReplayResult[]> {
  const results: ReplayResult[] = [];
  for (const projection of PROJECTIONS) results.push(await timedRebuild(store, readModels, [projection], `${build}_one`));
  results.push(await timedRebuild(store, readModels, PROJECTIONS, `${build}_all`));
  return results;
}

/**
 * Writes about `events` lead events into a fresh embedded store, then rebuilds each projection from
 * 0. The hard dataset holds only the posts' events (nearly every event makes a new document in
 * each projection); the realistic one also what follows them: deliveries, feedback, returns.
 */
export async function benchReplay(events: number, dataset: 'hard' | 'realistic'): Promise<ReplayResult[]> {
  const dir = tempDir('bench-replay');
  // As the service and `leadpost replay` open it: behind the event codec, with the key store, so
  // the leads are written with their personal fields encrypted (the replay leaves them sealed).
  const store = await openEventStore({ dataDir: dir.path });
  const started = performance.now();
  const { events: written, leads } = await seedLeads(store, { events, afterSale: dataset === 'realistic', viaCodec: true });
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  console.log(`  ${dataset}: wrote ${written.toLocaleString('en-US')} events of ${leads.toLocaleString('en-US')} leads in ${seconds} s`);
  // As `leadpost replay` opens them.
  const readModels = EmbeddedReadModelStore.open(dir.path, REBUILD_STORE_OPTIONS);
  try {
    return await replayEach(store, readModels, 'bench');
  } finally {
    await readModels.close();
    await store.close();
    dir.remove();
  }
}

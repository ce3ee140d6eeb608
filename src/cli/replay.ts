import { loadRecordedConfig } from '../config.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';
import { type Position, openEventStore } from '../event-store/index.js';
import { PROJECTIONS, dropBuild, dropBuildsOlderThan } from '../projections/index.js';
import { REBUILD_STORE_OPTIONS, type RebuildProgress, rebuildProjections, switchCaughtUp } from '../projections/rebuild.js';
import { openReadModelStore } from '../read-models/index.js';

const USAGE = `usage: leadpost replay [--projection NAME]

Rebuilds read models from the event store into new collections (a new build of each projection),
all projections side by side from one read of the events, with progress, then switches the
service over to them. A running service keeps answering from the
old build until the new one has caught up, then follows the switch within a second.
After the switch, builds older than the one served before it are removed: the new build and
the previous one are kept.
Projections: ${PROJECTIONS.map((p) => p.name).join(', ')} (default: all).`;

/** A CLI's output, where stdout may be a terminal (a progress bar then). */
type Io = CliIo & { readonly out: CliIo['out'] & { readonly isTTY?: boolean } };

/**
 * Progress of a rebuild of several projections at once: on a terminal one bar for the slowest of
 * them, elsewhere a plain line per projection every few seconds, and a final line for each.
 */
function progress(io: Io, head: Position) {
  const started = Date.now();
  const latest = new Map<string, RebuildProgress>();
  let lastLines = 0;
  const line = (p: RebuildProgress) => {
    const seconds = Math.max((Date.now() - started) / 1000, 0.001);
    const rate = p.events / seconds;
    // Commit positions grow with the log, so their ratio is how far along the rebuild is.
    const fraction = p.done || head.commit <= 0 ? 1 : Math.min(1, Math.max(0, p.position.commit / head.commit));
    const eta = fraction > 0 && fraction < 1 ? (seconds / fraction) * (1 - fraction) : 0;
    return {
      fraction,
      text: `${p.projection}: ${(fraction * 100).toFixed(1)}% ${p.events.toLocaleString('en-US')} events ${Math.round(rate).toLocaleString('en-US')} events/s ETA ${eta.toFixed(0)}s`,
    };
  };
  return (update: RebuildProgress) => {
    latest.set(update.projection, update);
    if (io.out.isTTY) {
      const slowest = [...latest.values()].map(line).sort((a, b) => a.fraction - b.fraction)[0]!;
      const width = 30;
      const filled = Math.round(slowest.fraction * width);
      io.out.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${slowest.text}\x1b[K`);
      if (update.done) io.out.write(`\r${line(update).text}\x1b[K\n`);
    } else if (update.done) {
      io.out.write(`${line(update).text}\n`);
    } else if (Date.now() - lastLines >= 2000) {
      lastLines = Date.now();
      for (const p of latest.values()) io.out.write(`${line(p).text}\n`);
    }
  };
}

export async function runReplayCommand(args: string[], io: Io = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let selected = PROJECTIONS;
  try {
    const { values } = readArgs(args, { projection: { type: 'string' }, help: { type: 'boolean', short: 'h' } });
    if (values.help) {
      io.out.write(`${USAGE}\n`);
      return 0;
    }
    if (values.projection !== undefined) {
      const projection = PROJECTIONS.find((p) => p.name === values.projection);
      // Named, never quoted: a value pasted in the wrong place may be a consumer's contact.
      if (!projection) throw new UsageError(`--projection must be one of ${PROJECTIONS.map((p) => p.name).join(', ')}`);
      selected = [projection];
    }
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost replay: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  const config = loadRecordedConfig(env);
  const events = await openEventStore(config);
  const readModels = await openReadModelStore(config, REBUILD_STORE_OPTIONS);
  try {
    const show = progress(io, await events.headPosition());
    const rebuilt = await rebuildProjections(events, readModels, selected, { onProgress: show });
    for (const { projection, build } of rebuilt) {
      const { switched, previous } = await switchCaughtUp(events, readModels, projection, build);
      if (!switched) {
        // Another replay, started after this one, switched to its build first: this one is no fresher.
        await dropBuild(readModels, projection, build);
        io.out.write(`${projection.name}: not switched: build ${previous}, made by a replay started after this one, is served; removed this replay's build ${build}\n`);
        continue;
      }
      io.out.write(`${projection.name}: now served from build ${build}\n`);
      const dropped = await dropBuildsOlderThan(readModels, projection, previous);
      if (dropped.length > 0) io.out.write(`${projection.name}: removed older builds ${dropped.join(', ')} (kept ${build} and ${previous})\n`);
    }
    return 0;
  } finally {
    await readModels.close();
    await events.close();
  }
}

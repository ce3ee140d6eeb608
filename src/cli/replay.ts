import { loadConfig } from '../config.js';
import { type Position, comparePositions, openEventStore } from '../event-store/index.js';
import { PROJECTIONS, switchTag, versionTag } from '../projections/index.js';
import { ProjectionRunner } from '../projections/runner.js';
import { openReadModelStore } from '../read-models/index.js';

const USAGE = `usage: leadpost replay [--projection NAME]

Rebuilds read models from the event store into new collections (a new build of each projection),
with progress, then switches the service over to them. A running service keeps answering from the
old build until the new one has caught up, then follows the switch within a second.
Projections: ${PROJECTIONS.map((p) => p.name).join(', ')} (default: all).`;

interface Io {
  out: NodeJS.WritableStream & { isTTY?: boolean };
  err: { write(text: string): unknown };
}

/** Progress of one rebuild: a bar on a terminal, a plain line every few seconds otherwise. */
function progress(io: Io, name: string, head: Position) {
  const started = Date.now();
  let lastLine = 0;
  const write = (position: Position, events: number, final: boolean) => {
    const seconds = Math.max((Date.now() - started) / 1000, 0.001);
    const rate = events / seconds;
    // Commit positions grow with the log, so their ratio is how far along the rebuild is.
    const fraction = head.commit <= 0 ? 1 : Math.min(1, Math.max(0, position.commit / head.commit));
    const eta = fraction > 0 && fraction < 1 ? (seconds / fraction) * (1 - fraction) : 0;
    const text = `${name}: ${(fraction * 100).toFixed(1)}% ${events.toLocaleString('en-US')} events ${Math.round(rate).toLocaleString('en-US')} events/s ETA ${eta.toFixed(0)}s`;
    if (io.out.isTTY) {
      const width = 30;
      const filled = Math.round(fraction * width);
      io.out.write(`\r[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${text}${final ? '\n' : ''}`);
    } else if (final || Date.now() - lastLine >= 2000) {
      lastLine = Date.now();
      io.out.write(`${text}\n`);
    }
  };
  return write;
}

export async function runReplayCommand(args: string[], io: Io = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  if (args.includes('--help') || args.includes('-h')) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  let selected = PROJECTIONS;
  if (args.length > 0) {
    const name = args[0] === '--projection' ? args[1] : undefined;
    const projection = PROJECTIONS.find((p) => p.name === name);
    if (!projection || args.length !== 2) {
      io.err.write(`leadpost replay: ${name ? `unknown projection '${name}'` : 'bad arguments'}\n\n${USAGE}\n`);
      return 2;
    }
    selected = [projection];
  }
  const config = loadConfig(env);
  const events = await openEventStore(config);
  const readModels = await openReadModelStore(config);
  try {
    for (const projection of selected) {
      const tag = `${versionTag(projection)}_r${Date.now()}`;
      const head = await events.headPosition();
      const show = progress(io, projection.name, head);
      const runner = new ProjectionRunner(events, readModels, projection, tag, { batchSize: 2000, onProgress: (p, n) => show(p, n, false) });
      await runner.prepare();
      runner.start();
      await runner.waitFor(head);
      // Events appended while rebuilding: follow until caught up, then hand over.
      for (let latest = await events.headPosition(); comparePositions(runner.position, latest) < 0; latest = await events.headPosition()) {
        await runner.waitFor(latest);
      }
      await runner.stop();
      show(runner.position, runner.handledEvents, true);
      await switchTag(readModels, projection, tag);
      io.out.write(`${projection.name}: now served from build ${tag}\n`);
    }
    return 0;
  } finally {
    await readModels.close();
    await events.close();
  }
}

import { loadConfig } from '../config.js';
import { openEventStore } from '../event-store/index.js';
import type { CliIo } from './io.js';

const USAGE = `usage: leadpost events STREAM [--json]

Prints the events of one stream (e.g. lead-42, api-keys, lead-id-blocks) in revision order:
revision, type, time and data, then the metadata. --json: one JSON object per line.`;

/** `leadpost events STREAM`: a stream's events, for inspection by an engineer. */
export async function runEventsCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  const json = args.includes('--json');
  const rest = args.filter((a) => a !== '--json');
  if (rest.includes('--help') || rest.includes('-h')) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  if (rest.length !== 1 || rest[0]!.startsWith('-')) {
    io.err.write(`leadpost events: give exactly one stream name\n\n${USAGE}\n`);
    return 2;
  }
  const stream = rest[0]!;
  const store = await openEventStore(loadConfig(env));
  try {
    const events = await store.readStream(stream);
    if (events.length === 0) {
      io.err.write(`leadpost events: stream '${stream}' has no events\n`);
      return 1;
    }
    for (const event of events) {
      if (json) {
        io.out.write(`${JSON.stringify({ ...event, created: new Date(event.created).toISOString() })}\n`);
      } else {
        io.out.write(`#${event.revision} ${event.type} ${new Date(event.created).toISOString()} (id ${event.id}, $all ${event.position.commit}/${event.position.prepare})\n`);
        io.out.write(`  data:     ${JSON.stringify(event.data)}\n  metadata: ${JSON.stringify(event.metadata)}\n`);
      }
    }
    return 0;
  } finally {
    await store.close();
  }
}

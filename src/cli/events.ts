import { loadRecordedConfig } from '../config.js';
import { type RecordedEvent, openEventStore } from '../event-store/index.js';
import { openLead } from '../events/codec/index.js';
import { type StoredLead, scrubbedLead } from '../leads/lead.js';
import { type PersonalDataKeys, openPersonalDataKeys } from '../personal-data/index.js';
import type { CliIo } from './io.js';

const USAGE = `usage: leadpost events STREAM [--json]

Prints the events of one stream (e.g. lead-42, api-keys, lead-id-blocks) in revision order:
revision, type, time and data, then the metadata. --json: one JSON object per line.
A lead's personal fields are shown opened (or as erased: true once erased).`;

/**
 * The event with a LeadReceived's personal fields opened, for the engineer at the machine; not
 * opened once the stream records the lead's erasure (a key may still be cached elsewhere).
 */
async function opened(keys: PersonalDataKeys, event: RecordedEvent, erased: boolean): Promise<RecordedEvent> {
  const data = event.data as { lead_id?: unknown; lead?: unknown } | null;
  if (event.type !== 'LeadReceived' || !data || typeof data.lead !== 'object' || data.lead === null || typeof data.lead_id !== 'number') return event;
  const lead = erased ? scrubbedLead(data.lead as StoredLead) : await openLead(keys, data.lead_id, data.lead as StoredLead);
  return { ...event, data: { ...data, lead } };
}

const SHREDDED = new Set(['LeadPersonalDataErased', 'LeadPersonalDataExpired']);

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
  const config = loadRecordedConfig(env);
  const keys = await openPersonalDataKeys(config);
  const store = await openEventStore(config, { personalData: keys }).catch(async (error: unknown) => {
    await keys.close();
    throw error;
  });
  try {
    const recorded = await store.readStream(stream);
    const erased = recorded.some((event) => SHREDDED.has(event.type));
    const events = await Promise.all(recorded.map((event) => opened(keys, event, erased)));
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
    await keys.close();
  }
}

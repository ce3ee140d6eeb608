import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { tempDir } from '../test/support/tmp.js';
import { percentile, round } from './stats.js';

export interface AppendBenchResult {
  readonly mode: string;
  readonly appendsPerSecond: number;
  readonly eventsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  /** CPU time of the whole process (both threads) per append: comparable between runs when the machine's speed is not. */
  readonly cpuMicrosPerAppend: number;
}

const WRITERS = 50;
const EVENTS_PER_APPEND = 4;

/**
 * How stream names are drawn. `lead ids`: `lead-<n>` from one counter, as the service names leads
 * (ids come in increasing blocks), so new names land at the end of the stream-name index.
 * `50 name ranges`: each writer its own prefix, so every append of a group lands on a different
 * leaf of that index, the way hashed contact-claim streams do.
 */
type Names = 'lead ids' | '50 name ranges';

// Each writer appends new 4-event lead-like streams with expected revision no_stream, back to
// back, the way POST /functions/leads will: durable appends, only the commit strategy differs.
async function run(groupCommit: boolean, seconds: number, names: Names): Promise<AppendBenchResult> {
  const dir = tempDir('bench-events');
  const store = await EmbeddedEventStore.open(dir.path, { groupCommit });
  const latencies: number[] = [];
  let appends = 0;
  let measuring = false;
  let stop = false;
  let nextLead = 1;
  const writer = async (w: number) => {
    for (let i = 0; !stop; i++) {
      const events = Array.from({ length: EVENTS_PER_APPEND }, (_, e) => ({
        type: ['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold'][e]!,
        data: { lead_id: w * 1e7 + i, first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', mobile: '+12025550143', zip: '90210', state: 'CA', price: 42.5 },
        metadata: { trace_id: '0af7651916cd43dd8448eb211c80319c', schema: 1 },
      }));
      const started = performance.now();
      await store.append(names === 'lead ids' ? `lead-${nextLead++}` : `lead-${w}-${i}`, events, { expectedRevision: 'no_stream' });
      if (measuring) {
        latencies.push(performance.now() - started);
        appends++;
      }
    }
  };
  const writers = Array.from({ length: WRITERS }, (_, w) => writer(w));
  await new Promise((r) => setTimeout(r, 1000)); // warm-up
  measuring = true;
  const cpu0 = process.cpuUsage();
  const started = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  measuring = false;
  const elapsed = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpu0);
  stop = true;
  await Promise.all(writers);
  await store.close();
  dir.remove();
  return {
    mode: `${groupCommit ? 'group commit' : 'one commit per append'}, ${names}`,
    appendsPerSecond: Math.round(appends / elapsed),
    eventsPerSecond: Math.round((appends * EVENTS_PER_APPEND) / elapsed),
    p50Ms: round(percentile(latencies, 50), 2),
    p99Ms: round(percentile(latencies, 99), 2),
    cpuMicrosPerAppend: round((cpu.user + cpu.system) / appends, 1),
  };
}

export async function benchEventStore(seconds = 5): Promise<AppendBenchResult[]> {
  return [await run(true, seconds, 'lead ids'), await run(true, seconds, '50 name ranges'), await run(false, seconds, 'lead ids')];
}

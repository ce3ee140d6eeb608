import { statSync } from 'node:fs';
import { hash } from 'node:crypto';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import type { EventData } from '../src/event-store/index.js';
import { leadStream } from '../src/events/lead-events.js';
import { START_NODE_ARGS, runChild } from '../test/support/child.js';
import { consumer, soldLead } from '../test/support/lead-events.js';
import { tempDir } from '../test/support/tmp.js';
import { BIN } from './post-lead.js';

// What `leadpost seal-clear-leads` costs on a data dir an older release left: `leads` sold leads
// whose LeadReceived is in clear (version 1, no contact hashes), each with its two duplicate
// claims under the plain-hash names of that release, and the leads read model built from them.
// The command runs as `npm start` runs the CLI (the same heap cap), in a process of its own.

export interface SealTiming {
  readonly leads: number;
  readonly seconds: number;
  readonly cpuSeconds: number;
  readonly peakRssMb: number;
  readonly sealed: number;
  readonly renamedStreams: number;
  readonly eventsDbMb: string;
  readonly readModelsMb: string;
}

const SEAL_CHILD = fileURLToPath(new URL('./seal-child.js', import.meta.url));
const mb = (file: string) => (statSync(file).size / 1e6).toFixed(1);

/** A sold lead as that release recorded it, with its claims: every consumer its own mobile and e-mail. */
function olderLead(id: number): Array<[stream: string, events: EventData[]]> {
  const mobile = `+1213${String(2_000_000 + (id % 7_000_000)).padStart(7, '0')}`;
  const email = `consumer.${id}@example.com`;
  const [received, ...rest] = soldLead(id, 'b1', 20).map(({ type, data, metadata }) => ({ type, data, metadata }) as EventData);
  const { contacts: _contacts, ...data } = received!.data as Record<string, unknown>;
  const clear = { ...received!, data: { ...data, lead: consumer({ email, mobile, mobile_national: mobile.slice(2) }) }, metadata: { ...received!.metadata, schema: 1 } };
  const claim = (kind: string, value: string): [string, EventData[]] => [
    `contact-${hash('sha256', `${kind}\n${value}`, 'hex')}`,
    [{ type: 'ContactClaimed', data: { lead_id: id, claimed_at: '2026-01-05T17:00:00.000Z' } }],
  ];
  return [[leadStream(id), [clear, ...rest]], claim('mobile', mobile), claim('email', email)];
}

export async function benchSealClearLeads(leads: number): Promise<SealTiming> {
  const dir = tempDir('bench-seal');
  const env = { LEADPOST_DATA_DIR: dir.path };
  try {
    const store = await EmbeddedEventStore.open(dir.path);
    await store.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { from: 1, to: leads, instance: 'older' } }]);
    for (let first = 1; first <= leads; first += 500) {
      const appends = [];
      for (let id = first; id < Math.min(first + 500, leads + 1); id++) for (const [stream, events] of olderLead(id)) appends.push(store.append(stream, events));
      await Promise.all(appends);
    }
    await store.close();
    const replay = await runChild(['replay', '--projection', 'leads'], env, { script: BIN, nodeArgs: [...START_NODE_ARGS] });
    if (replay.code !== 0) throw new Error(`leadpost replay failed: ${replay.stderr}`);
    const before = `${mb(join(dir.path, 'events.db'))} → `;
    const readModelsBefore = `${mb(join(dir.path, 'readmodels.db'))} → `;
    const run = await runChild([], env, { script: SEAL_CHILD, nodeArgs: [...START_NODE_ARGS] });
    const outcome = run.lines.map((line) => JSON.parse(line) as Record<string, number>);
    const cost = outcome.at(-1)!;
    if (run.code !== 0 || cost.code !== 0) throw new Error(`leadpost seal-clear-leads failed: ${run.stderr}`);
    return {
      leads,
      seconds: cost.ms! / 1000,
      cpuSeconds: (cost.userMs! + cost.systemMs!) / 1000,
      peakRssMb: cost.maxRssMb!,
      sealed: outcome[0]!.sealed!,
      renamedStreams: outcome[0]!.renamed_streams!,
      eventsDbMb: before + mb(join(dir.path, 'events.db')),
      readModelsMb: readModelsBefore + mb(join(dir.path, 'readmodels.db')),
    };
  } finally {
    dir.remove();
  }
}

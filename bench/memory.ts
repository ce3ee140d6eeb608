import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { type Position, comparePositions } from '../src/event-store/port.js';
import { PROJECTIONS, versionBuild } from '../src/projections/index.js';
import { checkpointName } from '../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../src/read-models/embedded.js';
import { posts, rssMb, sellableLead, startBenchService } from './post-lead.js';
import { seedLeadEvents } from '../test/support/seed-leads.js';

export interface MemoryPoint {
  readonly after: string;
  readonly leadsInStore: number;
  /** RSS of each serve process: `all` for one process with every role, else one column per role. */
  readonly [process: string]: string | number;
}

// Lead ids the seeded leads use: far above the ids the service hands out from its HiLo blocks.
const SEEDED_IDS_FROM = 1_000_000_000;

/** Posts `amount` unique sellable leads, the first numbered `from`; the number answered 2xx. */
async function post(url: string, apiKey: string, from: number, amount: number): Promise<number> {
  return (await posts(url, { 'x-api-key': apiKey }, sellableLead, { n: from }, { amount }))['2xx'];
}

/** Waits until every projection of the service has committed everything up to `head`. */
export async function projected(dataDir: string, head: Position): Promise<void> {
  const readModels = EmbeddedReadModelStore.open(dataDir);
  try {
    for (const projection of PROJECTIONS) {
      const checkpoint = checkpointName(projection, versionBuild(projection));
      for (;;) {
        const reached = await readModels.checkpoint(checkpoint);
        if (reached && comparePositions(reached, head) >= 0) break;
        await new Promise((r) => setTimeout(r, 250));
      }
    }
  } finally {
    await readModels.close();
  }
}

/**
 * The service's resident memory as leads accumulate: at start, after `httpLeads` posted over HTTPS,
 * and after the store holds `totalLeads`. Posting a million leads one request at a time would take
 * most of an hour here, so the leads beyond `httpLeads` are written straight into the event store
 * (the same events the service writes) while the service runs; its projections read every one of
 * them, and a last round of posts runs through the whole request path on top of the large store.
 *
 * `split`: the roles in three processes on one data dir (api, projector, delivery), as a deployment
 * on more than one machine runs them; each one's RSS is measured.
 */
export async function benchMemory(httpLeads: number, totalLeads: number, split = false): Promise<MemoryPoint[]> {
  const service = await startBenchService(split ? { roles: 'api' } : {});
  const points: MemoryPoint[] = [];
  const processes: Array<[string, number]> = [[split ? 'api' : 'all', service.pid]];
  const mark = (after: string, leadsInStore: number) =>
    points.push({ after, leadsInStore, ...Object.fromEntries(processes.map(([name, pid]) => [`${name} RSS MB`, rssMb(pid)])) });
  try {
    if (split) for (const role of ['projector', 'delivery']) processes.push([role, (await service.sibling(role)).pid]);
    await new Promise((r) => setTimeout(r, 2000));
    mark('start', 0);
    let posted = 0;
    for (const step of new Set([10_000, 25_000, 50_000, httpLeads].filter((s) => s <= httpLeads))) {
      posted += await post(service.url, service.apiKey, posted, step - posted);
      mark(`${posted.toLocaleString('en-US')} posted`, posted);
    }
    const seededLeads = Math.max(0, totalLeads - posted - 10_000);
    if (seededLeads > 0) {
      const store = await EmbeddedEventStore.open(service.dataDir);
      const started = performance.now();
      // About 3.6 events per lead: most are sold (4 events), a tenth are duplicates (2).
      await seedLeadEvents(store, seededLeads * 3.6, SEEDED_IDS_FROM);
      const head = await store.headPosition();
      await store.close();
      await projected(service.dataDir, head);
      console.log(`  seeded ${seededLeads.toLocaleString('en-US')} leads and the service projected them in ${((performance.now() - started) / 1000).toFixed(0)} s`);
      mark('seeded, projected', posted + seededLeads);
      posted += await post(service.url, service.apiKey, posted, 10_000);
      mark('10,000 more posted', posted + seededLeads);
    }
    return points;
  } finally {
    await service.stop();
  }
}

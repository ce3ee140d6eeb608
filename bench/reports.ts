import { Agent, request } from 'node:https';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../src/keys/api-keys.js';
import { changeKeys } from '../src/keys/key-stream.js';
import { seedLeads } from '../test/support/seed-leads.js';
import { projected } from './memory.js';
import { rssMb, startBenchService } from './post-lead.js';
import { percentile } from './stats.js';

interface ReportLatency {
  readonly report: string;
  readonly requests: number;
  readonly rowsPerPage: number;
  readonly p50Ms: number;
  readonly maxMs: number;
}

export interface ReportsResult {
  readonly leads: number;
  readonly events: number;
  /** From the first lead written to every projection at the head of the store. */
  readonly projectedSeconds: number;
  readonly latency: ReportLatency[];
  /** The service's RSS, sampled every half second from its start to its last answer. */
  readonly serverRssMb: { readonly atStart: number; readonly whileProjecting: number; readonly whileReporting: number };
}

const FROM = '2026-10-01';
// Lead ids the seeded leads use: far above the ids the service hands out from its HiLo blocks.
const SEEDED_IDS_FROM = 1_000_000_000;
const TO = '2026-10-30';
const DAYS_MS = 30 * 86_400_000;

/** Waits until every projection the service serves has committed everything up to `head`. */
function get(agent: Agent, url: URL, apiKey: string): Promise<{ status: number; body: { items?: unknown[]; next_cursor?: string | null } }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { agent, headers: { 'x-api-key': apiKey } }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) as { items?: unknown[]; next_cursor?: string | null } }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

/**
 * `pages` pages of one report one after the other, each from the cursor the last gave (the first
 * page again once a report has no more), timed from request to the last byte of the answer.
 */
async function timePages(agent: Agent, base: string, apiKey: string, query: string, pages: number): Promise<ReportLatency> {
  const times: number[] = [];
  let cursor: string | null = null;
  let rows = 0;
  for (let i = 0; i < pages; i++) {
    const url = new URL(`${base}/functions/reports/summary?${query}${cursor ? `&cursor=${cursor}` : ''}`);
    const t0 = performance.now();
    const reply = await get(agent, url, apiKey);
    times.push(performance.now() - t0);
    if (reply.status !== 200) throw new Error(`GET ${url.pathname}${url.search}: ${reply.status} ${JSON.stringify(reply.body).slice(0, 300)}`);
    rows = Math.max(rows, reply.body.items?.length ?? 0);
    cursor = reply.body.next_cursor ?? null;
  }
  return { report: query, requests: pages, rowsPerPage: rows, p50Ms: Math.round(percentile(times, 50)), maxMs: Math.round(Math.max(...times)) };
}

/**
 * Reports over a large store: `leads` leads over 30 days, each with its own s1, are written
 * straight into the event store of a running `leadpost serve` (the events the service writes); the
 * service projects them all, then a 30-day report by day and sid, and pages of a report by
 * s1, are timed over HTTPS. The service's RSS is sampled throughout.
 */
export async function benchReports(leads: number, pages: number): Promise<ReportsResult> {
  let analystKey = '';
  const service = await startBenchService({
    prepareStore: async (store) => {
      const { id, secret } = newKeyMaterial();
      await changeKeys(store, (state) => issueKey(state, { role: 'analyst', name: 'bench-analyst', now: Date.now(), id, secret }));
      analystKey = formatKey(id, secret);
    },
  });
  const rss = { atStart: rssMb(service.pid), whileProjecting: 0, whileReporting: 0 };
  let phase: 'whileProjecting' | 'whileReporting' = 'whileProjecting';
  const sampler = setInterval(() => (rss[phase] = Math.max(rss[phase], rssMb(service.pid))), 500);
  const agent = new Agent({ keepAlive: true, rejectUnauthorized: false });
  try {
    // Written while the service runs (a second writer of its data dir, as another instance would
    // be): a service started on a large store takes a while before it listens.
    const started = performance.now();
    const store = await EmbeddedEventStore.open(service.dataDir);
    const shape = { receivedAt: (n: number) => new Date(Date.parse(`${FROM}T00:00:00Z`) + Math.floor(((n - SEEDED_IDS_FROM) * DAYS_MS) / leads)), s1: (n: number) => `click-${n}` };
    const seeded = await seedLeads(store, { leads, shape, firstLeadId: SEEDED_IDS_FROM });
    const head = await store.headPosition();
    await store.close();
    console.log(`  wrote ${seeded.leads.toLocaleString('en-US')} leads (${seeded.events.toLocaleString('en-US')} events) in ${((performance.now() - started) / 1000).toFixed(1)} s`);
    await projected(service.dataDir, head);
    const projectedSeconds = Math.round((performance.now() - started) / 1000);
    phase = 'whileReporting';
    const base = new URL(service.url).origin;
    const latency = [
      await timePages(agent, base, analystKey, `from=${FROM}&to=${TO}&group_by=day,sid&limit=500`, pages),
      await timePages(agent, base, analystKey, `from=${FROM}&to=${TO}&group_by=s1&limit=500`, pages),
      await timePages(agent, base, analystKey, `from=${FROM}&to=${TO}&group_by=s1`, pages),
    ];
    rss.whileReporting = Math.max(rss.whileReporting, rssMb(service.pid));
    return { leads: seeded.leads, events: seeded.events, projectedSeconds, latency, serverRssMb: rss };
  } finally {
    clearInterval(sampler);
    agent.destroy();
    await service.stop();
  }
}

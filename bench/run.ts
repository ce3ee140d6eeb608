import { benchDelivery } from './delivery.js';
import { benchEventStore } from './event-store.js';
import { benchMemory } from './memory.js';
import { type LoadResult, benchBareKoa, benchPostLead } from './post-lead.js';
import { benchReplay } from './replay.js';
import { benchReports } from './reports.js';

// `npm run bench [part…]`: runs the named parts (all by default) and prints one table per part.
const parts: Record<string, () => Promise<void>> = {
  'event-store': async () => {
    console.log('\nEvent store: 4-event appends, 50 concurrent writers, durable (WAL, synchronous=FULL)');
    console.table(await benchEventStore(Number(process.env.BENCH_SECONDS ?? 5)));
  },
  replay: async () => {
    const events = Number(process.env.BENCH_REPLAY_EVENTS ?? 1_000_000);
    console.log(`\nReplay: each projection rebuilt from position 0 over ${events.toLocaleString('en-US')} lead events (embedded stores), on two datasets`);
    for (const dataset of ['hard', 'realistic'] as const) {
      const results = await benchReplay(events, dataset);
      console.table(results);
      // The replay target (150k events/s), row by row: all four side by side do four projections' work from one read.
      console.log(`${dataset}: target >= 150,000 events/s: ${results.map((r) => `${r.projection} ${r.eventsPerSecond >= 150_000 ? 'met' : 'not met'}`).join(', ')}`);
    }
  },
  delivery: async () => {
    console.log('\nWebhook delivery: sale (the supplier\'s 201) to receipt at a healthy local HTTPS buyer endpoint, 500 leads, 20 concurrent posts');
    console.table([await benchDelivery(Number(process.env.BENCH_DELIVERY_LEADS ?? 500))]);
  },
  'post-lead': async () => {
    console.log('\nPOST /functions/leads over HTTPS: 50 keep-alive connections, unique valid sellable leads, all checks on, durable appends');
    const seconds = Number(process.env.BENCH_LOAD_SECONDS ?? 15);
    // Alternating twice, so that a slow spell of a shared machine does not land on one side only.
    // Each round also measures the durability floor: the bare endpoint plus a post's appends.
    const rounds: Array<{ bare: LoadResult; floor: LoadResult; service: LoadResult }> = [];
    for (let round = 0; round < 2; round++) {
      rounds.push({ bare: await benchBareKoa(seconds, 3), floor: await benchBareKoa(seconds, 3, true), service: await benchPostLead(seconds, 3) });
    }
    console.table(rounds.flatMap((r) => [r.bare, r.floor, r.service]));
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const ratio = (of: 'floor' | 'service', field: 'requestsPerSecond' | 'p99Ms') => mean(rounds.map((r) => r[of][field])) / mean(rounds.map((r) => r.bare[field]));
    console.log(
      `service / bare (means of the two rounds): throughput ${ratio('service', 'requestsPerSecond').toFixed(2)}x (target >= 0.70x), p99 ${ratio('service', 'p99Ms').toFixed(1)}x (target <= 2x)`,
    );
    console.log(`durability floor / bare: throughput ${ratio('floor', 'requestsPerSecond').toFixed(2)}x, p99 ${ratio('floor', 'p99Ms').toFixed(1)}x`);
  },
  reports: async () => {
    const leads = Number(process.env.BENCH_REPORT_LEADS ?? 1_000_000);
    console.log(`\nReports over HTTPS with ${leads.toLocaleString('en-US')} leads over 30 days in the store, each with its own s1, projected by the service`);
    const result = await benchReports(leads, Number(process.env.BENCH_REPORT_PAGES ?? 20));
    console.log(`  the service projected ${result.events.toLocaleString('en-US')} events in ${result.projectedSeconds} s`);
    console.table(result.latency);
    console.table([result.serverRssMb]);
    const met = result.latency.every((l) => l.p50Ms <= 250) && Math.max(...Object.values(result.serverRssMb)) <= 250;
    console.log(`target p50 <= 250 ms per report page, server RSS <= 250 MB throughout: ${met ? 'met' : 'not met'}`);
  },
  memory: async () => {
    const httpLeads = Number(process.env.BENCH_MEMORY_HTTP_LEADS ?? 100_000);
    const totalLeads = Number(process.env.BENCH_MEMORY_LEADS ?? 1_000_000);
    console.log(`\nService RSS: at start, after ${httpLeads.toLocaleString('en-US')} leads posted over HTTPS, and with ${totalLeads.toLocaleString('en-US')} leads in the store`);
    console.table(await benchMemory(httpLeads, totalLeads));
  },
};

const wanted = process.argv.slice(2);
for (const name of wanted.length > 0 ? wanted : Object.keys(parts)) {
  const part = parts[name];
  if (!part) {
    console.error(`unknown bench part '${name}'; parts: ${Object.keys(parts).join(', ')}`);
    process.exit(1);
  }
  await part();
}

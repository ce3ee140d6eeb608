import { benchBackup } from './backup.js';
import { benchConsole } from './console.js';
import { benchDelivery, benchDeliveryDrain } from './delivery.js';
import { benchEncryption, benchKeyMaking } from './encryption.js';
import { benchErasure } from './erasure.js';
import { benchEventStore } from './event-store.js';
import { benchMemory } from './memory.js';
import { profileAreas } from './profile-areas.js';
import { benchPingStatic, benchPingWebhooks, pingBody } from './ping.js';
import { type ApiAloneResult, type LoadResult, benchBareKoa, benchPostLead, benchPostLeadApiAlone, benchPostLeadApiOnly, benchShellOnly } from './post-lead.js';
import { benchPostLeadSideBySide } from './post-lead-ab.js';
import { fileURLToPath } from 'node:url';
import { benchReplay } from './replay.js';
import { benchReports } from './reports.js';
import { benchSealClearLeads } from './seal-clear-leads.js';

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
  backup: async () => {
    const events = Number(process.env.BENCH_BACKUP_EVENTS ?? 1_000_000);
    console.log(`\nleadpost backup of a data dir of ${events.toLocaleString('en-US')} lead events (deliveries, feedback, returns) with its read models built`);
    console.table([await benchBackup(events)]);
  },
  delivery: async () => {
    console.log('\nWebhook delivery: sale (the supplier\'s 201) to receipt at a healthy local HTTPS buyer endpoint, 500 leads, 20 concurrent posts');
    console.table([await benchDelivery(Number(process.env.BENCH_DELIVERY_LEADS ?? 500))]);
    const backlog = Number(process.env.BENCH_DRAIN_LEADS ?? 3000);
    console.log(`\nWebhook delivery: a backlog of ${backlog} sold leads, drained by serve --roles delivery beside --roles api and --roles projector (16 attempts in flight)`);
    console.table([await benchDeliveryDrain(backlog)]);
  },
  'post-lead': async () => {
    console.log('\nPOST /functions/leads over HTTPS: 50 keep-alive connections, unique valid sellable leads, all checks on, durable appends');
    const seconds = Number(process.env.BENCH_LOAD_SECONDS ?? 15);
    // Each case is loaded this long before it is measured: a service process still compiles its
    // hot code for its first 5-8 s under load, at up to twice its settled CPU per post.
    const warmup = Number(process.env.BENCH_WARMUP_SECONDS ?? 10);
    // Alternating twice, so that a slow spell of a shared machine does not land on one side only.
    // Each round also measures the durability floor: the bare endpoint plus a post's appends.
    // Each round also runs the service split in two processes: api, and projector plus delivery.
    // And the floor if a sold post's events were one append (the bound of one atomic append per post).
    // And the service's HTTP shell alone, the post answered at once: what the shell costs beside the bare endpoint.
    // And an api-only process with its projector on other cores, as on more than one machine: the
    // post path alone against its floor, then the projector's catch-up on what it took.
    const rounds: Array<{
      bare: LoadResult;
      shell: LoadResult;
      floor: LoadResult;
      merged: LoadResult;
      service: LoadResult;
      apiOnly: LoadResult & { projectorCpuUsPerRequest: number };
      apiAlone: ApiAloneResult;
    }> = [];
    for (let round = 0; round < 2; round++) {
      rounds.push({
        bare: await benchBareKoa(seconds, warmup),
        shell: await benchShellOnly(seconds, warmup),
        floor: await benchBareKoa(seconds, warmup, true),
        merged: await benchBareKoa(seconds, warmup, 'merged'),
        service: await benchPostLead(seconds, warmup),
        apiOnly: await benchPostLeadApiOnly(seconds, warmup),
        apiAlone: await benchPostLeadApiAlone(seconds, warmup),
      });
    }
    console.table(rounds.flatMap((r) => [r.bare, r.shell, r.floor, r.merged, r.service, r.apiOnly, r.apiAlone]));
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    const ratio = (of: 'shell' | 'floor' | 'merged' | 'service' | 'apiOnly' | 'apiAlone', to: 'bare' | 'floor', field: 'requestsPerSecond' | 'p99Ms' | 'serverCpuUsPerRequest') =>
      mean(rounds.map((r) => r[of][field])) / mean(rounds.map((r) => r[to][field]));
    // The post path's targets, each a ratio of means from this run's rounds.
    const targets = [
      { name: 'throughput, service / durability floor', value: ratio('service', 'floor', 'requestsPerSecond'), met: (v: number) => v >= 0.5, target: '>= 0.50x' },
      { name: 'p99, service / durability floor', value: ratio('service', 'floor', 'p99Ms'), met: (v: number) => v <= 2, target: '<= 2.00x' },
      { name: 'server CPU per request, service / bare', value: ratio('service', 'bare', 'serverCpuUsPerRequest'), met: (v: number) => v <= 3, target: '<= 3.00x' },
    ];
    for (const { name, value, met, target } of targets) console.log(`${name}: ${value.toFixed(2)}x (target ${target}) ${met(value) ? 'met' : 'not met'}`);
    const apiCpu = ratio('apiOnly', 'bare', 'serverCpuUsPerRequest');
    console.log(
      `split in two processes: api process CPU per request / bare ${apiCpu.toFixed(2)}x (target <= 3.00x) ${apiCpu <= 3 ? 'met' : 'not met'}; ` +
        `its projector and delivery process ${Math.round(mean(rounds.map((r) => r.apiOnly.projectorCpuUsPerRequest)))} µs per post; ` +
        `throughput / floor ${ratio('apiOnly', 'floor', 'requestsPerSecond').toFixed(2)}x, p99 / floor ${ratio('apiOnly', 'floor', 'p99Ms').toFixed(2)}x`,
    );
    // The post path of one API machine when the projections run on others: the same three ratios.
    const alone = (field: 'requestsPerSecond' | 'p99Ms') => ratio('apiAlone', 'floor', field);
    const catchUp = Math.round(mean(rounds.map((r) => r.apiAlone.catchUpPostsPerSecond)));
    console.log(
      `the api process alone (its projector on other cores, as on more than one machine): throughput / floor ${alone('requestsPerSecond').toFixed(2)}x ` +
        `(target >= 0.50x) ${alone('requestsPerSecond') >= 0.5 ? 'met' : 'not met'}, p99 / floor ${alone('p99Ms').toFixed(2)}x (target <= 2.00x) ${alone('p99Ms') <= 2 ? 'met' : 'not met'}, ` +
        `CPU per request / bare ${ratio('apiAlone', 'bare', 'serverCpuUsPerRequest').toFixed(2)}x; then one projector process caught up at ${catchUp} posts/s ` +
        `(${Math.round(mean(rounds.map((r) => r.apiAlone.catchUpCpuUsPerPost)))} µs of CPU a post): ${(catchUp / mean(rounds.map((r) => r.apiAlone.requestsPerSecond))).toFixed(1)} such API machines per projector`,
    );
    const floorCpu = ratio('floor', 'bare', 'serverCpuUsPerRequest');
    console.log(
      `durability floor / bare: throughput ${ratio('floor', 'bare', 'requestsPerSecond').toFixed(2)}x, p99 ${ratio('floor', 'bare', 'p99Ms').toFixed(1)}x, CPU per request ${floorCpu.toFixed(1)}x` +
        (floorCpu > 3 ? ' (the floor alone is past the 3x CPU target)' : ''),
    );
    console.log(
      `CPU per request / the floor's: the service ${ratio('service', 'floor', 'serverCpuUsPerRequest').toFixed(2)}x, its api process alone ${ratio('apiOnly', 'floor', 'serverCpuUsPerRequest').toFixed(2)}x`,
    );
    console.log(`the service's HTTP shell, post answered at once / bare: throughput ${ratio('shell', 'bare', 'requestsPerSecond').toFixed(2)}x, CPU per request ${ratio('shell', 'bare', 'serverCpuUsPerRequest').toFixed(2)}x`);
    console.log(
      `a post's events in one append / the floor's three: throughput ${ratio('merged', 'floor', 'requestsPerSecond').toFixed(2)}x, ` +
        `p99 ${ratio('merged', 'floor', 'p99Ms').toFixed(2)}x, CPU per request ${ratio('merged', 'floor', 'serverCpuUsPerRequest').toFixed(2)}x`,
    );
  },
  // Only when named: this build against another build's dist (BENCH_COMPARE_DIST), side by side.
  'post-lead-ab': async () => {
    const other = process.env.BENCH_COMPARE_DIST;
    if (!other) throw new Error('post-lead-ab compares this build with the build whose dist folder BENCH_COMPARE_DIST names');
    const slices = Number(process.env.BENCH_SLICES ?? 12);
    const seconds = Number(process.env.BENCH_SLICE_SECONDS ?? 2);
    console.log(`\nPOST /functions/leads, this build and ${other} side by side: every service running, the load to each in turn, ${slices} slices of ${seconds} s`);
    const builds = [
      { name: 'other', dist: other },
      { name: 'this', dist: fileURLToPath(new URL('..', import.meta.url)) },
    ];
    console.table(await benchPostLeadSideBySide(builds, slices, seconds));
  },
  // Not a measurement: reads the server profiles a post-lead run left in BENCH_PROFILE_DIR.
  'profile-areas': async () => {
    const dir = process.env.BENCH_PROFILE_DIR;
    if (!dir) throw new Error('profile-areas reads the .cpuprofile files in BENCH_PROFILE_DIR');
    const { busyMs, startupMs, areas } = profileAreas(dir);
    console.log(`\nServer main thread, busy ${busyMs} ms after start-up (${startupMs} ms): share of each area`);
    console.table(areas);
  },
  encryption: async () => {
    console.log('\nPOST /functions/leads with personal data encrypted, and with the codec sealing nothing, alternated four times');
    const cost = await benchEncryption(Number(process.env.BENCH_LOAD_SECONDS ?? 15), 3);
    console.table(cost.rounds);
    console.log(`server CPU per post, encrypted / in clear: ${cost.cpuRatio.toFixed(3)}x (target <= 1.05x: ${cost.cpuRatio <= 1.05 ? 'met' : 'not met'})`);
    const keys = Number(process.env.BENCH_KEYS ?? 1_000_000);
    console.log(`\nMaking new leads' data keys (batches of 1,024, stored in keys.db) as the key store grows to ${keys.toLocaleString('en-US')} keys`);
    console.table(await benchKeyMaking(keys));
  },
  console: async () => {
    const leads = Number(process.env.BENCH_CONSOLE_LEADS ?? 1_000_000);
    const loads = Number(process.env.BENCH_CONSOLE_LOADS ?? 5);
    console.log(`\nConsole: an analyst's 30-day report by source in headless Chromium, on a store of ${leads.toLocaleString('en-US')} leads; ${loads} cold loads, each then reloaded`);
    const { rows, summary } = await benchConsole(leads, loads);
    console.table(rows);
    console.table(summary);
  },
  ping: async () => {
    console.log('\nPOST /functions/pings over HTTPS: 50 keep-alive connections, unique pings, durable appends');
    const seconds = Number(process.env.BENCH_LOAD_SECONDS ?? 15);
    const bare = await benchBareKoa(seconds, 3, false, pingBody);
    const statics = await benchPingStatic(seconds, 3);
    const webhooks = await benchPingWebhooks(seconds, 3);
    console.table([bare, statics, webhooks]);
    console.log(`pings with static bidders / bare: throughput ${(statics.requestsPerSecond / bare.requestsPerSecond).toFixed(2)}x, p99 ${(statics.p99Ms / bare.p99Ms).toFixed(1)}x`);
    console.log(`ping p99 with three webhook bidders of 20 ms: ${webhooks.p99Ms} ms (PING_DEADLINE_MS 1000 caps it)`);
  },
  erasure: async () => {
    const totalLeads = Number(process.env.BENCH_ERASURE_LEADS ?? 1_000_000);
    console.log(`\nPOST /functions/erasures: a consumer with 100 leads in a store of ${totalLeads.toLocaleString('en-US')} leads, end to end over HTTPS`);
    console.table([await benchErasure(totalLeads, 100)]);
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
  'seal-clear-leads': async () => {
    const leads = Number(process.env.BENCH_SEAL_LEADS ?? 100_000);
    console.log(`\nleadpost seal-clear-leads on ${leads.toLocaleString('en-US')} leads an older release wrote in clear, each with two duplicate claims under plain-hash names (npm start's heap cap)`);
    console.table([await benchSealClearLeads(leads)]);
  },
  'memory-roles': async () => {
    const httpLeads = Number(process.env.BENCH_MEMORY_HTTP_LEADS ?? 100_000);
    const totalLeads = Number(process.env.BENCH_MEMORY_LEADS ?? 1_000_000);
    console.log(`\nRSS of each role in its own process (serve --roles api, projector, delivery on one data dir), as for the memory part`);
    const points = await benchMemory(httpLeads, totalLeads, true);
    console.table(points);
    const worst = Math.max(...points.flatMap((p) => Object.entries(p).filter(([k]) => k.endsWith('RSS MB')).map(([, v]) => Number(v))));
    console.log(`highest RSS of any role: ${worst} MB (target <= 250 MB: ${worst <= 250 ? 'met' : 'not met'})`);
  },
};

const wanted = process.argv.slice(2);
// Every measurement by default; profile-areas and post-lead-ab only when named.
for (const name of wanted.length > 0 ? wanted : Object.keys(parts).filter((part) => part !== 'profile-areas' && part !== 'post-lead-ab')) {
  const part = parts[name];
  if (!part) {
    console.error(`unknown bench part '${name}'; parts: ${Object.keys(parts).join(', ')}`);
    process.exit(1);
  }
  await part();
}

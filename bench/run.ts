import { benchDelivery } from './delivery.js';
import { benchEventStore } from './event-store.js';
import { benchBareKoa, benchPostLead } from './post-lead.js';
import { benchReplay } from './replay.js';

// `npm run bench [part…]`: runs the named parts (all by default) and prints one table per part.
const parts: Record<string, () => Promise<void>> = {
  'event-store': async () => {
    console.log('\nEvent store: 4-event appends, 50 concurrent writers, durable (WAL, synchronous=FULL)');
    console.table(await benchEventStore(Number(process.env.BENCH_SECONDS ?? 5)));
  },
  replay: async () => {
    const events = Number(process.env.BENCH_REPLAY_EVENTS ?? 1_000_000);
    console.log(`\nReplay: each projection rebuilt from position 0 over ${events.toLocaleString('en-US')} lead events (embedded stores)`);
    console.table(await benchReplay(events));
  },
  delivery: async () => {
    console.log('\nWebhook delivery: sale (the supplier\'s 201) to receipt at a healthy local HTTPS buyer endpoint, 500 leads, 20 concurrent posts');
    console.table([await benchDelivery(Number(process.env.BENCH_DELIVERY_LEADS ?? 500))]);
  },
  'post-lead': async () => {
    console.log('\nPOST /functions/leads over HTTPS: 50 keep-alive connections, unique valid sellable leads, all checks on, durable appends');
    const seconds = Number(process.env.BENCH_LOAD_SECONDS ?? 15);
    const bare = await benchBareKoa(seconds, 3);
    const service = await benchPostLead(seconds, 3);
    console.table([bare, service]);
    console.log(`service / bare: throughput ${(service.requestsPerSecond / bare.requestsPerSecond).toFixed(2)}x, p99 ${(service.p99Ms / bare.p99Ms).toFixed(1)}x`);
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

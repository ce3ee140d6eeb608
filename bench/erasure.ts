import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../src/keys/api-keys.js';
import { changeKeys } from '../src/keys/key-stream.js';
import { seedLeadEvents } from '../test/support/seed-leads.js';
import { projected } from './memory.js';
import { posts, startBenchService } from './post-lead.js';
import { CERT_URL } from '../test/support/service.js';

// How long an erasure takes where it matters: a consumer with 100 leads in a store of a million.
// The million are written straight into the event store (as memory.ts does) and projected by the
// running service; the consumer's leads are posted over HTTPS (so they record their contact
// hashes as every post does); then one POST /functions/erasures is timed, end to end.

export interface ErasureTiming {
  readonly leadsInStore: number;
  readonly consumerLeads: number;
  readonly leadsErased: number;
  readonly eraseMs: number;
  /** The same request again: nothing new to erase, only the look. */
  readonly againMs: number;
}

const SEEDED_IDS_FROM = 1_000_000_000;
const CONSUMER = { first_name: 'Grace', last_name: 'Hopper', email: 'grace.hopper@example.com', mobile: '+12135550199' };

async function timed(url: string, apiKey: string, body: unknown): Promise<{ ms: number; answer: { erasure?: { leads_erased: number } } }> {
  const started = performance.now();
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', 'x-api-key': apiKey }, body: JSON.stringify(body) });
  const answer = (await response.json()) as { erasure?: { leads_erased: number } };
  if (response.status >= 300) throw new Error(`erasure answered ${response.status}: ${JSON.stringify(answer)}`);
  return { ms: performance.now() - started, answer };
}

export async function benchErasure(totalLeads: number, consumerLeads: number): Promise<ErasureTiming> {
  const service = await startBenchService();
  try {
    const store = await EmbeddedEventStore.open(service.dataDir);
    const { id, secret } = newKeyMaterial();
    await changeKeys(store, (state) => issueKey(state, { role: 'admin', name: 'bench-admin', now: Date.now(), id, secret }));
    const seeded = Math.max(0, totalLeads - consumerLeads);
    const started = performance.now();
    // About 3.6 events per lead: most are sold (4 events), a tenth are duplicates (2).
    if (seeded > 0) await seedLeadEvents(store, seeded * 3.6, SEEDED_IDS_FROM);
    await projected(service.dataDir, await store.headPosition());
    console.log(`  seeded ${seeded.toLocaleString('en-US')} leads and the service projected them in ${((performance.now() - started) / 1000).toFixed(0)} s`);
    const body = (n: number) => JSON.stringify({ ...CONSUMER, zip: '90210', accident_state: 'CA', certificate_url: CERT_URL, sid: 'bench', s1: `erase-${n}` });
    await posts(service.url, { 'x-api-key': service.apiKey }, body, { n: 0 }, { amount: consumerLeads });
    await projected(service.dataDir, await store.headPosition());
    await store.close();
    const url = service.url.replace('/functions/leads', '/functions/erasures');
    const admin = formatKey(id, secret);
    // The key ring picks a new key up within a second.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const first = await timed(url, admin, { email: CONSUMER.email, mobile: CONSUMER.mobile });
    const again = await timed(url, admin, { email: CONSUMER.email, mobile: CONSUMER.mobile });
    return {
      leadsInStore: seeded + consumerLeads,
      consumerLeads,
      leadsErased: first.answer.erasure?.leads_erased ?? 0,
      eraseMs: Math.round(first.ms),
      againMs: Math.round(again.ms),
    };
  } finally {
    await service.stop();
  }
}

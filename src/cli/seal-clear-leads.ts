import { loadRecordedConfig } from '../config.js';
import { EmbeddedEventStore } from '../event-store/embedded/embedded-event-store.js';
import { codedEventStore, eventCodec } from '../events/codec/index.js';
import { recordSealed, sealClearLeads } from '../personal-data/clear-leads.js';
import { ContactHashes } from '../personal-data/contact-hashes.js';
import { openPersonalDataKeys } from '../personal-data/index.js';
import { dropUnservedBuilds, switchBuild } from '../projections/index.js';
import { leadsProjection } from '../projections/projections.js';
import { REBUILD_STORE_OPTIONS, rebuildProjections } from '../projections/rebuild.js';
import { EmbeddedReadModelStore } from '../read-models/embedded.js';
import { openReadModelStore } from '../read-models/index.js';
import type { CliIo } from './io.js';
import { jsonOnly } from './usage.js';
import { holdServiceLeases } from './service-leases.js';

// `leadpost seal-clear-leads`: the one-time step that makes the leads of releases from before
// encryption erasable (src/personal-data/clear-leads.ts), with the service stopped.

const USAGE = `usage: leadpost seal-clear-leads [--json]

Once, after upgrading from a release that stored leads' personal data in clear, with every
instance of the service stopped: gives each such lead a data key and its contact hashes (so an
erasure or access request finds it, and an erasure shreds it), rewriting its LeadReceived event in
place, sealed; a lead whose personal data was already erased or had expired is sealed with a key
destroyed at once. Then rebuilds the leads read model, removes every read-model build but the
served ones (older builds may hold personal data in clear), and compacts the embedded files, so
that no byte of the old form is left in them. Running it again seals nothing new and does the rest
again. Not for EventStoreDB, whose events cannot be rewritten.
--json: the outcome as one JSON object.`;

export async function runSealClearLeadsCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  const read = jsonOnly(args, 'seal-clear-leads', USAGE, io);
  if (typeof read === 'number') return read;
  const { json } = read;
  const config = loadRecordedConfig(env);
  if (config.eventStoreUrl) {
    io.err.write('leadpost seal-clear-leads: the events are in EventStoreDB (EVENTSTORE_URL), whose events cannot be rewritten in place; this command works on the embedded event store only\n');
    return 1;
  }
  const keys = await openPersonalDataKeys(config);
  const closers: Array<() => Promise<void>> = [() => keys.close()];
  try {
    const raw = await EmbeddedEventStore.open(config.dataDir);
    const store = codedEventStore(raw, eventCodec(keys));
    closers.unshift(() => store.close());
    const readModels = await openReadModelStore(config, REBUILD_STORE_OPTIONS);
    closers.unshift(() => readModels.close());

    // Held for the whole run: a service that starts meanwhile stands by; one already running holds them, and this refuses.
    const leases = await holdServiceLeases(readModels, closers);
    if (leases.heldBy) {
      io.err.write(`leadpost seal-clear-leads: a service is running on this data dir (${leases.heldBy}): stop every instance of it, then run this again\n`);
      return 1;
    }
    const stillHeld = () => leases.stillHeld((holder, lease) => `${holder} took the ${lease} lease while the leads were being sealed: a service started; stop it and run this again`);

    const hashes = await ContactHashes.open(keys, store);
    let told = Date.now();
    const report = await sealClearLeads({ raw, store, keys, hashes }, (sealed) => {
      if (json || Date.now() - told < 2000) return;
      told = Date.now();
      io.out.write(`sealed ${sealed} lead(s) so far\n`);
    });
    await stillHeld();
    // The served leads build holds the leads as they were read before: in clear.
    const [rebuilt] = await rebuildProjections(store, readModels, [leadsProjection]);
    await stillHeld();
    await switchBuild(readModels, leadsProjection, rebuilt!.build);
    const removed = await dropUnservedBuilds(readModels);
    if (readModels instanceof EmbeddedReadModelStore) await readModels.compact();
    await stillHeld();
    // Last: what it records tells a starting service that nothing is left in clear.
    await recordSealed(store, report);

    const outcome = { sealed: report.sealed, shredded: report.shredded, unreadable: report.unreadable, renamed_streams: report.renamed, leads_build: rebuilt!.build, removed };
    if (json) io.out.write(`${JSON.stringify(outcome)}\n`);
    else {
      io.out.write(`sealed ${report.sealed} lead(s) written in clear${report.shredded > 0 ? `, ${report.shredded} of them already erased or expired (their new keys destroyed)` : ''}\n`);
      if (report.renamed > 0) io.out.write(`renamed ${report.renamed} contact and Idempotency-Key stream(s) named by a plain hash\n`);
      io.out.write(`leads read model rebuilt: now served from build ${rebuilt!.build}\n`);
      if (removed.length > 0) io.out.write(`removed read-model builds: ${removed.join(', ')}\n`);
    }
    if (report.unreadable.length > 0) {
      io.err.write(`leadpost seal-clear-leads: ${report.unreadable.length} lead(s) could not be read in today's layout and were left as they were: ${report.unreadable.slice(0, 20).join(', ')}${report.unreadable.length > 20 ? ', …' : ''}\n`);
      return 1;
    }
    return 0;
  } finally {
    for (const close of closers) await close();
  }
}

import Database from 'better-sqlite3';
import { expect } from 'chai';
import { leadsProjection } from '../../src/projections/projections.js';
import { join } from 'node:path';
import { hash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { IdempotencyKeys, plainIdempotencyStream } from '../../src/commands/idempotency.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import type { EventData } from '../../src/event-store/index.js';
import { EVENT_CODEC, codedEventStore, eventCodec, openLead } from '../../src/events/codec/index.js';
import { type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import { openPersonalDataKeys } from '../../src/personal-data/index.js';
import { SEALING_STREAM, holdsClearLeads } from '../../src/personal-data/clear-leads.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { runChild } from '../support/child.js';
import { type Consumer, consumers, contentsOf, eventsJson, filesUnder, found } from '../support/consumers.js';
import { type NewLeadEvent, consumer, leadEnriched, leadReceived, leadRoutedToBuyer, leadSold, rejectedLead } from '../support/lead-events.js';
import { TestService, leadWith, testMobile } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// A data dir an older release left: leads whose personal data is in clear in events.db (versions
// 0 and 1 of LeadReceived, with no contact hashes), and a read-model build of an older version
// holding a copy of it. `leadpost seal-clear-leads` must leave no byte of those consumers in any
// file, keep every lead readable by those allowed, and make them found and shredded by an erasure.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const run = (Date.now() % 100_000) + 500_000;
const [SOLD_V0, REJECTED_V1, EXPIRED_V1, POSTED_TODAY] = consumers(run, [
  ['Grace', 'Hopper'],
  ['Katherine', 'Johnson'],
  ['Hedy', 'Lamarr'],
  ['Radia', 'Perlman'],
]) as [Consumer, Consumer, Consumer, Consumer];
const WARNING = 'with their personal data in clear';

const fieldsOf = (c: Consumer) => consumer({ first_name: c.first_name, last_name: c.last_name, email: c.email, mobile: c.mobile, mobile_national: c.national });

/** LeadReceived as version 1 wrote it: the lead in clear, no contact hashes. */
function receivedV1(leadId: number, who: Consumer): NewLeadEvent {
  const event = leadReceived(leadId);
  const { contacts: _contacts, ...data } = event.data;
  return { ...event, data: { ...data, lead: fieldsOf(who) }, metadata: { ...event.metadata, schema: 1 } };
}

/** How an older release may have kept an e-mail: as posted, with capitals (an erasure asks in lower case). */
const asPosted = (email: string) => email.replace(/^./, (c) => c.toUpperCase()).replace(/@.*/, (domain) => domain.toUpperCase());

/** LeadReceived as the first releases wrote it (version 0): no version, sid and s1 inside the lead, no mobile_national, the e-mail as posted. */
function receivedV0(leadId: number, who: Consumer): EventData {
  const { mobile_national: _national, zip4: _zip4, ...lead } = { ...fieldsOf(who), email: asPosted(who.email) };
  const { metadata } = leadReceived(leadId);
  const { schema: _schema, ...bare } = metadata;
  return { type: 'LeadReceived', data: { lead_id: leadId, supplier: 'sup-a', key_id: 'key-1', test: false, lead, received_at: '2026-01-05T17:00:00.000Z' }, metadata: bare };
}

/** The names an older release gave a contact's stream and an Idempotency-Key's: a plain SHA-256, reversed by hashing every phone number. */
const plainContact = (kind: string, value: string) => `contact-${hash('sha256', `${kind}\n${value}`, 'hex')}`;
const PLAIN_KEY = plainIdempotencyStream('sup-1', `key-${run}`);

const sold = (leadId: number): NewLeadEvent[] => [leadEnriched(leadId), leadRoutedToBuyer(leadId, 'b1', 20), leadSold(leadId, 'b1', 20)];
const asData = (events: ReadonlyArray<NewLeadEvent | EventData>): EventData[] => events.map(({ type, data, metadata }) => ({ type, data, metadata }));

describe('leadpost seal-clear-leads: the leads an older release wrote in clear', function () {
  this.timeout(120_000);
  const dir = tempDir('clear-leads');
  const env = { LEADPOST_DATA_DIR: dir.path };
  let todayId = 0;
  let soldEventId = '';
  let firstStartLogs: string[] = [];

  before(async function () {
    const raw = await EmbeddedEventStore.open(dir.path);
    await raw.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { from: 1, to: 100, instance: 'old' } }]);
    await raw.append(leadStream(1), asData([receivedV0(1, SOLD_V0), ...sold(1)]), { expectedRevision: 'no_stream' });
    await raw.append(leadStream(2), asData([receivedV1(2, REJECTED_V1), rejectedLead(2, 'DUPLICATE')[1]!]), { expectedRevision: 'no_stream' });
    await raw.append(leadStream(3), asData([receivedV1(3, EXPIRED_V1), ...sold(3)]), { expectedRevision: 'no_stream' });
    const expired = { lead_id: 3, retention_days: 30, had_delivery: true, notify_buyer: null, expired_at: '2026-02-05T00:00:00.000Z' };
    await raw.append(leadStream(3), [{ type: 'LeadPersonalDataExpired', data: expired, metadata: { schema: 1 } }]);
    soldEventId = (await raw.readStream(leadStream(1)))[0]!.id;
    // Its mobile's duplicate claim and a supplier's Idempotency-Key, under the plain names of that release.
    await raw.append(plainContact('mobile', SOLD_V0.mobile), [{ type: 'ContactClaimed', data: { lead_id: 1, claimed_at: new Date(Date.now() - 86_400_000).toISOString() } }]);
    const claim = await new IdempotencyKeys(codedEventStore(raw, EVENT_CODEC)).claim('sup-1', `key-${run}`, Buffer.from('{}'));
    if (claim.kind !== 'claimed') throw new Error(`the key was ${claim.kind}`);
    await claim.complete({ outcome: { lead_id: 1, code: 'SOLD', lead_status: 'sold', sold: true, revenue: 20, currency: 'USD' }, traceId: 't-old' });
    await raw.close();
    // A build of an older version of the leads projection, with its copy of a lead in clear.
    const oldBuild = EmbeddedReadModelStore.open(dir.path);
    const position = { commit: 1, prepare: 0 };
    await oldBuild.commit('leads:v1', position, [{ op: 'put', collection: 'leads_v1', id: '1', position, doc: { lead_id: 1, lead: fieldsOf(SOLD_V0) } }]);
    await oldBuild.close();

    // The upgraded service runs on it for a while: it projects the old leads, and posts a new one.
    const svc = await TestService.start({ dataDir: dir.path, deliveryWorker: false });
    try {
      const reply = await svc.post(leadWith(POSTED_TODAY.email, POSTED_TODAY.mobile, { first_name: POSTED_TODAY.first_name, last_name: POSTED_TODAY.last_name }), { 'x-api-key': await svc.key() });
      expect(reply.status, reply.text).to.equal(201);
      todayId = reply.body.lead_id as number;
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      // Not yet sealed: an erasure finds nothing of them, and their bytes are on disk.
      const erasure = await svc.post({ email: SOLD_V0.email }, { 'x-api-key': await svc.key('admin', 'root') }, '/functions/erasures');
      expect(erasure.status, erasure.text).to.equal(201);
      expect((erasure.body.erasure as { leads_erased: number }).leads_erased).to.equal(0);
    } finally {
      firstStartLogs = [...svc.logs];
      await svc.stop();
    }
  });

  after(() => dir.remove());

  it('before: the service warns at start, and each of them is in clear on disk', function () {
    expect(firstStartLogs.some((line) => line.includes(WARNING) && line.includes('seal-clear-leads'))).to.equal(true);
    const contents = contentsOf(filesUnder(dir.path));
    for (const who of [SOLD_V0, REJECTED_V1, EXPIRED_V1]) expect(found(contents, who), who.last_name).not.to.deep.equal([]);
    expect(found(contents, { ...SOLD_V0, email: asPosted(SOLD_V0.email) }).filter((f) => f.startsWith('email'))).not.to.deep.equal([]);
    expect(found(contents, POSTED_TODAY)).to.deep.equal([]);
    const events = contents.filter((c) => /events\.db/.test(c.where));
    for (const name of [plainContact('mobile', SOLD_V0.mobile), PLAIN_KEY]) expect(events.some((c) => c.bytes.includes(Buffer.from(name))), name).to.equal(true);
  });

  it('refuses while a service runs on the data dir, naming the lease it holds', async function () {
    const svc = await TestService.start({ dataDir: dir.path, deliveryWorker: false });
    try {
      const refused = await runChild(['seal-clear-leads'], env, { script: BIN });
      expect(refused.code, refused.stderr).to.equal(1);
      expect(refused.stderr).to.match(/a service is running on this data dir \(.+ holds the projector-leads-v\d+ lease\)/);
    } finally {
      await svc.stop();
    }
  });

  it('seals them, rebuilds the leads read model and removes the older builds: no byte of them is left in any file', async function () {
    const sealed = await runChild(['seal-clear-leads', '--json'], env, { script: BIN });
    expect(sealed.code, sealed.stderr).to.equal(0);
    const outcome = JSON.parse(sealed.lines[0]!) as { sealed: number; shredded: number; unreadable: string[]; leads_build: string; removed: string[] };
    expect(outcome).to.include({ sealed: 3, shredded: 1, renamed_streams: 2 });
    expect(outcome.unreadable).to.deep.equal([]);
    expect(outcome.leads_build).to.match(/^v\d+_r\d+$/);
    expect(outcome.removed).to.include.members(['leads_v1', `leads_v${leadsProjection.version}`]);
    const contents = contentsOf(filesUnder(dir.path));
    contents.push({ where: 'the output', bytes: Buffer.from(sealed.lines.join('\n') + sealed.stderr, 'utf8') });
    for (const who of [SOLD_V0, REJECTED_V1, EXPIRED_V1, POSTED_TODAY]) expect(found(contents, who), who.last_name).to.deep.equal([]);
    expect(found(contents, { ...SOLD_V0, email: asPosted(SOLD_V0.email) }), 'the e-mail as posted').to.deep.equal([]);
    // Nor a stream named by a reversible hash of a mobile or of a client's key.
    for (const name of [plainContact('mobile', SOLD_V0.mobile), PLAIN_KEY]) expect(contents.filter((c) => c.bytes.includes(Buffer.from(name.split('-')[1]!))).map((c) => c.where), name).to.deep.equal([]);
  });

  it('each is the same fact, sealed in place: same id and revision, its contact hashes added, the version it was written in kept', async function () {
    const svc = await TestService.start({ dataDir: dir.path, deliveryWorker: false });
    try {
      const [received] = await svc.service.store.readStream(leadStream(1), { maxCount: 1 });
      expect(received).to.include({ id: soldEventId, revision: 0, type: 'LeadReceived' });
      expect(received!.metadata).to.include({ schema: 2, sealed_from_schema: 0 }).and.not.have.property('stored_schema');
      const data = received!.data as { lead: Record<string, unknown>; contacts: unknown; sid: unknown };
      expect(data.lead).to.have.property('pii').and.not.have.property('email');
      expect(data.contacts).to.deep.equal({ mobile: svc.service.contactHashes.hash('mobile', SOLD_V0.mobile), email: svc.service.contactHashes.hash('email', SOLD_V0.email) });
      // The upcast of version 0 is kept: sid beside the lead.
      expect(data.sid).to.equal('sid-1');
      expect(svc.logs.some((line) => line.includes(WARNING))).to.equal(false);
      // The older names, renamed by a keyed hash, are still what their window after the upgrade reads.
      const hashes = svc.service.contactHashes;
      expect(await svc.service.store.readStream(hashes.olderName('idempotency', PLAIN_KEY))).to.have.length(2);
      const repeat = await svc.post(leadWith(`other.${run}@example.com`, SOLD_V0.mobile), { 'x-api-key': await svc.key() });
      expect(repeat.status, repeat.text).to.equal(409);
      expect(repeat.body.code).to.equal('DUPLICATE');
      // Opened with its key, as the events CLI prints a lead; the expired one's new key is gone.
      expect((await eventsJson(dir.path, leadStream(2)))[0]!.data).to.have.nested.property('lead.email', REJECTED_V1.email);
      const [expiredReceived] = await svc.service.store.readStream(leadStream(3), { maxCount: 1 });
      const expired = expiredReceived!.data as { lead: { pii: { key: string } }; contacts: unknown };
      expect(await svc.service.personalData.get(expired.lead.pii.key)).to.equal(null);
      expect(expired.contacts).to.deep.equal({ mobile: svc.service.contactHashes.hash('mobile', EXPIRED_V1.mobile), email: svc.service.contactHashes.hash('email', EXPIRED_V1.email) });
    } finally {
      await svc.stop();
    }
  });

  it('after it, those allowed read each lead whole, an expired one stays erased, and access and erasure find them', async function () {
    const svc = await TestService.start({ dataDir: dir.path, deliveryWorker: false });
    try {
      const admin = await svc.key('admin', 'root-2');
      const get = async (id: number) => ((await svc.request('GET', `/functions/leads/${id}`, { 'x-api-key': admin })).body.lead as { lead: Record<string, unknown> }).lead;
      expect(await get(1)).to.include({ first_name: SOLD_V0.first_name, email: asPosted(SOLD_V0.email), mobile: SOLD_V0.mobile, mobile_national: SOLD_V0.national, sid: 'sid-1' });
      expect(await get(2)).to.include({ last_name: REJECTED_V1.last_name, email: REJECTED_V1.email });
      expect(await get(3)).to.include({ erased: true }).and.not.have.property('email');
      expect(await get(todayId)).to.include({ last_name: POSTED_TODAY.last_name });

      const access = await svc.post({ mobile: REJECTED_V1.mobile }, { 'x-api-key': admin }, '/functions/consumers/lookup');
      expect(access.status, access.text).to.equal(200);
      const items = access.body.items as Array<{ lead_id: number; code: string; lead: Record<string, unknown> }>;
      expect(items.map((i) => [i.lead_id, i.code])).to.deep.equal([[2, 'DUPLICATE']]);
      expect(items[0]!.lead).to.include({ email: REJECTED_V1.email, first_name: REJECTED_V1.first_name });

      const erasure = await svc.post({ email: SOLD_V0.email }, { 'x-api-key': admin }, '/functions/erasures');
      expect(erasure.status, erasure.text).to.equal(201);
      expect((erasure.body.erasure as { lead_ids: number[] }).lead_ids).to.deep.equal([1]);
      expect(await get(1)).to.include({ erased: true }).and.not.have.property('email');
    } finally {
      await svc.stop();
    }
  });

  it('run again, it seals nothing new; bad usage exits 2, and EventStoreDB is refused', async function () {
    const again = await runChild(['seal-clear-leads', '--json'], env, { script: BIN });
    expect(again.code, again.stderr).to.equal(0);
    expect(JSON.parse(again.lines[0]!)).to.include({ sealed: 0, shredded: 0 });
    const bad = await runChild(['seal-clear-leads', '--force'], env, { script: BIN });
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('unknown option --force').and.include('usage: leadpost seal-clear-leads');
    const esdb = await runChild(['seal-clear-leads'], { ...env, EVENTSTORE_URL: 'esdb://127.0.0.1:1?tls=false' }, { script: BIN });
    expect(esdb.code).to.equal(1);
    expect(esdb.stderr).to.include('EventStoreDB');
  });
});

describe('whether a store holds leads written in clear, as a starting service tells', function () {
  it('its first lead in an older version, or sealed by a run that has not recorded sealing every lead', async function () {
    const dir = tempDir('clear-leads-check');
    const store = await EmbeddedEventStore.open(dir.path);
    // As the service reads it: through the codec, which says in what version an event was stored.
    const coded = codedEventStore(store, EVENT_CODEC);
    try {
      expect(await holdsClearLeads(coded), 'no lead yet').to.equal(false);
      // The first lead is found from the first block of ids, also when the block's first ids were never used.
      await store.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { from: 1, to: 100, instance: 'old' } }]);
      await store.append(leadStream(4), asData([receivedV1(4, SOLD_V0), ...sold(4)]));
      expect(await holdsClearLeads(coded), 'written in clear').to.equal(true);
      const [received, ...rest] = asData([receivedV1(3, SOLD_V0), ...sold(3)]);
      await store.append(leadStream(3), [{ ...received!, metadata: { ...received!.metadata, schema: 2, sealed_from_schema: 1 } }, ...rest]);
      expect(await holdsClearLeads(coded), 'a run cut short').to.equal(true);
      const ended = (unreadable: number) => ({ type: 'ClearLeadsSealed', data: { sealed: 1, shredded: 0, renamed: 0, unreadable, sealed_at: '2026-11-27T00:00:00.000Z' } });
      await store.append(SEALING_STREAM, [ended(2)]);
      expect(await holdsClearLeads(coded), 'a run that left leads it could not read').to.equal(true);
      await store.append(SEALING_STREAM, [ended(0)]);
      expect(await holdsClearLeads(coded), 'a run that sealed them all').to.equal(false);
    } finally {
      await store.close();
      dir.remove();
    }
  });
});

describe('leadpost seal-clear-leads killed part-way, then run again', function () {
  this.timeout(180_000);

  it('seals the rest: every lead opens with a key the key store has, the expired ones stay shredded, none is left in clear', async function () {
    const dir = tempDir('clear-leads-crash');
    const env = { LEADPOST_DATA_DIR: dir.path };
    const LEADS = 10_000;
    const who = (id: number): Consumer => {
      const mobile = testMobile(run * 10 + 100 + id);
      return { first_name: `Augusta${run}n${id}`, last_name: `Crash${id}x`, email: `crash.${run}.${id}@example.com`, mobile, national: mobile.slice(2) };
    };
    const expired = (id: number) => id % 10 === 0;
    try {
      const raw = await EmbeddedEventStore.open(dir.path);
      await raw.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { from: 1, to: LEADS, instance: 'old' } }]);
      for (let first = 1; first <= LEADS; first += 500) {
        const appends: Array<Promise<unknown>> = [];
        for (let id = first; id < first + 500; id++) {
          appends.push(
            raw.append(leadStream(id), asData([receivedV1(id, who(id)), ...sold(id)])).then(() =>
              expired(id) ? raw.append(leadStream(id), [{ type: 'LeadPersonalDataExpired', data: { lead_id: id, retention_days: 30, had_delivery: true, notify_buyer: null, expired_at: '2026-02-05T00:00:00.000Z' }, metadata: { schema: 1 } }]) : undefined,
            ),
          );
        }
        await Promise.all(appends);
      }
      await raw.close();

      // Killed once its first batch of sealed leads is committed.
      const sealedRows = () => {
        const db = new Database(join(dir.path, 'events.db'), { readonly: true });
        try {
          return db.prepare<[], number>("SELECT count(*) FROM commits WHERE instr(events, 'sealed_from_schema') > 0").pluck().get()!;
        } finally {
          db.close();
        }
      };
      const first = runChild(['seal-clear-leads', '--json'], env, { script: BIN });
      const started = Date.now();
      while (sealedRows() === 0 && Date.now() - started < 60_000) await new Promise((resolve) => setTimeout(resolve, 5));
      first.process.kill('SIGKILL');
      expect((await first).signal).to.equal('SIGKILL');
      const sealedBefore = sealedRows();
      expect(sealedBefore, 'killed part-way').to.be.within(1, LEADS - 1);

      const again = await runChild(['seal-clear-leads', '--json'], env, { script: BIN });
      expect(again.code, again.stderr).to.equal(0);
      expect(JSON.parse(again.lines.at(-1)!)).to.include({ sealed: LEADS - sealedBefore });

      const keys = await openPersonalDataKeys({ dataDir: dir.path });
      const store = codedEventStore(await EmbeddedEventStore.open(dir.path), eventCodec(keys));
      try {
        for (let id = 1; id <= LEADS; id++) {
          const [received] = await store.readStream(leadStream(id), { maxCount: 1 });
          const data = received!.data as LeadReceived['data'];
          expect(data.lead, `lead ${id}`).to.have.property('pii');
          const opened = (await openLead(keys, id, data.lead!)) as unknown as Record<string, unknown>;
          if (expired(id)) expect(opened, `lead ${id}`).to.include({ erased: true }).and.not.have.property('email');
          else expect(opened, `lead ${id}`).to.include({ email: who(id).email, mobile: who(id).mobile });
        }
      } finally {
        await store.close();
        await keys.close();
      }
      const contents = contentsOf(filesUnder(dir.path));
      for (const id of [1, 2, 10, 499, 500, 501, 5_000, LEADS]) expect(found(contents, who(id)), `lead ${id}`).to.deep.equal([]);
    } finally {
      dir.remove();
    }
  });
});


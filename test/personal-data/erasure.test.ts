import Database from 'better-sqlite3';
import { expect } from 'chai';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RecordedEvent } from '../../src/event-store/index.js';
import { leadStream } from '../../src/events/lead-events.js';
import { parseKey } from '../../src/keys/api-keys.js';
import { PERSONAL_FIELDS } from '../../src/leads/lead.js';
import { collectionName } from '../../src/projections/runner.js';
import { runChild } from '../support/child.js';
import { type Reply, TestService, leadWith, testMobile } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { type Consumer, consumers, contentsOf, eventsJson, filesUnder, found } from '../support/consumers.js';

// Erasure on a consumer's request: every lead of that consumer (sold, rejected, test) loses its
// personal data for good (its data key destroyed), the read models drop their copies, a pending
// delivery is cancelled, reports and outcomes stay; other consumers are untouched. Proven on the
// bytes: after the erasure and a checkpoint, nothing of the consumer is in any file of the data
// dir nor in the logs.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

const run = (Date.now() % 100_000) + 300_000;
const CONSUMERS = consumers(run, [
  ['Philippa', 'Throckmorton'],
  ['Cornelius', 'Vanderhoeven'],
  ['Octavia', 'Blackwood-Pryce'],
]);
const [ERASED, KEPT_1, KEPT_2] = CONSUMERS as [Consumer, Consumer, Consumer];

const withoutAsOf = (erasure: unknown) => {
  const { as_of: _asOf, ...rest } = erasure as Record<string, unknown>;
  return rest;
};

const leadOf = (consumer: Consumer, overrides: Record<string, unknown> = {}) =>
  leadWith(consumer.email, consumer.mobile, { first_name: consumer.first_name, last_name: consumer.last_name, ...overrides });

describe('erasure of a consumer', function () {
  this.timeout(90_000);
  const dir = tempDir('erasure');
  let svc: TestService;
  let admin: string;
  let supplier: string;
  let analyst: string;
  const leadsOf = new Map<Consumer, number[]>();
  let erasure: Reply;
  let reportBefore: Reply;
  let logs: string[] = [];
  /** The wrapped data keys (as keys.db holds them) of the erased consumer's leads, and of another's. */
  const wrappedKeys = new Map<Consumer, Buffer[]>();

  const get = (path: string, key = admin) => svc.request('GET', path, { 'x-api-key': key });
  const erase = (body: unknown, key = admin) => svc.post(body, { 'x-api-key': key }, '/functions/erasures');
  const lookup = (body: unknown, key = admin) => svc.post(body, { 'x-api-key': key }, '/functions/consumers/lookup');
  const report = () => get('/functions/reports/summary?group_by=supplier,sid&test=include');

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path });
    supplier = await svc.key();
    admin = await svc.key('admin', 'root');
    analyst = await svc.key('analyst', 'ana');
    for (const consumer of CONSUMERS) {
      const ids: number[] = [];
      // Sold, then a duplicate (rejected), then a test lead: each kind of lead an erasure must find.
      for (const overrides of [{}, {}, { test: true }]) {
        const reply = await svc.post(leadOf(consumer, overrides), { 'x-api-key': supplier });
        expect(reply.status, reply.text).to.be.oneOf([201, 409]);
        ids.push(reply.body.lead_id as number);
      }
      leadsOf.set(consumer, ids);
    }
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    reportBefore = await report();
    const keysDb = new Database(join(dir.path, 'keys.db'), { readonly: true });
    try {
      for (const consumer of [ERASED, KEPT_1]) {
        const keyIds: string[] = [];
        for (const id of leadsOf.get(consumer)!) {
          const [received] = await svc.service.store.readStream(leadStream(id), { maxCount: 1 });
          const key = ((received!.data as { lead: { pii?: { key: string } } | null }).lead?.pii?.key);
          if (key) keyIds.push(key);
        }
        wrappedKeys.set(consumer, keyIds.map((key) => (keysDb.prepare('SELECT wrapped FROM data_keys WHERE id = ?').get(key) as { wrapped: Buffer }).wrapped));
      }
    } finally {
      keysDb.close();
    }
    erasure = await erase({ email: ` ${ERASED.email.toUpperCase()} `, mobile: ERASED.national, suppress: true });
  });

  after(async function () {
    await svc?.stop().catch(() => {});
    dir.remove();
  });

  it('answers 201 with the erasure: every lead of the consumer, counted, and where to read it again', async function () {
    expect(erasure.status, erasure.text).to.equal(201);
    const record = erasure.body.erasure as Record<string, unknown>;
    expect(record).to.include({ status: 'completed', suppressed: true, leads_erased: 3 });
    expect(record.lead_ids).to.deep.equal(leadsOf.get(ERASED));
    expect(record.fields).to.deep.equal(['email', 'mobile']);
    expect(erasure.headers.location).to.equal(`/functions/erasures/${record.erasure_id as string}`);
    expect(erasure.text).to.not.include(ERASED.email);
    const again = await get(`/functions/erasures/${record.erasure_id as string}`);
    expect(again.status, again.text).to.equal(200);
    // The answer's as_of is its last look; the record's, the last look that erased something.
    expect(withoutAsOf(again.body.erasure)).to.deep.equal(withoutAsOf(record));
  });

  it("its events follow back to the request: the request's trace and the admin's key on each lead's mark and on the record", async function () {
    const traceId = erasure.body.trace_id as string;
    const asker = { role: 'admin', id: 'root', key_id: parseKey(admin)!.id };
    const record = await svc.service.store.readStream(`erasure-${(erasure.body.erasure as { erasure_id: string }).erasure_id}`);
    expect(record[0]!.metadata).to.deep.include({ trace_id: traceId, correlation_id: traceId, principal: asker });
    for (const id of leadsOf.get(ERASED)!) {
      const events = await svc.service.store.readStream(leadStream(id));
      const mark = events.find((e) => e.type === 'LeadPersonalDataErased')!;
      // Its correlation stays the post's, as every event of the lead's.
      expect(mark.metadata).to.deep.include({ trace_id: traceId, principal: asker, correlation_id: events[0]!.metadata.correlation_id ?? events[0]!.metadata.trace_id });
    }
  });

  it('asked again, it is the same erasure, reported once: 200 and nothing new', async function () {
    const again = await erase({ email: ERASED.email, mobile: ERASED.mobile, suppress: true });
    expect(again.status, again.text).to.equal(200);
    expect(withoutAsOf(again.body.erasure)).to.deep.equal(withoutAsOf(erasure.body.erasure));
  });

  it('the lead view, the events route and the events CLI show erased: true and no personal field; outcomes stay', async function () {
    const [sold, duplicate, test] = leadsOf.get(ERASED)!;
    for (const id of [sold, duplicate, test]) {
      const view = await get(`/functions/leads/${id}`);
      expect(view.status, view.text).to.equal(200);
      const lead = (view.body.lead as { lead: Record<string, unknown> }).lead;
      expect(lead).to.include({ erased: true, zip: '90210', accident_state: 'CA' });
      for (const field of [...PERSONAL_FIELDS, 'pii']) expect(lead, field).to.not.have.property(field);
      const events = await get(`/functions/leads/${id}/events`);
      const received = (events.body.items as Array<{ type: string; data: { lead: Record<string, unknown> } }>).find((e) => e.type === 'LeadReceived')!;
      expect(received.data.lead).to.include({ erased: true });
      expect(events.text).to.not.include(ERASED.email);
      const cli = await eventsJson(dir.path, leadStream(id!));
      expect(cli.map((e) => e.type)).to.include('LeadPersonalDataErased');
      expect(JSON.stringify(cli)).to.not.include(ERASED.email);
    }
    expect(((await get(`/functions/leads/${sold}`)).body.lead as Record<string, unknown>)).to.include({ lead_status: 'sold', code: 'SOLD', revenue: 42.5 });
    // An analyst, who never reads a lead's personal data, is told it was erased; another consumer's lead was not.
    for (const [id, erased] of [[sold, true], [leadsOf.get(KEPT_1)![0], false]] as const) {
      const asAnalyst = (await get(`/functions/leads/${id}`, analyst)).body.lead as Record<string, unknown>;
      expect(asAnalyst, String(id)).to.include({ personal_data_erased: erased, lead: null });
      // Its events show the analyst the lead's routing fields, erased or not: never its ZIP, which the erasure left.
      const events = await get(`/functions/leads/${id}/events`, analyst);
      const received = (events.body.items as Array<{ type: string; data: { lead: Record<string, unknown> } }>).find((e) => e.type === 'LeadReceived')!;
      expect(Object.keys(received.data.lead).sort(), String(id)).to.deep.equal(erased ? ['accident_state', 'erased', 's1', 'sid', 'test'] : ['accident_state', 's1', 'sid', 'test']);
      // Nor the keyed hashes of its contacts, one value per consumer on every lead: an admin's alone.
      expect(received.data, String(id)).to.not.have.property('contacts');
      const asAdmin = (await get(`/functions/leads/${id}/events`)).body.items as Array<{ type: string; data: Record<string, unknown> }>;
      expect(asAdmin.find((e) => e.type === 'LeadReceived')!.data, String(id)).to.have.property('contacts');
    }
    expect(((await get(`/functions/leads/${duplicate}`)).body.lead as Record<string, unknown>)).to.include({ lead_status: 'rejected', code: 'DUPLICATE' });
  });

  it('its pending delivery is cancelled and the delivery row keeps no envelope; the reports are unchanged', async function () {
    const [sold] = leadsOf.get(ERASED)!;
    const row = await svc.service.readModels.get(svc.service.projections.collection('deliveries'), String(sold));
    expect(row).to.include({ status: 'cancelled', erased: true });
    // The row never held a copy of the lead: the list folds it from the lead's stream.
    expect(row).to.not.have.property('lead');
    const deliveries = await get('/functions/deliveries?buyer=acme-law');
    const mine = (deliveries.body.items as Array<Record<string, unknown>>).find((d) => d.lead_id === sold)!;
    expect(mine).to.include({ status: 'cancelled' });
    expect(mine.lead).to.include({ erased: true });
    const reportAfter = await report();
    expect(reportAfter.body.items).to.deep.equal(reportBefore.body.items);
  });

  it('the other consumers read back whole over HTTP', async function () {
    for (const consumer of [KEPT_1, KEPT_2]) {
      const [sold] = leadsOf.get(consumer)!;
      const view = await get(`/functions/leads/${sold}`);
      expect((view.body.lead as { lead: Record<string, unknown> }).lead).to.include({
        first_name: consumer.first_name,
        last_name: consumer.last_name,
        email: consumer.email,
        mobile: consumer.mobile,
        mobile_national: consumer.national,
      });
    }
  });

  it('suppressed: a later lead with that mobile or e-mail is rejected SUPPRESSED (422), naming the field, keeping no personal data', async function () {
    for (const [body, field] of [
      [leadWith(ERASED.email, testMobile(run * 10 + 7)), 'email'],
      [leadWith(`other.${run}@example.com`, ERASED.mobile), 'mobile'],
      [leadWith(ERASED.email, testMobile(run * 10 + 8), { test: true }), 'email'],
    ] as const) {
      const reply = await svc.post(body, { 'x-api-key': supplier });
      expect(reply.status, reply.text).to.equal(422);
      expect(reply.body).to.include({ code: 'SUPPRESSED', acceptance: 'rejected', lead_status: 'rejected', Response: 'Failure' });
      expect(reply.body.errors).to.deep.equal([{ field, code: 'suppressed', message: `${field} is on the suppression list` }]);
      const view = await get(`/functions/leads/${reply.body.lead_id as number}`);
      expect((view.body.lead as Record<string, unknown>).lead).to.equal(null);
    }
    // The report counts them under their own code, and a row's rejected is the sum of its codes.
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const rows = (await report()).body.items as Array<Record<string, number>>;
    const total = (column: string, of: Array<Record<string, number>>) => of.reduce((sum, row) => sum + (row[column] ?? 0), 0);
    expect(total('rejected_SUPPRESSED', rows)).to.equal(3);
    expect(total('rejected_SUPPRESSED', reportBefore.body.items as Array<Record<string, number>>)).to.equal(0);
    for (const row of rows) {
      const byCode = Object.keys(row).filter((column) => column.startsWith('rejected_'));
      expect(byCode).to.have.length(7);
      expect(byCode.reduce((sum, column) => sum + row[column]!, 0)).to.equal(row.rejected);
    }
  });

  it('access: POST /functions/consumers/lookup gives an admin every lead of a consumer, opened, with its outcome', async function () {
    const reply = await lookup({ email: KEPT_1.email });
    expect(reply.status, reply.text).to.equal(200);
    expect(reply.body.leads_found).to.equal(3);
    const items = reply.body.items as Array<Record<string, unknown>>;
    expect(items.map((i) => i.lead_id)).to.deep.equal(leadsOf.get(KEPT_1));
    // The test lead is checked against the real claims: a duplicate too.
    expect(items.map((i) => i.code)).to.deep.equal(['SOLD', 'DUPLICATE', 'DUPLICATE']);
    for (const item of items) expect(item.lead).to.include({ email: KEPT_1.email, first_name: KEPT_1.first_name });
    // By mobile alone, in national form: the same leads.
    const byMobile = await lookup({ mobile: KEPT_1.national });
    expect((byMobile.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id)).to.deep.equal(leadsOf.get(KEPT_1));
    // An erased consumer's leads are listed with their outcomes and without personal data.
    const erased = await lookup({ mobile: ERASED.mobile });
    for (const item of erased.body.items as Array<Record<string, unknown>>) expect(item.lead === null || (item.lead as Record<string, unknown>).erased === true).to.equal(true);
    expect(erased.text).to.not.include(ERASED.first_name);
  });

  it('access: GET /functions/consumers?email=&mobile=, kept for compatibility, answers as the POST form does', async function () {
    const posted = await lookup({ email: KEPT_1.email, mobile: KEPT_1.national });
    const got = await get(`/functions/consumers?email=${encodeURIComponent(KEPT_1.email)}&mobile=${KEPT_1.national}`);
    expect(got.status, got.text).to.equal(200);
    const { trace_id: _postedTrace, ...postedRest } = posted.body;
    const { trace_id: _gotTrace, ...gotRest } = got.body;
    expect(gotRest).to.deep.equal(postedRest);
  });

  it('only an admin may erase or look a consumer up; bad input names every field and never echoes it', async function () {
    for (const key of [supplier, analyst]) {
      expect((await erase({ email: KEPT_2.email }, key)).status).to.equal(403);
      expect((await get(`/functions/consumers?email=${KEPT_2.email}`, key)).status).to.equal(403);
      expect((await lookup({ email: KEPT_2.email }, key)).status).to.equal(403);
    }
    const empty = await erase({});
    expect(empty.status, empty.text).to.equal(422);
    expect((empty.body.errors as Array<{ field: string }>).map((e) => e.field)).to.deep.equal(['email', 'mobile']);
    const bad = await erase({ email: 'not-an-address-secret', mobile: '12', suppress: 'yes', extra: 1 });
    expect(bad.status, bad.text).to.equal(422);
    expect((bad.body.errors as Array<{ field: string }>).map((e) => e.field).sort()).to.deep.equal(['email', 'extra', 'mobile', 'suppress']);
    expect(bad.text).to.not.include('not-an-address-secret');
    // A contact that is no string is named as the lookup names it: the wrong type, not a bad format.
    const typed = await erase({ email: 5, mobile: ['+12135550100'] });
    expect(typed.body.errors).to.deep.equal([
      { field: 'email', code: 'wrong_type', message: 'email must be a string' },
      { field: 'mobile', code: 'wrong_type', message: 'mobile must be a string' },
    ]);
    const query = await get('/functions/consumers?email=nope-secret&x=1');
    expect(query.status).to.equal(422);
    expect((query.body.errors as Array<{ field: string }>).map((e) => e.field).sort()).to.deep.equal(['email', 'x']);
    expect(query.text).to.not.include('nope-secret');
    // An unknown parameter is named as a body's unknown member: a contact sent as the name (its
    // `email=` forgotten) is `*`, never echoed, and so is a pair with no name at all.
    for (const path of [`/functions/consumers?${encodeURIComponent(KEPT_2.email)}`, '/functions/consumers?=1&email=' + encodeURIComponent(KEPT_2.email)]) {
      const unnamed = await get(path);
      expect(unnamed.status, path).to.equal(422);
      expect((unnamed.body.errors as Array<{ field: string; code: string }>)[0], path).to.include({ field: '*', code: 'unknown_field' });
      expect(unnamed.text, path).to.not.include(KEPT_2.email);
    }
    // The POST form: the same field rules, every failing field named, no value echoed.
    const badLookup = await lookup({ email: 'nope-secret', x: 1 });
    expect(badLookup.status, badLookup.text).to.equal(422);
    expect(badLookup.body.errors).to.deep.equal([
      { field: 'x', code: 'unknown_field', message: 'x is not a field of a consumer lookup' },
      { field: 'email', code: 'invalid_format', message: (query.body.errors as Array<{ field: string; message: string }>).find((e) => e.field === 'email')!.message },
    ]);
    expect(badLookup.text).to.not.include('nope-secret');
    const wrongTypes = await lookup({ email: 5, mobile: ['2025550143'] });
    expect(wrongTypes.status, wrongTypes.text).to.equal(422);
    expect((wrongTypes.body.errors as Array<{ field: string; code: string }>).map((e) => `${e.field} ${e.code}`).sort()).to.deep.equal(['email wrong_type', 'mobile wrong_type']);
    const none = await lookup({});
    expect((none.body.errors as Array<{ field: string }>).map((e) => e.field)).to.deep.equal(['email', 'mobile']);
    const notJson = await svc.request('POST', '/functions/consumers/lookup', { 'x-api-key': admin, 'content-type': 'text/plain' });
    expect([notJson.status, notJson.body.code]).to.deep.equal([415, 'UNSUPPORTED_MEDIA_TYPE']);
    expect((await get('/functions/erasures/0123')).status).to.equal(404);
  });

  it('leadpost consumer show and leadpost erase answer beside the running service; bad usage exits 2 naming the option, not the value', async function () {
    const env = { LEADPOST_DATA_DIR: dir.path };
    const shown = await runChild(['consumer', 'show', '--email', KEPT_1.email, '--json'], env, { script: BIN });
    expect(shown.code, shown.stderr).to.equal(0);
    const leads = shown.lines.map((line) => JSON.parse(line) as { lead_id: number; code: string; lead: Record<string, unknown> });
    expect(leads.map((l) => l.lead_id)).to.deep.equal(leadsOf.get(KEPT_1));
    expect(leads[0]!.lead).to.include({ email: KEPT_1.email, mobile: KEPT_1.mobile });
    const again = await runChild(['erase', '--email', ERASED.email, '--mobile', ERASED.mobile], env, { script: BIN });
    expect(again.code, again.stderr).to.equal(0);
    // The leads refused SUPPRESSED since hold no personal data: nothing new to erase, the record as it stands.
    expect(again.lines[0]).to.match(/^already erased, nothing new: erasure [0-9a-f]{32}, 3 lead\(s\), suppressed$/);
    const bad = await runChild(['erase', '--email', 'no-at-sign-secret'], env, { script: BIN });
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include('--email is not a valid e-mail address').and.not.include('no-at-sign-secret');
    const none = await runChild(['erase'], env, { script: BIN });
    expect(none.code).to.equal(2);
    expect(none.stderr).to.include('--email or --mobile is required');
    // A value given without its option, or glued to a mistyped one, is never echoed either.
    const misuses = [
      ['erase', 'loose.value@example.com'],
      ['erase', '--email', 'a.b@example.com', '+12135550143'],
      ['consumer', 'show', '--emial=typo.value@example.com'],
      ['erase', '--loose.value@example.com'],
    ];
    for (const args of misuses) {
      const misuse = await runChild(args, env, { script: BIN });
      expect(misuse.code, args.join(' ')).to.equal(2);
      for (const value of ['loose.value', 'a.b@example.com', '2135550143', 'typo.value']) expect(misuse.stderr, args.join(' ')).not.to.include(value);
      expect(misuse.stderr).to.match(/usage: leadpost (erase|consumer show)/);
    }
  });

  it('an erasure of a consumer with no lead is recorded too, with no lead', async function () {
    const reply = await erase({ email: `nobody.${run}@example.com` });
    expect(reply.status, reply.text).to.equal(201);
    expect(reply.body.erasure).to.include({ leads_erased: 0, suppressed: false });
  });

  it('GET /functions/erasures lists every request recorded, newest first, a page at a time, for admins only, naming no contact', async function () {
    const list = await get('/functions/erasures');
    expect(list.status, list.text).to.equal(200);
    const items = list.body.items as Array<Record<string, unknown>>;
    const erasureId = (erasure.body.erasure as { erasure_id: string }).erasure_id;
    // The last made (the consumer with no lead) first; the first erasure's one request, as recorded.
    expect(items[0]).to.include({ principal: 'admin:root', leads_erased: 0, suppressed: false });
    expect(items[0]!.fields).to.deep.equal(['email']);
    // Its one request: the CLI's later one found only leads refused SUPPRESSED since, which hold
    // nothing to erase, and recorded no request of its own.
    const requests = items.filter((item) => item.erasure_id === erasureId);
    expect(requests.map((item) => [item.principal, item.leads_erased])).to.deep.equal([['admin:root', 3]]);
    expect(requests[0]).to.deep.equal({
      erasure_id: erasureId,
      erased_at: (erasure.body.erasure as { first_erased_at: string }).first_erased_at,
      principal: 'admin:root',
      fields: ['email', 'mobile'],
      suppressed: true,
      leads_erased: 3,
    });
    const times = items.map((item) => item.erased_at as string);
    expect(times).to.deep.equal([...times].sort().reverse());
    for (const value of [ERASED.email, ERASED.mobile, ERASED.national]) expect(list.text).not.to.include(value);
    const firstPage = await get('/functions/erasures?limit=1');
    expect(firstPage.body.items).to.deep.equal(items.slice(0, 1));
    const secondPage = await get(`/functions/erasures?limit=1&cursor=${firstPage.body.next_cursor as string}`);
    expect(secondPage.body.items).to.deep.equal(items.slice(1, 2));
    expect((await get('/functions/erasures?since=2999-01-01')).body.items).to.deep.equal([]);
    expect((await get('/functions/erasures', analyst)).status).to.equal(403);
    const refused = await get('/functions/erasures?email=someone@example.com&since=yesterday');
    expect(refused.status).to.equal(422);
    expect((refused.body.errors as Array<{ field: string }>).map((e) => e.field).sort()).to.deep.equal(['email', 'since']);
    expect(refused.text).not.to.include('someone@example.com');
  });

  it('replay after the erasure gives the same read models as the live ones, with no personal data', async function () {
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const live = Object.fromEntries(['leads', 'deliveries', 'reports'].map((name) => [name, svc.service.projections.build(name)!]));
    const replay = await runChild(['replay'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
    expect(replay.code, replay.stderr).to.equal(0);
    for (const [name, base] of [['leads', 'leads'], ['deliveries', 'deliveries'], ['reports', 'report_buckets'], ['reports', 'report_leads']] as const) {
      const read = (build: string) => svc.service.readModels.find(collectionName(base, build), { sort: { field: '_id', direction: 'asc' }, limit: 10_000 });
      const rebuilt = /^.*now served from build (\S+)$/.exec(replay.lines.find((l) => l.startsWith(`${name}: now served`)) ?? '')?.[1];
      expect(rebuilt, replay.lines.join('\n')).to.be.a('string');
      const docs = await read(rebuilt!);
      expect(docs, `${name}/${base} rebuilt equals live`).to.deep.equal(await read(live[name]!));
      if (base === 'leads') {
        for (const id of leadsOf.get(ERASED)!) expect(docs.find((d) => d._id === String(id))!.lead).to.include({ erased: true }).and.not.have.property('pii');
      }
    }
  });

  it('a backup taken after the erasure holds no byte of the erased consumer nor its wrapped keys; the others\' keys are in it', async function () {
    const backup = tempDir('erasure-backup');
    try {
      const taken = await runChild(['backup', '--to', join(backup.path, 'copy')], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      expect(taken.code, taken.stderr).to.equal(0);
      const contents = contentsOf(filesUnder(backup.path));
      expect(contents.map((c) => c.where).some((f) => f.endsWith('keys.db'))).to.equal(true);
      expect(found(contents, ERASED)).to.deep.equal([]);
      for (const wrapped of wrappedKeys.get(ERASED)!) expect(contents.filter((c) => c.bytes.includes(wrapped)).map((c) => c.where)).to.deep.equal([]);
      for (const wrapped of wrappedKeys.get(KEPT_1)!) expect(contents.some((c) => c.where.endsWith('keys.db') && c.bytes.includes(wrapped))).to.equal(true);
    } finally {
      backup.remove();
    }
  });

  it('after a checkpoint, no byte of the erased consumer is in any file of the data dir nor in the logs; the others are still readable', async function () {
    logs = [...svc.logs];
    // Stopping closes every store: the WALs are checkpointed into their databases.
    await svc.stop();
    const contents = contentsOf(filesUnder(dir.path));
    expect(contents.map((c) => c.where).some((f) => f.endsWith('keys.db'))).to.equal(true);
    contents.push({ where: 'the logs', bytes: Buffer.from(logs.join(''), 'utf8') });
    expect(found(contents, ERASED)).to.deep.equal([]);
    // Shredded for real: the erased leads' wrapped keys are in no file (secure delete, WAL emptied);
    // the other consumer's are still in keys.db.
    expect(wrappedKeys.get(ERASED)).to.have.length(3);
    for (const wrapped of wrappedKeys.get(ERASED)!) expect(contents.filter((c) => c.bytes.includes(wrapped)).map((c) => c.where)).to.deep.equal([]);
    for (const wrapped of wrappedKeys.get(KEPT_1)!) expect(contents.some((c) => c.where.endsWith('keys.db') && c.bytes.includes(wrapped))).to.equal(true);
    // The keys of the others are still there: their leads open after a restart.
    svc = await TestService.start({ dataDir: dir.path });
    const again = await svc.key('admin', 'root-2');
    const view = await svc.request('GET', `/functions/leads/${leadsOf.get(KEPT_2)![0]}`, { 'x-api-key': again });
    expect((view.body.lead as { lead: Record<string, unknown> }).lead).to.include({ email: KEPT_2.email, last_name: KEPT_2.last_name });
    const erased = await svc.request('GET', `/functions/leads/${leadsOf.get(ERASED)![0]}`, { 'x-api-key': again });
    expect((erased.body.lead as { lead: Record<string, unknown> }).lead).to.include({ erased: true });
  });
});

import { expect } from 'chai';
import { request } from 'node:https';
import sinon from 'sinon';
import { ReadModelUnavailableError } from '../../src/read-models/port.js';
import type { LeadView } from '../../src/projections/lead-view.js';
import { type GroupBy, type ReportBucket, SUMMED, addDays, firstHourOfLocalDay, localDay, summarise } from '../../src/read-models/report.js';
import { TestService, validLead } from '../support/service.js';
import { roleKeys } from './role-keys.js';

// The read-back routes through the real HTTPS server, the embedded stores and the running
// projections: each route, each scope rule, pagination, CSV, read-your-writes.

const routing = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'] },
    { id: 'ny-buyer', price: 30, states: ['NY'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

describe('read-back routes', function () {
  let svc: TestService;
  const keys: Record<string, string> = {};
  const leads: Record<string, number> = {};

  before(async function () {
    // On the main thread: a test below stops the leads projection's runner to read a lead while it is stopped.
    svc = await TestService.start({ routing, env: { LEADPOST_BACKGROUND_THREAD: '0' } });
    Object.assign(keys, await roleKeys(svc));
    const post = async (name: string, key: string, lead: Record<string, unknown>) => {
      const reply = await svc.post(lead, { 'x-api-key': key });
      leads[name] = reply.body.lead_id as number;
    };
    await post('caSold', keys.supA!, validLead({ sid: 'google', s1: 'c-1' }));
    await post('nySold', keys.supA!, validLead({ accident_state: 'NY', zip: '10001', sid: 'bing' }));
    await post('txUnsold', keys.supB!, validLead({ accident_state: 'TX', zip: '75001', sid: 'meta' }));
    await post('invalid', keys.supB!, validLead({ zip: 'bad', sid: 'meta' }));
    await post('test', keys.supA!, validLead({ test: true, sid: 'google' }));
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
  });
  after(async () => svc.stop());

  const get = (path: string, key: string, headers: Record<string, string> = {}) => svc.request('GET', path, { 'x-api-key': key, ...headers });

  describe('GET /functions/leads/{id}', function () {
    it('the supplier that sent it sees the lead with its consumer fields', async function () {
      const reply = await get(`/functions/leads/${leads.caSold}`, keys.supA!);
      expect(reply.status).to.equal(200);
      expect(reply.body).to.include({ ok: true, code: 'OK' });
      expect(reply.body.position).to.have.keys('commit', 'prepare');
      const lead = reply.body.lead as Record<string, unknown>;
      expect(lead).to.include({ lead_id: leads.caSold, supplier: 'sup-a', sid: 'google', s1: 'c-1', lead_status: 'sold', code: 'SOLD', sold: true, revenue: 40, buyer: 'ca-buyer', bucket: null, test: false });
      expect(lead.enrichment).to.deep.equal({ phone: 'pass', email: 'pass', consent: 'pass' });
      expect(lead.delivery).to.deep.equal({ status: 'pending', attempts: 0 });
      expect(lead.feedback).to.deep.equal([]);
      expect((lead.lead as Record<string, unknown>).first_name).to.equal('Ada');
    });

    it('another supplier gets 404, never 403', async function () {
      const reply = await get(`/functions/leads/${leads.caSold}`, keys.supB!);
      expect(reply.status).to.equal(404);
      expect(reply.body.code).to.equal('NOT_FOUND');
    });

    it('the buyer that bought it sees it with PII; another buyer gets 404', async function () {
      const mine = await get(`/functions/leads/${leads.caSold}`, keys.caBuyer!);
      expect(mine.status).to.equal(200);
      expect((mine.body.lead as { lead: unknown }).lead).to.not.equal(null);
      expect((await get(`/functions/leads/${leads.caSold}`, keys.nyBuyer!)).status).to.equal(404);
    });

    it('an analyst sees any lead without consumer fields; an admin with them', async function () {
      const analyst = await get(`/functions/leads/${leads.txUnsold}`, keys.analyst!);
      expect(analyst.status).to.equal(200);
      expect((analyst.body.lead as { lead: unknown }).lead).to.equal(null);
      const admin = await get(`/functions/leads/${leads.txUnsold}`, keys.admin!);
      expect((admin.body.lead as { lead: { accident_state: string } }).lead.accident_state).to.equal('TX');
    });

    it('a rejected lead shows its code and errors; unknown and malformed ids are 404', async function () {
      const reply = await get(`/functions/leads/${leads.invalid}`, keys.supB!);
      expect(reply.body.lead).to.deep.include({ lead_status: 'rejected', code: 'INVALID', lead: null });
      expect((reply.body.lead as { errors: Array<{ field: string }> }).errors[0]!.field).to.equal('zip');
      expect((await get('/functions/leads/999999', keys.admin!)).status).to.equal(404);
      expect((await get('/functions/leads/abc', keys.admin!)).status).to.equal(404);
      expect((await get('/functions/leads/1e3', keys.admin!)).status).to.equal(404);
    });

    it('needs a key', async function () {
      expect((await svc.request('GET', `/functions/leads/${leads.caSold}`)).status).to.equal(401);
    });

    it('read-your-writes: a lead just posted is there even while its projection is stopped', async function () {
      const runner = svc.service.projections.runner('leads')!;
      await runner.stop();
      const posted = await svc.post(validLead(), { 'x-api-key': keys.supA! });
      const reply = await get(`/functions/leads/${posted.body.lead_id}`, keys.supA!);
      expect(reply.status).to.equal(200);
      expect(reply.body.lead).to.deep.include({ lead_id: posted.body.lead_id, lead_status: 'sold', code: 'SOLD', revenue: 40 });
    });
  });

  describe('GET /functions/deliveries', function () {
    // The lead posted by the read-your-writes test above must have reached the deliveries first.
    before(async () => svc.service.projections.runner('deliveries')!.waitFor(await svc.service.store.headPosition()));

    it('a supplier sees the deliveries of its own leads, newest first, no test leads', async function () {
      const reply = await get('/functions/deliveries', keys.supA!);
      expect(reply.status).to.equal(200);
      const items = reply.body.items as Array<Record<string, unknown>>;
      expect(items.map((i) => i.lead_id)).to.include.members([leads.caSold, leads.nySold]);
      expect(items.map((i) => i.lead_id)).to.not.include(leads.test);
      expect(items.map((i) => i.lead_id)).to.not.include(leads.txUnsold);
      expect(items[0]).to.not.have.property('lead');
      expect(reply.body.next_cursor).to.equal(null);
    });

    it('a buyer sees only its own deliveries, with the consumer fields; asking for another buyer\'s meets none', async function () {
      const other = await get('/functions/deliveries?buyer=ny-buyer', keys.caBuyer!);
      expect([other.status, other.body.items, other.body.next_cursor]).to.deep.equal([200, [], null]);
      for (const path of ['/functions/deliveries', '/functions/deliveries?buyer=ca-buyer']) {
        const own = await get(path, keys.caBuyer!);
        const ownItems = own.body.items as Array<Record<string, unknown>>;
        expect(ownItems.map((i) => i.lead_id), path).to.include(leads.caSold);
        expect(ownItems.every((i) => i.buyer === 'ca-buyer'), path).to.equal(true);
      }
      const reply = await get('/functions/deliveries', keys.caBuyer!);
      const items = reply.body.items as Array<Record<string, unknown>>;
      expect(items.every((i) => i.buyer === 'ca-buyer')).to.equal(true);
      expect(items.length).to.be.at.least(1);
      expect(items[0]).to.include({ status: 'pending', attempts: 0, bucket: null, last_status_code: null });
      expect((items[0]!.lead as { first_name: string }).first_name).to.equal('Ada');
    });

    it('an analyst filters by bucket and by status', async function () {
      const bucket = await get('/functions/deliveries?bucket=unsold', keys.analyst!);
      expect((bucket.body.items as Array<Record<string, unknown>>).map((i) => i.lead_id)).to.deep.equal([leads.txUnsold]);
      const delivered = await get('/functions/deliveries?status=delivered', keys.analyst!);
      expect(delivered.body.items).to.deep.equal([]);
    });

    it('pages with an opaque cursor: every row once, newest first', async function () {
      const seen: unknown[] = [];
      let cursor: string | null = '';
      while (cursor !== null) {
        const reply = await get(`/functions/deliveries?limit=1${cursor ? `&cursor=${cursor}` : ''}`, keys.admin!);
        expect(reply.status).to.equal(200);
        seen.push(...(reply.body.items as Array<{ lead_id: number }>).map((i) => i.lead_id));
        cursor = reply.body.next_cursor as string | null;
      }
      const all = await get('/functions/deliveries?limit=500', keys.admin!);
      expect(seen).to.deep.equal((all.body.items as Array<{ lead_id: number }>).map((i) => i.lead_id));
      expect(new Set(seen).size).to.equal(seen.length);
      expect(seen.length).to.be.at.least(3);
    });

    it('bad parameters are 422 INVALID naming each one', async function () {
      const reply = await get('/functions/deliveries?limit=0&status=lost&since=yesterday&cursor=zzz', keys.admin!);
      expect(reply.status).to.equal(422);
      expect(reply.body.code).to.equal('INVALID');
      expect((reply.body.errors as Array<{ field: string }>).map((e) => e.field)).to.have.members(['limit', 'status', 'since', 'cursor']);
    });
  });

  describe('GET /functions/reports/summary', function () {
    // The day the leads were received, not the day this file was loaded: a run across midnight
    // (UTC) loads it on one day and posts them on the next.
    let today = '';
    before(async function () {
      const newest = await get('/functions/leads?limit=1', keys.admin!);
      today = String((newest.body.items as Array<{ received_at: string }>)[0]!.received_at).slice(0, 10);
    });

    it('an analyst gets every metric by supplier and sid, test leads apart', async function () {
      const reply = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=supplier,sid`, keys.analyst!);
      expect(reply.status).to.equal(200);
      const rows = reply.body.items as Array<Record<string, unknown>>;
      const google = rows.find((r) => r.supplier === 'sup-a' && r.sid === 'google')!;
      expect(google).to.include({ received: 1, accepted: 1, sold: 1, unsold: 0, rejected: 0, revenue: 40, net_revenue: 40, acceptance_rate: 1, sell_rate: 1, avg_price: 40 });
      const meta = rows.find((r) => r.supplier === 'sup-b' && r.sid === 'meta')!;
      expect(meta).to.include({ received: 2, accepted: 1, unsold: 1, rejected: 1, rejected_INVALID: 1, revenue: 0, acceptance_rate: 0.5, sell_rate: 0 });
      const tests = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=supplier&test=only`, keys.analyst!);
      expect(tests.body.items).to.have.length(1);
      expect((tests.body.items as Array<Record<string, unknown>>)[0]).to.include({ supplier: 'sup-a', sold: 1 });
    });

    it('a supplier sees only its own rows; a buyer may not read reports', async function () {
      const reply = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=supplier,day`, keys.supB!);
      expect((reply.body.items as Array<Record<string, unknown>>).map((r) => r.supplier)).to.deep.equal(['sup-b']);
      expect((reply.body.items as Array<Record<string, unknown>>)[0]!.day).to.equal(today);
      expect((await get('/functions/reports/summary', keys.caBuyer!)).status).to.equal(403);
    });

    it('CSV also when Accept gives text/csv with parameters (its charset, header=present), or prefers it by q; JSON when it prefers JSON', async function () {
      const path = `/functions/reports/summary?from=${today}&to=${today}&group_by=state`;
      for (const accept of ['text/csv; charset=utf-8', 'text/csv;charset=UTF-8', 'text/csv; header=present', 'text/*', 'application/json;q=0.5, text/csv', 'TEXT/CSV']) {
        const reply = await get(path, keys.admin!, { accept });
        expect(String(reply.headers['content-type']), accept).to.equal('text/csv; charset=utf-8');
      }
      for (const accept of ['application/json', '*/*', 'text/csv;q=0.4, application/json', 'text/csv;q=0, */*', 'text/html']) {
        const reply = await get(path, keys.admin!, { accept });
        expect(String(reply.headers['content-type']), accept).to.equal('application/json; charset=utf-8');
      }
    });

    it('CSV with Accept: text/csv', async function () {
      const reply = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=state`, keys.admin!, { accept: 'text/csv' });
      expect(reply.status).to.equal(200);
      expect(reply.headers['content-type']).to.match(/^text\/csv/);
      const [header, ...lines] = reply.text.trim().split('\r\n');
      expect(header!.split(',').slice(0, 3)).to.deep.equal(['state', 'received', 'accepted']);
      expect(lines.find((l) => l.startsWith('CA,'))).to.match(/^CA,\d+,\d+/);
    });

    /** Every row of a report, a page of `limit` at a time, checking each page's shape. */
    const pages = async (query: string, key: string, limit: number) => {
      const rows: Array<Record<string, unknown>> = [];
      let cursor: string | null = '';
      for (let guard = 0; cursor !== null && guard < 100; guard++) {
        const reply = await get(`/functions/reports/summary?${query}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, key);
        expect(reply.status, reply.text).to.equal(200);
        const items = reply.body.items as Array<Record<string, unknown>>;
        expect(items.length).to.be.at.most(limit);
        rows.push(...items);
        cursor = reply.body.next_cursor as string | null;
        if (cursor !== null) expect(items).to.have.length(limit);
      }
      expect(cursor, 'reached the last page').to.equal(null);
      return rows;
    };

    it('pages with an opaque cursor like every list: every row once, in the order of the group key', async function () {
      for (const groupBy of ['supplier,sid', 'sid,s1', 's1', 'day,state,buyer']) {
        const query = `from=${today}&to=${today}&group_by=${groupBy}&test=include`;
        const all = await get(`/functions/reports/summary?${query}&limit=500`, keys.admin!);
        expect(all.body.next_cursor).to.equal(null);
        const rows = all.body.items as Array<Record<string, unknown>>;
        expect(rows.length, groupBy).to.be.at.least(2);
        expect(await pages(query, keys.admin!, 1), groupBy).to.deep.equal(rows);
        expect(await pages(query, keys.admin!, 2), groupBy).to.deep.equal(rows);
      }
      // Fifty rows a page unless asked.
      const reply = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=supplier`, keys.admin!);
      expect(reply.body.next_cursor).to.equal(null);
    });

    it('a report by s1 has one row per click id, with the metrics of its leads', async function () {
      const rows = await pages(`from=${today}&to=${today}&group_by=s1`, keys.supA!, 1);
      // c-1 is the CA lead sold to ca-buyer; click-1 the default of the other leads of sup-a (the test lead apart).
      expect(rows.map((r) => r.s1)).to.deep.equal(['c-1', 'click-1']);
      expect(rows[0]).to.include({ received: 1, sold: 1, revenue: 40, avg_price: 40 });
      expect(rows[1]!.received).to.be.at.least(1);
    });

    it('every grouping, in any time zone, equals the report folded in memory from the stored rows', async function () {
      const stored = async (base: 'report_buckets' | 'leads') =>
        await svc.service.readModels.find(svc.service.projections.collection(base), { sort: { field: '_id', direction: 'asc' }, limit: 10_000 });
      const buckets = (await stored('report_buckets')) as unknown as ReportBucket[];
      // Each lead view that counted, as the bucket of a single lead with its s1.
      const leadRows = (await stored('leads'))
        .filter((view) => view.report_received === 1)
        .map((view): ReportBucket => {
          const counters = Object.fromEntries(SUMMED.map((c) => [c, view[`report_${c}`] ?? 0]));
          const { supplier, sid, s1, accident_state: state, buyer, test } = view as unknown as LeadView;
          return { hour: String(view.received_at).slice(0, 13), supplier, sid, s1, state, buyer, test, ...counters };
        });
      expect(leadRows.length, 'lead views that counted').to.be.at.least(2);
      expect(buckets.every((b) => !('s1' in b)), 'no bucket is keyed by s1').to.equal(true);
      const tomorrow = new Date(Date.parse(today) + 86_400_000).toISOString().slice(0, 10);
      for (const tz of ['UTC', 'America/Los_Angeles', 'Asia/Kolkata', 'Pacific/Kiritimati']) {
        for (const groupBy of ['day', 'supplier,day,sid', 'buyer,state', 's1', 'day,s1,buyer', ',']) {
          // From yesterday to tomorrow (UTC dates): in a zone far east of UTC (Kiritimati, +14) the
          // leads posted now are already on tomorrow's local date for much of the UTC day.
          const from = new Date(Date.now() - 86_400_000).toISOString().slice(0, 10);
          const reply = await get(`/functions/reports/summary?from=${from}&to=${tomorrow}&tz=${tz}&group_by=${groupBy}&test=include&limit=500`, keys.admin!);
          const dims = groupBy.split(',').filter(Boolean) as GroupBy[];
          // The same hours the report reads: those from local midnight of `from` to the end of `to`.
          const start = firstHourOfLocalDay(from, tz);
          const end = firstHourOfLocalDay(addDays(tomorrow, 1), tz);
          const inRange = (dims.includes('s1') ? leadRows : buckets).filter((b) => b.hour >= start && b.hour < end);
          const expected = summarise(inRange, dims, tz);
          expect(reply.body.items, `${tz} by ${groupBy}`).to.deep.equal(expected);
          expect(expected.length, `${tz} by ${groupBy}`).to.be.at.least(1);
        }
      }
    });

    it('a cursor from another grouping, or one never given, is 422 naming cursor', async function () {
      const first = await get(`/functions/reports/summary?from=${today}&to=${today}&group_by=supplier,sid&limit=1`, keys.admin!);
      const cursor = first.body.next_cursor as string;
      expect(cursor).to.be.a('string');
      for (const bad of [`group_by=sid,supplier&cursor=${cursor}`, `group_by=s1&cursor=${cursor}`, 'cursor=zzz', `cursor=${Buffer.from('["day",[1]]').toString('base64url')}`]) {
        const reply = await get(`/functions/reports/summary?${bad}`, keys.admin!);
        expect(reply.status, bad).to.equal(422);
        expect((reply.body.errors as Array<{ field: string }>).map((e) => e.field), bad).to.deep.equal(['cursor']);
      }
      const limits = await get('/functions/reports/summary?limit=501', keys.admin!);
      expect((limits.body.errors as Array<{ field: string }>).map((e) => e.field)).to.deep.equal(['limit']);
    });

    it('CSV pulls page after page from the store; a store failing mid-way cuts the response, never a short file that looks whole', async function () {
      const page = (from: number, count: number) => Array.from({ length: count }, (_, i) => ({ key: [`c-${String(from + i).padStart(4, '0')}`], sums: { received: 1 } }));
      // The pages of rows; the report's look at the currency of its money is answered apart (none).
      const pages = sinon.stub<Parameters<typeof svc.service.readModels.aggregate>, ReturnType<typeof svc.service.readModels.aggregate>>();
      const aggregate = sinon.stub(svc.service.readModels, 'aggregate').callsFake((collection, options) => (options.key[0]?.field === 'currency' ? Promise.resolve([]) : pages(collection, options)));
      const read = (): Promise<{ text: string; whole: boolean }> =>
        new Promise((resolve) => {
          const req = request(
            { host: '127.0.0.1', port: svc.port, path: '/functions/reports/summary?group_by=s1', rejectUnauthorized: false, headers: { 'x-api-key': keys.admin!, accept: 'text/csv' } },
            (res) => {
              let text = '';
              res.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
              res.on('end', () => resolve({ text, whole: true }));
              res.on('error', () => resolve({ text, whole: false }));
            },
          );
          req.on('error', () => resolve({ text: '', whole: false }));
          req.end();
        });
      try {
        // Each read asks for a page and one more row, to know whether another page follows.
        pages.onCall(0).resolves(page(0, 501)).onCall(1).resolves(page(500, 501)).onCall(2).resolves(page(1000, 7));
        const whole = await read();
        expect(whole.whole).to.equal(true);
        expect(whole.text.trim().split('\r\n')).to.have.length(1 + 1007);
        expect(pages.getCall(1).args[1].after).to.deep.equal(['c-0499']);
        expect(pages.getCall(2).args[1].after).to.deep.equal(['c-0999']);

        pages.reset();
        pages.onCall(0).resolves(page(0, 501)).onCall(1).rejects(new ReadModelUnavailableError('injected: the read-model store is unreachable'));
        const cut = await read();
        expect(cut.whole).to.equal(false);
        expect(cut.text.split('\r\n').length).to.be.at.least(500);
      } finally {
        aggregate.restore();
      }
    });

    it('bad parameters are 422 naming each one', async function () {
      const reply = await get('/functions/reports/summary?from=2026-13-01&tz=Mars/Base&group_by=day,colour', keys.admin!);
      expect(reply.status).to.equal(422);
      expect((reply.body.errors as Array<{ field: string }>).map((e) => e.field)).to.have.members(['from', 'tz', 'group_by']);
    });

    it('a parameter a list does not take is 422 naming it, on every list: a misspelt filter never answers unfiltered rows', async function () {
      for (const path of [
        '/functions/leads?stauts=sold&limit[]=1',
        '/functions/deliveries?stauts=sold&limit[]=1',
        '/functions/feedback?stauts=sold&limit[]=1',
        '/functions/reports/summary?stauts=sold&limit[]=1',
      ]) {
        const reply = await get(path, keys.admin!);
        expect(reply.status, path).to.equal(422);
        expect(reply.body.errors, path).to.have.deep.members([
          { field: 'stauts', code: 'unknown_field', message: 'stauts is not a parameter of this list' },
          { field: '*', code: 'unknown_field', message: 'a field named with other characters than letters, digits, _ and - is not a parameter of this list (its name is not repeated)' },
        ]);
      }
      // A name that is not a parameter's may be personal data sent without its `email=`: never repeated.
      for (const list of ['leads', 'deliveries', 'feedback', 'reports/summary', 'erasures']) {
        const path = `/functions/${list}?ada.lovelace@outlook.com&%2B12135550143=1`;
        const reply = await get(path, keys.admin!);
        expect(reply.status, path).to.equal(422);
        expect(reply.text, path).to.not.match(/lovelace|2135550143/);
        expect(reply.body.errors, path).to.deep.equal([
          { field: '*', code: 'unknown_field', message: 'a field named with other characters than letters, digits, _ and - is not a parameter of this list (its name is not repeated)' },
        ]);
      }
      // A pair with no name before its `=` is named too, as `*`: a 422 always says where to look.
      for (const path of ['/functions/leads?=1', '/functions/feedback?=1&type=return', '/functions/erasures?=', '/functions/reports/summary?=x']) {
        const reply = await get(path, keys.admin!);
        expect([reply.status, reply.body.errors], path).to.deep.equal([
          422,
          [{ field: '*', code: 'unknown_field', message: 'a parameter with no name (`=` at the start of a pair) is not a parameter of this list' }],
        ]);
      }
      const many = await get(`/functions/leads?${Array.from({ length: 30 }, (_, i) => `p${i}=1`).join('&')}`, keys.admin!);
      expect(many.body.errors).to.have.length(20);
    });

    it('a day that is not in the calendar is 422, in a report and in a list (not taken for a day of the next month)', async function () {
      const report = await get('/functions/reports/summary?from=2026-02-30&to=2026-11-31', keys.admin!);
      expect(report.status, report.text).to.equal(422);
      expect((report.body.errors as Array<{ field: string }>).map((e) => e.field)).to.have.members(['from', 'to']);
      expect((await get('/functions/reports/summary?from=2028-02-29&to=2028-03-01', keys.admin!)).status).to.equal(200);
      for (const path of ['/functions/leads?since=2026-02-29', '/functions/feedback?since=2026-04-31T10:00:00Z']) {
        const reply = await get(path, keys.admin!);
        expect(reply.status, path).to.equal(422);
        expect(reply.body.errors, path).to.deep.equal([{ field: 'since', code: 'invalid_format', message: 'since must be an ISO 8601 date or time' }]);
      }
    });

    it('since and until take ISO 8601 only (a time without an offset is UTC), never what a lenient date parser guesses at', async function () {
      for (const raw of ['2026-11-01 1:00 AM EST', '2026-11-01 GMT+0600', '2026-11-01 (a note)', '2026-11-01 PST', '2026-11-01T08:00 EST', 'Nov 1 2026', '2026-11-01T8:00Z']) {
        for (const list of ['leads', 'deliveries', 'feedback', 'erasures']) {
          const path = `/functions/${list}?since=${encodeURIComponent(raw)}`;
          const reply = await get(path, keys.admin!);
          expect([reply.status, reply.body.errors], path).to.deep.equal([422, [{ field: 'since', code: 'invalid_format', message: 'since must be an ISO 8601 date or time' }]]);
        }
      }
      for (const raw of ['2026-11-01', '2026-11-01T08:00', '2026-11-01T08:00:00', '2026-11-01t08:00:00.123456z', '2026-11-01T03:00:00-05:00']) {
        const reply = await get(`/functions/leads?until=${encodeURIComponent(raw)}`, keys.admin!);
        expect(reply.status, `${raw}: ${reply.text}`).to.equal(200);
      }
      // Without an offset, a time is UTC whatever the process's zone: in New York (UTC-5 or -4), a
      // minute before the newest lead, read as local time, would be hours after it and list it.
      const newest = ((await get('/functions/leads?limit=1', keys.admin!)).body.items as Array<{ lead_id: number; received_at: string }>)[0]!;
      const minuteBefore = new Date(Date.parse(newest.received_at) - 60_000).toISOString().slice(0, 16);
      const zone = process.env.TZ;
      process.env.TZ = 'America/New_York';
      try {
        const bare = await get(`/functions/leads?until=${minuteBefore}&limit=500`, keys.admin!);
        const utc = await get(`/functions/leads?until=${minuteBefore}:00Z&limit=500`, keys.admin!);
        expect((bare.body.items as Array<{ lead_id: number }>).map((lead) => lead.lead_id)).to.not.include(newest.lead_id);
        expect(bare.body.items).to.deep.equal(utc.body.items);
      } finally {
        if (zone === undefined) delete process.env.TZ;
        else process.env.TZ = zone;
      }
    });

    it("without from and to, the last seven days are the report zone's, ending on its today", async function () {
      for (const tz of ['Pacific/Kiritimati', 'Etc/GMT+12', 'UTC']) {
        const before = localDay(new Date(), tz);
        const reply = await get(`/functions/reports/summary?tz=${encodeURIComponent(tz)}`, keys.admin!);
        const after = localDay(new Date(), tz);
        expect(reply.status, reply.text).to.equal(200);
        // Read around the request, so that a day that turns meanwhile does not fail it.
        expect(reply.body.to, tz).to.be.oneOf([before, after]);
        expect(reply.body.from, tz).to.equal(addDays(reply.body.to as string, -6));
        // The money's currency is named with it: the routing file's.
        expect(reply.body.currency, tz).to.equal('USD');
      }
    });
  });
});

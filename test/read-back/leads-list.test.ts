import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';
import { roleKeys } from './role-keys.js';

// GET /functions/leads and GET /functions/me through the real HTTPS server: each role lists only
// the leads it may read, newest first, filtered and paged like every list, with the lead view's
// rule for consumer fields; and a key learns who it is, a buyer its own terms, nothing secret.

const routing = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'], return_reasons: ['bad_phone', 'fraud'], return_window_days: 3 },
    {
      id: 'ny-buyer',
      price: 30,
      states: ['NY'],
      delivery: { kind: 'webhook', url: 'https://ny-buyer.example.com/leads', secret_env: 'NY_BUYER_SECRET' },
    },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

type Row = Record<string, any>;

describe('GET /functions/leads', function () {
  let svc: TestService;
  const keys: Record<string, string> = {};
  const ids: Record<string, number> = {};

  before(async function () {
    svc = await TestService.start({ routing, env: { NY_BUYER_SECRET: 'x'.repeat(32) } });
    Object.assign(keys, await roleKeys(svc));
    const post = async (name: string, key: string, lead: Record<string, unknown>) => {
      const reply = await svc.post(lead, { 'x-api-key': key });
      ids[name] = reply.body.lead_id as number;
    };
    await post('aSold', keys.supA!, validLead({ sid: 'google' }));
    await post('aInvalid', keys.supA!, validLead({ zip: 'bad', sid: 'google' }));
    await post('aUnsold', keys.supA!, validLead({ accident_state: 'TX', zip: '75001', sid: 'bing' }));
    await post('aInvalid2', keys.supA!, validLead({ zip: 'bad', email: 'nope', sid: 'bing' }));
    await post('bSold', keys.supB!, validLead({ sid: 'meta' }));
    await post('bNy', keys.supB!, validLead({ accident_state: 'NY', zip: '10001', sid: 'meta' }));
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
  });
  after(async () => svc.stop());

  const list = async (key: string, query = '') => {
    const reply = await svc.request('GET', `/functions/leads${query}`, { 'x-api-key': key });
    return { status: reply.status, body: reply.body, items: (reply.body.items ?? []) as Row[] };
  };
  const idsOf = (items: Row[]) => items.map((row) => row.lead_id as number);

  it('a supplier lists its own leads only, newest first, with their consumer fields and errors', async function () {
    const { status, body, items } = await list(keys.supA!);
    expect(status).to.equal(200);
    expect(body).to.include({ ok: true, code: 'OK', next_cursor: null });
    expect(body.position).to.have.keys('commit', 'prepare');
    expect(idsOf(items)).to.deep.equal([ids.aInvalid2, ids.aUnsold, ids.aInvalid, ids.aSold]);
    expect(items[3]).to.include({ supplier: 'sup-a', lead_status: 'sold', code: 'SOLD', buyer: 'ca-buyer', sid: 'google' });
    expect(items[3]!.lead).to.include({ last_name: 'Lovelace' });
    expect(items[0]!.errors.map((e: Row) => e.field).sort()).to.deep.equal(['email', 'zip']);
    // A row is the lead view itself.
    const one = await svc.request('GET', `/functions/leads/${ids.aSold}`, { 'x-api-key': keys.supA! });
    expect(items[3]).to.deep.equal(one.body.lead);
  });

  it('filters by status, code, sid and time, each alone and together', async function () {
    expect(idsOf((await list(keys.supA!, '?status=rejected')).items)).to.deep.equal([ids.aInvalid2, ids.aInvalid]);
    expect(idsOf((await list(keys.supA!, '?code=UNSOLD')).items)).to.deep.equal([ids.aUnsold]);
    expect(idsOf((await list(keys.supA!, '?sid=bing')).items)).to.deep.equal([ids.aInvalid2, ids.aUnsold]);
    expect(idsOf((await list(keys.supA!, '?sid=bing&code=INVALID')).items)).to.deep.equal([ids.aInvalid2]);
    // A supplier asking for another's source still gets only its own leads.
    expect((await list(keys.supA!, '?sid=meta')).items).to.deep.equal([]);
    const all = (await list(keys.admin!)).items;
    const mid = all.find((row) => row.lead_id === ids.aUnsold)!.received_at as string;
    expect(idsOf((await list(keys.admin!, `?since=${encodeURIComponent(mid)}`)).items)).to.deep.equal([ids.bNy, ids.bSold, ids.aInvalid2, ids.aUnsold]);
    expect(idsOf((await list(keys.admin!, `?until=${encodeURIComponent(mid)}`)).items)).to.deep.equal([ids.aInvalid, ids.aSold]);
  });

  it('pages with cursor and limit through every lead exactly once', async function () {
    const seen: number[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const query: string = `?limit=2${cursor ? `&cursor=${cursor}` : ''}`;
      const { status, body, items } = await list(keys.analyst!, query);
      expect(status).to.equal(200);
      expect(items.length).to.be.at.most(2);
      seen.push(...idsOf(items));
      cursor = body.next_cursor as string | null;
      pages += 1;
    } while (cursor);
    expect(pages).to.equal(3);
    expect(seen).to.deep.equal([ids.bNy, ids.bSold, ids.aInvalid2, ids.aUnsold, ids.aInvalid, ids.aSold]);
  });

  it('a buyer lists the leads it bought, with their consumer fields; never another buyer\'s', async function () {
    const ca = await list(keys.caBuyer!);
    expect(idsOf(ca.items)).to.deep.equal([ids.bSold, ids.aSold]);
    expect(ca.items[0]!.lead).to.include({ last_name: 'Lovelace' });
    expect(idsOf((await list(keys.nyBuyer!)).items)).to.deep.equal([ids.bNy]);
    expect((await list(keys.caBuyer!, '?status=rejected')).items).to.deep.equal([]);
    expect(idsOf((await list(keys.caBuyer!, '?status=sold&sid=meta')).items)).to.deep.equal([ids.bSold]);
  });

  it('an analyst lists every lead without consumer fields; an admin with them', async function () {
    const analyst = await list(keys.analyst!);
    expect(analyst.items).to.have.length(6);
    for (const row of analyst.items) expect(row.lead, String(row.lead_id)).to.equal(null);
    expect(JSON.stringify(analyst.items)).to.not.contain('Lovelace');
    const admin = await list(keys.admin!);
    const supplier = await list(keys.supA!);
    expect(admin.items.filter((row) => row.supplier === 'sup-a')).to.deep.equal(supplier.items);
    expect(admin.items.filter((row) => row.lead !== null)).to.have.length(4); // a rejected lead keeps no consumer fields
  });

  it('names every bad parameter in one 422', async function () {
    const { status, body } = await list(keys.supA!, '?status=lost&code=bad%20code&sid=a%20b&since=yesterday&until=2026-13-45T00:00:00Z&limit=0&cursor=%21');
    expect(status).to.equal(422);
    expect(body.code).to.equal('INVALID');
    expect((body.errors as Row[]).map((e) => e.field).sort()).to.deep.equal(['code', 'cursor', 'limit', 'sid', 'since', 'status', 'until']);
    const repeated = await list(keys.supA!, '?status=sold&status=rejected');
    expect(repeated.status).to.equal(422);
    expect((repeated.body.errors as Row[]).map((e) => e.field)).to.deep.equal(['status']);
  });

  it('needs a key', async function () {
    const reply = await svc.request('GET', '/functions/leads', {});
    expect(reply.status).to.equal(401);
  });
});

describe('GET /functions/me', function () {
  let svc: TestService;

  before(async function () {
    svc = await TestService.start({ routing, env: { NY_BUYER_SECRET: 'x'.repeat(32) } });
  });
  after(async () => svc.stop());

  const me = async (key: string) => (await svc.request('GET', '/functions/me', { 'x-api-key': key })).body;

  it('says who a key is: role, name and key id', async function () {
    const key = await svc.key('supplier', 'sup-a');
    const body = await me(key);
    expect(body).to.include({ ok: true, code: 'OK', role: 'supplier', name: 'sup-a' });
    expect(key).to.contain(body.key_id as string);
    expect(body).to.not.have.property('buyer');
    expect(await me(await svc.key('analyst', 'ann'))).to.include({ role: 'analyst', name: 'ann' });
  });

  it('gives a buyer its terms from the routing file in force, and nothing secret', async function () {
    const ca = await me(await svc.key('buyer', 'ca-buyer'));
    expect(ca.buyer).to.deep.equal({ id: 'ca-buyer', return_reasons: ['bad_phone', 'fraud'], return_window_days: 3, delivery: 'pull' });
    const ny = await me(await svc.key('buyer', 'ny-buyer'));
    expect(ny.buyer).to.deep.equal({ id: 'ny-buyer', return_reasons: ['bad_phone', 'not_interested', 'duplicate', 'fraud'], return_window_days: 7, delivery: 'webhook' });
    expect(JSON.stringify(ny)).to.not.contain('example.com').and.not.contain('NY_BUYER_SECRET');
    expect((await me(await svc.key('buyer', 'gone-buyer'))).buyer).to.equal(null);
  });

  it('refuses an unknown key', async function () {
    const reply = await svc.request('GET', '/functions/me', { 'x-api-key': 'lp_nope_nope' });
    expect(reply.status).to.equal(401);
  });
});

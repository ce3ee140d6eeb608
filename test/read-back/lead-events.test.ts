import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';
import { roleKeys } from './role-keys.js';

// GET /functions/leads/{id}/events through the real HTTPS server: the lead's stream in order,
// with the lead view's visibility and the lead view's rule for personal data.

const routing = {
  buyers: [
    { id: 'ca-buyer', price: 40, states: ['CA'] },
    { id: 'ny-buyer', price: 30, states: ['NY'] },
  ],
  buckets: [{ id: 'unsold', default: true }],
};

type Row = { revision: number; type: string; occurred_at: string; trace_id: string | null; data: Record<string, any> };
const CONSUMER_FIELDS = ['first_name', 'last_name', 'email', 'mobile', 'mobile_national', 'zip', 'zip4', 'certificate_url', 'certificate_id'];

describe('GET /functions/leads/{id}/events', function () {
  let svc: TestService;
  const keys: Record<string, string> = {};
  let sold: number;
  let rejected: number;
  let soldTrace: string;

  before(async function () {
    svc = await TestService.start({ routing });
    Object.assign(keys, await roleKeys(svc));
    const reply = await svc.post(validLead(), { 'x-api-key': keys.supA! });
    sold = reply.body.lead_id as number;
    soldTrace = reply.body.trace_id as string;
    rejected = (await svc.post(validLead({ zip: 'bad' }), { 'x-api-key': keys.supA! })).body.lead_id as number;
  });
  after(async () => svc.stop());

  const events = async (leadId: number, key: string) => {
    const reply = await svc.request('GET', `/functions/leads/${leadId}/events`, { 'x-api-key': key });
    return { status: reply.status, body: reply.body, items: (reply.body.items ?? []) as Row[] };
  };

  it('the supplier that sent it gets every event in order, with time, trace and the consumer fields', async function () {
    const { status, body, items } = await events(sold, keys.supA!);
    expect(status).to.equal(200);
    expect(body).to.include({ ok: true, code: 'OK', lead_id: sold });
    expect(items.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold']);
    expect(items.map((e) => e.revision)).to.deep.equal([0, 1, 2, 3]);
    for (const event of items) {
      expect(Date.parse(event.occurred_at), event.type).to.not.be.NaN;
      expect(event.trace_id).to.equal(soldTrace);
    }
    expect(items[0]!.data.lead).to.include({ first_name: 'Ada', last_name: 'Lovelace' });
    const candidates = items[2]!.data.candidates as Array<{ buyer: string; eligible: boolean; reason: string }>;
    expect(candidates.map((c) => [c.buyer, c.eligible])).to.deep.equal([['ca-buyer', true], ['ny-buyer', false]]);
    for (const candidate of candidates) expect(candidate.reason).to.be.a('string').and.not.equal('');
  });

  it('an analyst gets the same events with the consumer fields removed', async function () {
    const supplier = await events(sold, keys.supA!);
    const { status, items } = await events(sold, keys.analyst!);
    expect(status).to.equal(200);
    expect(items.map((e) => e.type)).to.deep.equal(supplier.items.map((e) => e.type));
    expect(items[0]!.data.lead).to.deep.equal({ accident_state: 'CA', sid: 'src-1', s1: 'click-1', test: false });
    for (const field of CONSUMER_FIELDS) expect(items[0]!.data.lead, field).to.not.have.property(field);
    const text = JSON.stringify(items);
    const consumer = supplier.items[0]!.data.lead as Record<string, string>;
    for (const value of [consumer.last_name, consumer.email, consumer.mobile, consumer.certificate_url]) expect(text).to.not.contain(value);
    expect(items.slice(1)).to.deep.equal(supplier.items.slice(1));
  });

  it('the buyer that bought it and an admin get the consumer fields', async function () {
    for (const key of [keys.caBuyer!, keys.admin!]) {
      const { status, items } = await events(sold, key);
      expect(status).to.equal(200);
      expect(items[0]!.data.lead).to.include({ last_name: 'Lovelace' });
    }
  });

  it('the buyer sees only its own routing candidate, never the other buyers or their prices, nor the supplier\'s key', async function () {
    const { status, items } = await events(sold, keys.caBuyer!);
    expect(status).to.equal(200);
    const routed = items.find((item) => item.type === 'LeadRouted')!;
    expect((routed.data.candidates as Array<{ buyer: string }>).map((c) => c.buyer)).to.deep.equal(['ca-buyer']);
    expect(JSON.stringify(items)).to.not.include('ny-buyer');
    expect(items[0]!.data).to.not.have.property('key_id');
    // The supplier that sent it still sees every candidate.
    const own = await events(sold, keys.supA!);
    expect((own.items.find((item) => item.type === 'LeadRouted')!.data.candidates as unknown[]).length).to.equal(2);
  });

  it('another supplier and a buyer that did not buy it get 404, as for an unknown lead', async function () {
    for (const key of [keys.supB!, keys.nyBuyer!]) {
      const { status, body } = await events(sold, key);
      expect(status).to.equal(404);
      expect(body.code).to.equal('NOT_FOUND');
    }
    expect((await events(999_999, keys.admin!)).status).to.equal(404);
    expect((await svc.request('GET', '/functions/leads/abc/events', { 'x-api-key': keys.admin! })).status).to.equal(404);
    expect((await svc.request('GET', `/functions/leads/${sold}/events`)).status).to.equal(401);
  });

  it('a rejected lead shows why: its code and every failing field', async function () {
    const { items } = await events(rejected, keys.analyst!);
    expect(items.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadRejected']);
    expect(items[1]!.data).to.include({ code: 'INVALID' });
    expect((items[1]!.data.errors as Array<{ field: string }>).map((e) => e.field)).to.include('zip');
  });
});

describe('GET /functions/leads/{id}/events is rate-limited with the read routes', function () {
  let svc: TestService;
  after(async () => svc?.stop());

  it('past the read burst: 429 RATE_LIMITED with Retry-After', async function () {
    svc = await TestService.start({ routing, env: { READ_RATE_LIMIT_PER_SECOND: '1', READ_RATE_LIMIT_BURST: '1' } });
    const key = await svc.key('supplier', 'sup-a');
    const leadId = (await svc.post(validLead(), { 'x-api-key': key })).body.lead_id as number;
    const first = await svc.request('GET', `/functions/leads/${leadId}/events`, { 'x-api-key': key });
    expect(first.status).to.equal(200);
    expect(first.headers['ratelimit-limit']).to.equal('1');
    const second = await svc.request('GET', `/functions/leads/${leadId}/events`, { 'x-api-key': key });
    expect(second.status).to.equal(429);
    expect(second.body.code).to.equal('RATE_LIMITED');
    expect(second.headers['retry-after']).to.be.a('string');
  });
});

import { expect } from 'chai';
import { type Reply, TestService, validLead } from '../support/service.js';

// The routing file names the currency the service's money is in. Every answer says it: a lead's
// envelope whatever became of the lead (also one rejected before any routing priced it), every
// answer that recorded no lead, a ping's, and the lead view read back, one lead or a list.

const routing = {
  currency: 'EUR',
  buyers: [{ id: 'ca-buyer', price: 40, states: ['CA'], ping: { kind: 'static' } }],
  buckets: [{ id: 'unsold', default: true }],
};

describe('the routing file names the currency of every answer', function () {
  this.timeout(30_000);
  let svc: TestService;
  let supplier: string;
  let admin: string;
  /** Each lead posted below, by what became of it. */
  const leads: Record<string, number> = {};

  before(async function () {
    svc = await TestService.start({ routing });
    supplier = await svc.key('supplier', 'sup-1');
    admin = await svc.key('admin', 'root');
  });
  after(async () => svc?.stop());

  const post = (body: unknown, headers: Record<string, string> = {}) => svc.post(body, { 'x-api-key': supplier, ...headers });
  it('a lead sold, unsold, invalid, a duplicate, failing verification or differing from its ping: EUR', async function () {
    const sold = validLead();
    const answers: Record<string, Reply> = {};
    answers.sold = await post(sold);
    answers.unsold = await post(validLead({ accident_state: 'TX', zip: '75001' }));
    answers.invalid = await post(validLead({ zip: 'nope' }));
    answers.duplicate = await post(sold);
    answers.unverified = await post(validLead({ email: 'ada@no-mx.example.com' }));
    const pinged = await svc.post({ zip: '90210', accident_state: 'CA', sid: 'src-1', s1: `currency-${Date.now()}` }, { 'x-api-key': supplier }, '/functions/pings');
    expect(pinged.body, pinged.text).to.include({ code: 'BID', currency: 'EUR' });
    answers.mismatch = await post(validLead({ ping_id: pinged.body.ping_id, accident_state: 'NV', zip: '89101' }));
    for (const [name, reply] of Object.entries(answers)) leads[name] = reply.body.lead_id as number;
    expect(Object.values(answers).map((reply) => [reply.body.code, reply.body.currency])).to.deep.equal([
      ['SOLD', 'EUR'],
      ['UNSOLD', 'EUR'],
      ['INVALID', 'EUR'],
      ['DUPLICATE', 'EUR'],
      ['VERIFICATION_FAILED', 'EUR'],
      ['PING_MISMATCH', 'EUR'],
    ]);
  });

  it('an answer that recorded no lead, a ping refused, and a replayed or conflicting Idempotency-Key: EUR', async function () {
    const lead = validLead();
    const answers = [
      await post('{"first_name":'),
      await svc.post(validLead(), {}),
      await svc.post({ zip: 'nope' }, { 'x-api-key': supplier }, '/functions/pings'),
      await post(lead, { 'idempotency-key': 'eur-1' }),
      await post(lead, { 'idempotency-key': 'eur-1' }),
      await post(validLead(), { 'idempotency-key': 'eur-1' }),
      await svc.request('GET', '/functions/nothing-here'),
      await svc.plainHttp('POST', '/functions/leads'),
      // Refused by the listener before any route.
      await svc.request('GET', '/functions/leads', { 'x-filler': 'f'.repeat(20 * 1024) }),
    ];
    expect(answers.map((reply) => [reply.status, reply.body.code, reply.body.currency])).to.deep.equal([
      [400, 'MALFORMED_JSON', 'EUR'],
      [401, 'UNAUTHORIZED', 'EUR'],
      [422, 'INVALID', 'EUR'],
      [201, 'SOLD', 'EUR'],
      [201, 'SOLD', 'EUR'],
      [422, 'IDEMPOTENCY_CONFLICT', 'EUR'],
      [404, 'NOT_FOUND', 'EUR'],
      [403, 'HTTPS_REQUIRED', 'EUR'],
      [431, 'PAYLOAD_TOO_LARGE', 'EUR'],
    ]);
  });

  it('each lead read back, alone and in the list, from its stream and from the read model: EUR', async function () {
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    for (const [name, id] of Object.entries(leads)) {
      const reply = await svc.request('GET', `/functions/leads/${id}`, { 'x-api-key': supplier });
      expect((reply.body.lead as Record<string, unknown>).currency, name).to.equal('EUR');
    }
    const listed = (await svc.request('GET', '/functions/leads?limit=500', { 'x-api-key': supplier })).body.items as Array<{ lead_id: number; currency: string }>;
    const ours = listed.filter((row) => Object.values(leads).includes(row.lead_id));
    expect(ours.map((row) => row.currency)).to.deep.equal(Object.values(leads).map(() => 'EUR'));
    const rejected = (await svc.request('GET', '/functions/leads?status=rejected', { 'x-api-key': admin })).body.items as Array<{ currency: string }>;
    expect(rejected.length).to.be.greaterThan(3);
    expect(new Set(rejected.map((row) => row.currency))).to.deep.equal(new Set(['EUR']));
  });
});

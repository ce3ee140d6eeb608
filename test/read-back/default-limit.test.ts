import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

// A list asked for without `limit` gives 50 rows a page and a cursor to the rest: 55 leads, each
// sold (so each has a delivery row too), read through the real HTTPS server as an admin.

const LEADS = 55;
const DEFAULT_LIMIT = 50;

const routing = { buyers: [{ id: 'ca-buyer', price: 40 }], buckets: [{ id: 'unsold', default: true }] };

type Row = Record<string, unknown>;

describe('lists without a limit', function () {
  this.timeout(60_000);
  let svc: TestService;
  let admin: string;
  const leadIds: number[] = [];

  before(async function () {
    svc = await TestService.start({ routing, deliveryWorker: false });
    const supplier = await svc.key('supplier', 'sup-a');
    admin = await svc.key('admin', 'root');
    for (let i = 0; i < LEADS; i += 11) {
      const replies = await Promise.all(Array.from({ length: Math.min(11, LEADS - i) }, () => svc.post(validLead(), { 'x-api-key': supplier })));
      for (const reply of replies) {
        expect(reply.body, reply.text).to.include({ code: 'SOLD' });
        leadIds.push(reply.body.lead_id as number);
      }
    }
    expect(new Set(leadIds).size).to.equal(LEADS);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
  });
  after(async () => svc?.stop());

  async function get(path: string) {
    const reply = await svc.request('GET', path, { 'x-api-key': admin });
    expect(reply.status, reply.text).to.equal(200);
    return { items: reply.body.items as Row[], next: reply.body.next_cursor as string | null };
  }

  /** The first page without a limit, then the page its cursor names. */
  async function twoPages(route: string) {
    const first = await get(route);
    expect(first.items, 'first page').to.have.length(DEFAULT_LIMIT);
    expect(first.next, 'a cursor to the rest').to.be.a('string').and.not.equal('');
    const second = await get(`${route}?cursor=${encodeURIComponent(first.next!)}`);
    expect(second.items, 'the rest').to.have.length(LEADS - DEFAULT_LIMIT);
    expect(second.next).to.equal(null);
    return [...first.items, ...second.items].map((row) => row.lead_id as number);
  }

  it('GET /functions/leads gives 50 leads and a cursor, then the other 5: every lead once', async function () {
    const listed = await twoPages('/functions/leads');
    expect([...listed].sort((a, b) => a - b)).to.deep.equal([...leadIds].sort((a, b) => a - b));
    expect(new Set(listed).size).to.equal(LEADS);
  });

  it('GET /functions/deliveries gives 50 deliveries and a cursor, then the other 5: every sold lead once', async function () {
    await svc.service.projections.runner('deliveries')!.waitFor(await svc.service.store.headPosition());
    const listed = await twoPages('/functions/deliveries');
    expect([...listed].sort((a, b) => a - b)).to.deep.equal([...leadIds].sort((a, b) => a - b));
  });
});

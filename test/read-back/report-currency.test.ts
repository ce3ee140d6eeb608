import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ALWAYS_OPEN_ROUTING, TestService, validLead } from '../support/service.js';

// A report adds up money of one currency. The routing file's currency can change (a reload); the
// sales before it keep the currency they were recorded in. A report over days of one currency
// names that currency, whatever the file says now; a report over the change is refused, naming the
// dates, rather than adding dollars to euros under one label.

describe('reports after the routing file changed its currency', function () {
  this.timeout(60_000);
  let svc: TestService;
  let analyst: string;
  let supplier: string;
  const report = (query: string) => svc.request('GET', `/functions/reports/summary?${query}`, { 'x-api-key': analyst });
  const caughtUp = async () => svc.service.projections.waitFor(await svc.service.store.headPosition());

  before(async function () {
    svc = await TestService.start({ routing: ALWAYS_OPEN_ROUTING });
    analyst = await svc.key('analyst', 'ann');
    supplier = await svc.key('supplier', 'sup-a');
  });
  after(async () => svc.stop());

  it('a range of one currency names it, even after the file changed; a range over the change is 422 naming from and to', async function () {
    const sell = async () => {
      const reply = await svc.post(validLead({ accident_state: 'TX' }), { 'x-api-key': supplier });
      expect(reply.body.sold, reply.text).to.equal(true);
      return reply.body;
    };
    const dollars = await sell();
    expect(dollars.currency).to.equal('USD');
    await caughtUp();
    const before = await report('group_by=buyer');
    expect([before.status, before.body.currency], before.text).to.deep.equal([200, 'USD']);

    writeFileSync(join(svc.dataDir, 'routing.json'), JSON.stringify({ ...ALWAYS_OPEN_ROUTING, currency: 'EUR' }));
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    // Nothing sold in euros yet: the range's money is still all dollars, and the report says so.
    const stillDollars = await report('group_by=buyer');
    expect([stillDollars.status, stillDollars.body.currency, (stillDollars.body.items as Array<{ revenue: number }>)[0]!.revenue]).to.deep.equal([200, 'USD', dollars.revenue]);

    const euros = await sell();
    expect(euros.currency).to.equal('EUR');
    await caughtUp();
    for (const query of ['group_by=buyer', 'group_by=day', 'group_by=s1', 'group_by=supplier&test=include']) {
      const mixed = await report(query);
      expect(mixed.status, `${query}: ${mixed.text}`).to.equal(422);
      expect((mixed.body.errors as Array<{ field: string; code: string }>).map((e) => [e.field, e.code]), query).to.deep.equal([
        ['from', 'mixed_currencies'],
        ['to', 'mixed_currencies'],
      ]);
      expect((mixed.body.errors as Array<{ message: string }>)[0]!.message).to.match(/recorded in EUR and USD/);
    }
    const csv = await svc.request('GET', '/functions/reports/summary?group_by=buyer', { 'x-api-key': analyst, accept: 'text/csv' });
    expect(csv.status, csv.text).to.equal(422);
    // A range that holds no money names the file's currency: tomorrow has no sale yet.
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString().slice(0, 10);
    const empty = await report(`from=${tomorrow}&to=${tomorrow}`);
    expect([empty.status, empty.body.currency]).to.deep.equal([200, 'EUR']);
  });
});

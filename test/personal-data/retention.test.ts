import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

// PII_RETENTION_DAYS: leads older than that lose their personal data in the background, recorded
// as LeadPersonalDataExpired; newer leads, outcomes and reports stay as they were.

describe('retention of personal data (PII_RETENTION_DAYS)', function () {
  this.timeout(60_000);

  it('shreds the leads older than the retention period, once, and keeps the newer ones and every outcome', async function () {
    let now = new Date('2026-03-01T12:00:00Z');
    const svc = await TestService.start({ now: () => now, env: { PII_RETENTION_DAYS: '30' } });
    try {
      const supplier = await svc.key();
      const admin = await svc.key('admin', 'root');
      const old = await svc.post(validLead(), { 'x-api-key': supplier });
      now = new Date('2026-03-20T12:00:00Z');
      const recent = await svc.post(validLead(), { 'x-api-key': supplier });
      expect([old.status, recent.status]).to.deep.equal([201, 201]);
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const report = () => svc.request('GET', '/functions/reports/summary?from=2026-02-01&to=2026-04-30&group_by=supplier', { 'x-api-key': admin });
      const before = await report();

      now = new Date('2026-04-05T12:00:00Z');
      expect(await svc.service.retention!.sweep()).to.equal(1);
      expect(await svc.service.retention!.sweep(), 'each lead once').to.equal(0);
      await svc.service.projections.waitFor(await svc.service.store.headPosition());

      const view = (id: unknown) => svc.request('GET', `/functions/leads/${id as number}`, { 'x-api-key': admin });
      const shredded = (await view(old.body.lead_id)).body.lead as { lead: Record<string, unknown>; code: string };
      expect(shredded.lead).to.include({ erased: true, zip: '90210' }).and.not.have.any.keys('email', 'mobile', 'first_name', 'pii');
      expect(shredded.code).to.equal('SOLD');
      const kept = (await view(recent.body.lead_id)).body.lead as { lead: Record<string, unknown> };
      expect(kept.lead).to.have.property('email');
      const events = await svc.request('GET', `/functions/leads/${old.body.lead_id as number}/events`, { 'x-api-key': admin });
      const expired = (events.body.items as Array<{ type: string; data: Record<string, unknown> }>).filter((e) => e.type.startsWith('LeadPersonalData'));
      expect(expired.map((e) => e.type)).to.deep.equal(['LeadPersonalDataExpired']);
      expect(expired[0]!.data).to.include({ retention_days: 30 });
      expect((await report()).body.items).to.deep.equal(before.body.items);
    } finally {
      await svc.stop();
    }
  });

  it('unset, nothing is shredded: there is no sweeper', async function () {
    const svc = await TestService.start();
    try {
      expect(svc.service.retention).to.equal(null);
    } finally {
      await svc.stop();
    }
  });
});

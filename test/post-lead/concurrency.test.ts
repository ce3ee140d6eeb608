import { expect } from 'chai';
import { TestService, validLead } from '../support/service.js';

describe('post-lead under concurrency', function () {
  this.timeout(60_000);

  describe('one server', function () {
    let svc: TestService;
    let key: string;
    before(async () => {
      svc = await TestService.start();
      key = await svc.key();
    });
    after(async () => svc.stop());

    it('20 concurrent copies of one consumer: exactly one accepted, 19 DUPLICATE', async function () {
      const lead = validLead();
      const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(lead, { 'x-api-key': key })));
      expect(replies.filter((r) => r.status === 201)).to.have.length(1);
      expect(replies.filter((r) => r.status === 409 && r.body.code === 'DUPLICATE')).to.have.length(19);
      // Every copy was recorded as its own lead: 20 distinct ids.
      expect(new Set(replies.map((r) => r.body.lead_id)).size).to.equal(20);
    });

    it('sequential copies with the same e-mail from another supplier are duplicates too', async function () {
      const lead = validLead();
      expect((await svc.post(lead, { 'x-api-key': key })).status).to.equal(201);
      const other = await svc.key('supplier', 'sup-2');
      const copy = await svc.post(validLead({ email: lead.email }), { 'x-api-key': other });
      expect(copy.body.code).to.equal('DUPLICATE');
    });

    it('20 concurrent posts with one Idempotency-Key: one lead; the rest are in flight (409) or the replay', async function () {
      const lead = validLead();
      const headers = { 'x-api-key': key, 'idempotency-key': `burst-${Date.now()}` };
      const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(lead, headers)));
      const created = replies.filter((r) => r.status === 201);
      const inFlight = replies.filter((r) => r.status === 409);
      for (const reply of inFlight) {
        expect(reply.body.code).to.equal('IDEMPOTENCY_CONFLICT');
        expect(reply.headers['retry-after']).to.equal('1');
      }
      expect(created.length + inFlight.length).to.equal(20);
      // However many 201s (the original and replays), they name one and the same lead.
      expect(new Set(created.map((r) => r.body.lead_id)).size).to.equal(1);
      expect(created.filter((r) => r.headers['idempotency-replayed'] !== 'true')).to.have.length(1);
      const after = await svc.post(lead, headers);
      expect(after.headers['idempotency-replayed']).to.equal('true');
      expect(after.body.lead_id).to.equal(created[0]!.body.lead_id);
    });
  });

  // Two server processes sharing one data dir, 200 posts at once: test/reliability/concurrency.test.ts.
});

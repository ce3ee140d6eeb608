import { expect } from 'chai';
import { comparePositions } from '../../src/event-store/port.js';
import { type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import { openLead } from '../../src/events/codec/index.js';
import type { PiiEnvelope, StoredLead } from '../../src/leads/lead.js';
import { openPersonalDataKeys } from '../../src/personal-data/index.js';
import { ReadBack } from '../../src/read-models/read-back.js';
import { TestService, leadWith, testMobile } from '../support/service.js';
import { until } from '../support/until.js';

// An erasure racing posts of the same consumer: every lead recorded up to the erasure's last look
// for the consumer's leads (its answer's `as_of`, after every lead answered before the erasure
// was asked) is unreadable afterwards, in this process and in one whose key cache still held the
// lead's key.

const ADMIN = { role: 'admin' as const, name: 'root', keyId: 'k-admin' };

describe('erasure racing posts of the same consumer', function () {
  this.timeout(90_000);

  it('leaves no readable personal data of any lead recorded up to its last look (as_of), also for a reader whose key cache held the keys', async function () {
    const run = (Date.now() % 100_000) + 700_000;
    const email = `race.${run}@example.com`;
    const mobile = testMobile(run);
    const svc = await TestService.start();
    // Another process's keys: a cache of its own, warmed before the erasure.
    const otherKeys = await openPersonalDataKeys({ dataDir: svc.dataDir });
    try {
      const supplier = await svc.key();
      const admin = await svc.key('admin', 'root');
      const posted: number[] = [];
      const post = async (i: number) => {
        const reply = await svc.post(leadWith(email, mobile, { s1: `r-${i}`, test: i % 3 === 0 }), { 'x-api-key': supplier });
        if (typeof reply.body.lead_id === 'number') posted.push(reply.body.lead_id);
      };
      for (let i = 0; i < 10; i++) await post(i);
      for (const id of posted) {
        const [received] = await svc.service.store.readStream(leadStream(id), { maxCount: 1 });
        await openLead(otherKeys, id, (received!.data as LeadReceived['data']).lead!);
      }
      const before = posted.length;

      // Three posters keep posting the consumer's leads while the erasure runs.
      let stop = false;
      let n = 100;
      const posters = Array.from({ length: 3 }, async () => {
        while (!stop) await post(n++);
      });
      // The erasure is asked once the posters are under way (a few of their leads recorded).
      await until(() => `three leads of the posters recorded (${posted.length - before} so far)`, () => posted.length >= before + 3, 10_000, 5);
      const erased = await svc.post({ email, mobile }, { 'x-api-key': admin }, '/functions/erasures');
      stop = true;
      await Promise.all(posters);
      expect(erased.status, erased.text).to.equal(201);

      // Every lead recorded up to the erasure's last look (as_of) must be gone; a lead the
      // posters recorded after it is one the erasure could not have known of when it answered.
      const fence = (erased.body.erasure as { as_of: { commit: number; prepare: number } }).as_of;
      const readBack = new ReadBack({
        events: svc.service.store,
        personalData: otherKeys,
        readModels: svc.service.readModels,
        collection: (base) => svc.service.projections.collection(base),
        position: () => svc.service.projections.position(),
        routing: () => ({ currency: 'USD', buyers: [] }),
      });
      let covered = 0;
      for (const id of posted) {
        const [received] = await svc.service.store.readStream(leadStream(id), { maxCount: 1 });
        if (comparePositions(received!.position, fence) > 0) continue;
        covered += 1;
        const lead = (received!.data as LeadReceived['data']).lead as StoredLead & { pii?: PiiEnvelope };
        expect(await svc.service.personalData.get(lead.pii!.key), `key of lead ${id}`).to.equal(null);
        // Over HTTP, and through a reader whose cache still holds the key: erased, no field.
        const view = await svc.request('GET', `/functions/leads/${id}`, { 'x-api-key': admin });
        expect((view.body.lead as { lead: Record<string, unknown> }).lead, `lead ${id}`).to.include({ erased: true }).and.not.have.property('email');
        const cached = await readBack.lead(ADMIN, String(id));
        expect(cached!.lead, `lead ${id} from the other cache`).to.include({ erased: true }).and.not.have.property('email');
        const events = await readBack.leadEvents(ADMIN, String(id));
        expect(JSON.stringify(events), `events of lead ${id} from the other cache`).to.not.include(email);
      }
      // The race was real: leads posted while the erasure ran were caught by it.
      expect(covered, `${before} before, ${posted.length} posted in all`).to.be.above(before);
    } finally {
      await otherKeys.close();
      await svc.stop();
    }
  });

  it('three identical erasures at once: every lead reported once, in one erasure', async function () {
    const run = (Date.now() % 100_000) + 800_000;
    const email = `twice.${run}@example.com`;
    const svc = await TestService.start();
    try {
      const supplier = await svc.key();
      const admin = await svc.key('admin', 'root');
      const ids: number[] = [];
      for (let i = 0; i < 8; i++) ids.push((await svc.post(leadWith(email, testMobile(run + i)), { 'x-api-key': supplier })).body.lead_id as number);
      const answers = await Promise.all([1, 2, 3].map(() => svc.post({ email }, { 'x-api-key': admin }, '/functions/erasures')));
      expect(answers.map((a) => a.status).sort()).to.satisfy((statuses: number[]) => statuses.every((s) => s === 200 || s === 201) && statuses.includes(201));
      const ids0 = new Set(answers.map((a) => (a.body.erasure as { erasure_id: string }).erasure_id));
      expect(ids0.size).to.equal(1);
      const recorded = await svc.service.store.readStream(`erasure-${[...ids0][0]!}`);
      const reported = recorded.flatMap((e) => (e.data as { lead_ids: number[] }).lead_ids);
      expect(reported.sort((a, b) => a - b)).to.deep.equal(ids);
      for (const answer of answers) expect(answer.body.erasure).to.include({ leads_erased: 8 });
    } finally {
      await svc.stop();
    }
  });
});

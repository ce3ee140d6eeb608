import { expect } from 'chai';
import sinon from 'sinon';
import { hash } from 'node:crypto';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { openPersonalDataKeys } from '../../src/personal-data/index.js';
import { ContactHashes } from '../../src/personal-data/contact-hashes.js';
import { TestService, leadWith, testMobile } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// Contact streams are named by an HMAC under a secret of the key store. A data dir written before
// that has contact streams named by plain SHA-256: for one duplicate window they still count.

const DAY_MS = 86_400_000;
const plainStream = (kind: string, value: string) => `contact-${hash('sha256', `${kind}\n${value}`, 'hex')}`;

describe('contact hashes: keyed, with an upgrade path from plain hashes', function () {
  this.timeout(30_000);

  it('a fresh data dir names contact streams by HMAC only, the same after a restart', async function () {
    const dir = tempDir('contact-hmac');
    try {
      const mobile = testMobile(4_100_001);
      const svc = await TestService.start({ dataDir: dir.path });
      let named: string;
      try {
        const key = await svc.key();
        expect((await svc.post(leadWith('hmac-1@example.com', mobile), { 'x-api-key': key })).status).to.equal(201);
        named = svc.service.contactHashes.stream('mobile', mobile);
        expect(await svc.service.store.readStream(named)).to.have.length(1);
        expect(await svc.service.store.readStream(plainStream('mobile', mobile))).to.have.length(0);
        expect(svc.service.contactHashes.olderStream('mobile', mobile, new Date(), 30)).to.equal(null);
      } finally {
        await svc.stop();
      }
      const again = await TestService.start({ dataDir: dir.path });
      try {
        expect(again.service.contactHashes.stream('mobile', mobile)).to.equal(named);
        const key = await again.key();
        const repeat = await again.post(leadWith('hmac-2@example.com', mobile), { 'x-api-key': key });
        expect(repeat.body.code).to.equal('DUPLICATE');
      } finally {
        await again.stop();
      }
    } finally {
      dir.remove();
    }
  });

  it("a post computes each contact's keyed hash once: it names the stream and is recorded with the lead", async function () {
    const svc = await TestService.start({});
    try {
      const key = await svc.key();
      const hash = sinon.spy(svc.service.contactHashes, 'hash');
      const mobile = testMobile(4_100_003);
      const reply = await svc.post(leadWith('once@example.com', mobile), { 'x-api-key': key });
      expect(reply.status, reply.text).to.equal(201);
      expect(hash.callCount).to.equal(2);
      const [received] = await svc.service.store.readStream(`lead-${String(reply.body.lead_id)}`, { maxCount: 1 });
      expect((received!.data as { contacts?: unknown }).contacts).to.deep.equal({ mobile: hash.returnValues[0], email: hash.returnValues[1] });
      expect(await svc.service.store.readStream(svc.service.contactHashes.stream('mobile', mobile))).to.have.length(1);
    } finally {
      sinon.restore();
      await svc.stop();
    }
  });

  it('a contact claimed under its plain hash before the upgrade is still a duplicate, for one window', async function () {
    const dir = tempDir('contact-upgrade');
    const t0 = new Date('2026-11-20T12:00:00Z');
    const mobile = testMobile(4_100_002);
    try {
      // What an older release left: a lead posted and sold, its mobile claimed under the plain hash.
      const raw = await EmbeddedEventStore.open(dir.path);
      await raw.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { from: 1, to: 100, instance: 'old' } }]);
      await raw.append('lead-1', [
        { type: 'LeadReceived', data: { lead_id: 1 }, metadata: { schema: 1 } },
        { type: 'LeadSold', data: { lead_id: 1 }, metadata: { schema: 1 } },
      ]);
      await raw.append(plainStream('mobile', mobile), [{ type: 'ContactClaimed', data: { lead_id: 1, claimed_at: new Date(t0.getTime() - DAY_MS).toISOString() } }]);
      await raw.close();

      const svc = await TestService.start({ dataDir: dir.path, now: () => t0 });
      try {
        const key = await svc.key();
        const reply = await svc.post(leadWith('upgrade@example.com', mobile), { 'x-api-key': key });
        expect(reply.status, reply.text).to.equal(409);
        expect(reply.body.code).to.equal('DUPLICATE');
        expect(svc.service.contactHashes.olderStream('mobile', mobile, t0, 30)).to.equal(plainStream('mobile', mobile));
        // Once a window has passed since the upgrade, old names are never read again.
        expect(svc.service.contactHashes.olderStream('mobile', mobile, new Date(t0.getTime() + 30 * DAY_MS), 30)).to.equal(null);
      } finally {
        await svc.stop();
      }
    } finally {
      dir.remove();
    }
  });

  it('the secret comes from the key store: another data dir names the same contact differently', async function () {
    const [a, b] = [tempDir('contact-a'), tempDir('contact-b')];
    try {
      const names = [];
      for (const dir of [a, b]) {
        const keys = await openPersonalDataKeys({ dataDir: dir.path });
        const store = await EmbeddedEventStore.open(dir.path);
        try {
          names.push((await ContactHashes.open(keys, store)).stream('email', 'same@example.com'));
        } finally {
          await store.close();
          await keys.close();
        }
      }
      expect(names[0]).to.not.equal(names[1]);
    } finally {
      a.remove();
      b.remove();
    }
  });
});

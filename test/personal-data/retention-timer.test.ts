import { expect } from 'chai';
import { RetentionSweeper } from '../../src/commands/retention.js';
import type { RecordedEvent } from '../../src/event-store/port.js';
import { leadStream } from '../../src/events/lead-events.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// The retention sweep runs on its own: no test code calls sweep(). A service started with
// PII_RETENTION_DAYS sweeps as soon as it holds the `retention` lease, then again an hour after each
// sweep. The leads are posted by a first service (without retention) under a stubbed clock; a
// second service on the same data dir, with the retention set and its clock 40 days on, finds them
// due, and its start-up sweep shreds the one past 30 days and keeps the one 20 days old.

const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;
const T0 = new Date('2026-03-01T12:00:00Z');

async function until<T>(what: string, look: () => Promise<T | undefined>, timeoutMs = 20_000): Promise<T> {
  const started = Date.now();
  for (;;) {
    const found = await look();
    if (found !== undefined) return found;
    if (Date.now() - started > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const typesOf = (events: readonly RecordedEvent[]) => events.map((e) => e.type);

describe('retention runs by itself (PII_RETENTION_DAYS)', function () {
  this.timeout(60_000);

  it('a service started with the retention set shreds the leads already past it, with nobody calling sweep(), and sweeps again an hour later', async function () {
    const dir = tempDir('retention-timer');
    let now = T0;
    let first: TestService | undefined;
    let second: TestService | undefined;
    // The retention sweeper's timers, as it sets them (the real setTimeout still runs each one).
    const realSetTimeout = globalThis.setTimeout;
    const sweeperDelays: number[] = [];
    try {
      first = await TestService.start({ dataDir: dir.path, now: () => now });
      const supplier = await first.key('supplier', 'sup-1');
      const oldLead = validLead();
      const old = await first.post(oldLead, { 'x-api-key': supplier });
      now = new Date(T0.getTime() + 20 * DAY_MS);
      const recent = await first.post(validLead(), { 'x-api-key': supplier });
      expect([old.body.code, recent.body.code]).to.deep.equal(['SOLD', 'SOLD']);
      await first.service.projections.waitFor(await first.service.store.headPosition());
      await first.stop();
      first = undefined;

      globalThis.setTimeout = Object.assign(
        function (this: unknown, ...args: Parameters<typeof setTimeout>) {
          if (new Error().stack?.includes('/commands/retention.')) sweeperDelays.push(Number(args[1] ?? 0));
          return realSetTimeout.apply(this, args);
        },
        realSetTimeout,
      ) as typeof setTimeout;

      now = new Date(T0.getTime() + 40 * DAY_MS);
      second = await TestService.start({ dataDir: dir.path, now: () => now, env: { PII_RETENTION_DAYS: '30' } });
      const svc = second;
      expect(svc.service.retention, 'the sweeper runs in this process').to.not.equal(null);
      const admin = await svc.key('admin', 'root');
      const oldId = old.body.lead_id as number;

      const events = await until('LeadPersonalDataExpired on the old lead', async () => {
        const stream = await svc.service.store.readStream(leadStream(oldId));
        return typesOf(stream).includes('LeadPersonalDataExpired') ? stream : undefined;
      });
      const expired = events.find((e) => e.type === 'LeadPersonalDataExpired')!;
      expect(expired.data).to.include({ lead_id: oldId, retention_days: 30, expired_at: now.toISOString() });
      expect(expired.metadata).to.include({ causation_id: 'retention' });
      expect(typesOf(await svc.service.store.readStream(leadStream(recent.body.lead_id as number)))).to.not.include('LeadPersonalDataExpired');

      // The sweep that ran is followed by the next, an hour on.
      await until('the next sweep scheduled', async () => (sweeperDelays.includes(HOUR_MS) ? true : undefined));
      expect(sweeperDelays[0], 'the first sweep at once').to.equal(0);
      globalThis.setTimeout = realSetTimeout;

      // Read back, the old lead has no personal data left; its outcome stays. The recent one keeps it.
      const view = async (id: unknown) => (await svc.request('GET', `/functions/leads/${id as number}`, { 'x-api-key': admin })).body.lead as { lead: Record<string, unknown>; code: string };
      const shredded = await view(oldId);
      expect(shredded.code).to.equal('SOLD');
      expect(shredded.lead).to.include({ erased: true, zip: '90210' }).and.not.have.any.keys('email', 'mobile', 'first_name', 'last_name', 'pii');
      expect(JSON.stringify(shredded)).to.not.include(oldLead.email as string).and.not.include(oldLead.mobile as string);
      expect((await view(recent.body.lead_id)).lead).to.have.property('email');
      const readBack = await svc.request('GET', `/functions/leads/${oldId}/events`, { 'x-api-key': admin });
      const received = (readBack.body.items as Array<{ type: string; data: { lead: Record<string, unknown> } }>).find((e) => e.type === 'LeadReceived')!;
      expect(received.data.lead).to.not.have.any.keys('email', 'mobile', 'first_name', 'last_name');
      // The list, once projected, too.
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const listed = (await svc.request('GET', '/functions/leads', { 'x-api-key': admin })).body.items as Array<{ lead_id: number; lead: Record<string, unknown> }>;
      expect(listed.find((row) => row.lead_id === oldId)!.lead).to.include({ erased: true }).and.not.have.any.keys('email', 'mobile', 'first_name');
    } finally {
      globalThis.setTimeout = realSetTimeout;
      await first?.stop();
      await second?.stop();
      dir.remove();
    }
  });

  it('a started sweeper sweeps again after its interval: a lead that becomes due later is shredded with nobody calling sweep()', async function () {
    let now = T0;
    const svc = await TestService.start({ now: () => now });
    const sweeper = new RetentionSweeper({
      store: svc.service.store,
      keys: svc.service.personalData,
      readModels: svc.service.readModels,
      leads: () => svc.service.projections.collection('leads'),
      days: 30,
      now: () => now,
      intervalMs: 50,
    });
    try {
      const supplier = await svc.key('supplier', 'sup-1');
      sweeper.start();
      const lead = await svc.post(validLead(), { 'x-api-key': supplier });
      expect(lead.body.code).to.equal('SOLD');
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const stream = leadStream(lead.body.lead_id as number);
      expect(typesOf(await svc.service.store.readStream(stream)), 'not due yet').to.not.include('LeadPersonalDataExpired');

      now = new Date(T0.getTime() + 31 * DAY_MS);
      const events = await until('LeadPersonalDataExpired', async () => {
        const read = await svc.service.store.readStream(stream);
        return typesOf(read).includes('LeadPersonalDataExpired') ? read : undefined;
      });
      expect(events.find((e) => e.type === 'LeadPersonalDataExpired')!.data).to.include({ retention_days: 30, expired_at: now.toISOString() });
    } finally {
      await sweeper.stop();
      await svc.stop();
    }
  });
});

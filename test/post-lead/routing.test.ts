import { expect } from 'chai';
import { capDecider } from '../../src/commands/caps.js';
import { readFolded } from '../../src/commands/handler.js';
import { openEventStore } from '../../src/event-store/index.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Routing through the real service: strategies, filters, hours on a fake clock, caps, buckets and
// test leads, each read back from the LeadRouted event that explains the decision.

async function routed(svc: TestService, leadId: unknown) {
  const events = await svc.service.store.readStream(`lead-${String(leadId)}`);
  return events.find((e) => e.type === 'LeadRouted')!.data as {
    target: { kind: string; id: string };
    price: number;
    strategy: string;
    routing_version: string;
    candidates: Array<{ buyer: string; eligible: boolean; reason: string }>;
  };
}

async function withService(options: Parameters<typeof TestService.start>[0], body: (svc: TestService, key: string) => Promise<void>) {
  const svc = await TestService.start(options);
  try {
    await body(svc, await svc.key());
  } finally {
    await svc.stop();
  }
}

const three = [
  { id: 'cheap', price: 10, priority: 1 },
  { id: 'dear', price: 30, priority: 3 },
  { id: 'middle', price: 20, priority: 2 },
];

describe('routing through the service', function () {
  it('highest_price sells to the best price; the event lists every candidate', async function () {
    await withService({ routing: { strategy: 'highest_price', buyers: three } }, async (svc, key) => {
      const reply = await svc.post(validLead(), { 'x-api-key': key });
      expect(reply.body).to.include({ code: 'SOLD', revenue: 30 });
      const event = await routed(svc, reply.body.lead_id);
      expect(event.target).to.deep.equal({ kind: 'buyer', id: 'dear' });
      expect(event.strategy).to.equal('highest_price');
      expect(event.routing_version).to.match(/^[0-9a-f]{12}$/);
      expect(event.candidates.map((c) => [c.buyer, c.eligible, c.reason])).to.deep.equal([
        ['cheap', true, 'eligible'],
        ['dear', true, 'eligible'],
        ['middle', true, 'eligible'],
      ]);
    });
  });

  it('priority sells to the lowest priority number whatever the price', async function () {
    await withService({ routing: { strategy: 'priority', buyers: three } }, async (svc, key) => {
      const reply = await svc.post(validLead(), { 'x-api-key': key });
      expect(reply.body).to.include({ code: 'SOLD', revenue: 10 });
    });
  });

  it('round_robin takes turns among the eligible buyers', async function () {
    await withService({ routing: { strategy: 'round_robin', buyers: three } }, async (svc, key) => {
      const revenues: unknown[] = [];
      for (let i = 0; i < 6; i++) revenues.push((await svc.post(validLead(), { 'x-api-key': key })).body.revenue);
      expect(revenues).to.deep.equal([10, 30, 20, 10, 30, 20]);
    });
  });

  it('round_robin: the buyers of one state take turns, whatever leads of another state come between them', async function () {
    const buyers = [
      { id: 'ca-a', price: 20, states: ['CA'] },
      { id: 'ca-b', price: 21, states: ['CA'] },
      { id: 'tx-c', price: 22, states: ['TX'] },
    ];
    await withService({ routing: { strategy: 'round_robin', buyers } }, async (svc, key) => {
      const revenues: unknown[] = [];
      for (let i = 0; i < 8; i++) {
        const lead = i % 2 === 0 ? validLead({ accident_state: 'CA', zip: '90210' }) : validLead({ accident_state: 'TX', zip: '75001' });
        revenues.push((await svc.post(lead, { 'x-api-key': key })).body.revenue);
      }
      expect(revenues).to.deep.equal([20, 22, 21, 22, 20, 22, 21, 22]);
    });
  });

  it('round_robin: test leads between real ones take no turn, so the real leads still go round', async function () {
    const buyers = [
      { id: 'ca-a', price: 20 },
      { id: 'ca-b', price: 21 },
    ];
    await withService({ routing: { strategy: 'round_robin', buyers } }, async (svc, key) => {
      const real: unknown[] = [];
      for (let i = 0; i < 4; i++) {
        real.push((await svc.post(validLead(), { 'x-api-key': key })).body.revenue);
        expect((await svc.post(validLead({ test: true }), { 'x-api-key': key })).body).to.include({ code: 'SOLD' });
      }
      expect(real).to.deep.equal([20, 21, 20, 21]);
    });
  });

  it('round_robin: leads posted at the same moment go round as leads one after another do', async function () {
    await withService({ routing: { strategy: 'round_robin', buyers: three } }, async (svc, key) => {
      const replies = await Promise.all(Array.from({ length: 6 }, () => svc.post(validLead(), { 'x-api-key': key })));
      const counts = new Map<unknown, number>();
      for (const reply of replies) counts.set(reply.body.revenue, (counts.get(reply.body.revenue) ?? 0) + 1);
      expect([...counts.entries()].sort()).to.deep.equal([[10, 2], [20, 2], [30, 2]]);
    });
  });

  it('states, zip prefixes, requirements and active filter buyers, each with its reason', async function () {
    const buyers = [
      { id: 'paused', price: 90, active: false },
      { id: 'nv-only', price: 80, states: ['NV'] },
      { id: 'zip-91', price: 70, zip_prefixes: ['91'] },
      { id: 'strict', price: 60, require: { email: 'pass' } },
      { id: 'fallback', price: 5 },
    ];
    // No DNS answer: the e-mail check is unknown, which fails a `pass` requirement.
    const refused = () => Promise.reject(Object.assign(new Error('refused'), { code: 'ECONNREFUSED' }));
    const silentDns = { resolveMx: refused, resolveAddresses: refused };
    await withService({ routing: { buyers }, resolver: silentDns }, async (svc, key) => {
      const reply = await svc.post(validLead({ zip: '90210', accident_state: 'CA' }), { 'x-api-key': key });
      expect(reply.body).to.include({ code: 'SOLD', revenue: 5 });
      const event = await routed(svc, reply.body.lead_id);
      expect(event.candidates.map((c) => [c.buyer, c.reason])).to.deep.equal([
        ['paused', 'inactive'],
        ['nv-only', 'state_not_allowed'],
        ['zip-91', 'zip_not_allowed'],
        ['strict', 'requirement_failed'],
        ['fallback', 'eligible'],
      ]);
    });
  });

  it('hours of operation in the buyer time zone, on a fake clock', async function () {
    let now = new Date('2026-11-23T16:30:00Z'); // Monday 08:30 in Los Angeles
    const buyers = [
      { id: 'office-hours', price: 50, hours: { tz: 'America/Los_Angeles', days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '08:00', end: '18:00' } },
      { id: 'always', price: 1 },
    ];
    await withService({ routing: { buyers }, now: () => now }, async (svc, key) => {
      expect((await svc.post(validLead(), { 'x-api-key': key })).body.revenue).to.equal(50);
      now = new Date('2026-11-24T02:30:00Z'); // Monday 18:30 in Los Angeles: closed
      const late = await svc.post(validLead(), { 'x-api-key': key });
      expect(late.body.revenue).to.equal(1);
      expect((await routed(svc, late.body.lead_id)).candidates[0]!.reason).to.equal('outside_hours');
      now = new Date('2026-11-28T18:00:00Z'); // Saturday 10:00 in Los Angeles: closed
      expect((await svc.post(validLead(), { 'x-api-key': key })).body.revenue).to.equal(1);
    });
  });

  it('a cap is exact under 50 concurrent posts, then the next buyer (cap_reached) and the bucket', async function () {
    const buyers = [
      { id: 'capped', price: 40, caps: [{ period: 'day', max: 7, tz: 'America/New_York' }] },
      { id: 'also-capped', price: 20, caps: [{ period: 'hour', max: 3 }] },
    ];
    await withService({ routing: { buyers, buckets: [{ id: 'overflow', default: true }] } }, async (svc, key) => {
      const replies = await Promise.all(Array.from({ length: 50 }, () => svc.post(validLead(), { 'x-api-key': key })));
      const byRevenue = (revenue: number) => replies.filter((r) => r.body.revenue === revenue && r.body.code === 'SOLD').length;
      expect(replies.every((r) => r.status === 201)).to.equal(true);
      expect(byRevenue(40)).to.equal(7);
      expect(byRevenue(20)).to.equal(3);
      expect(replies.filter((r) => r.body.code === 'UNSOLD')).to.have.length(40);
      const unsold = replies.find((r) => r.body.code === 'UNSOLD')!;
      const event = await routed(svc, unsold.body.lead_id);
      expect(event.target).to.deep.equal({ kind: 'bucket', id: 'overflow' });
      expect(event.candidates.map((c) => c.reason)).to.deep.equal(['cap_reached', 'cap_reached']);
    });
  });

  it('a buyer with a large cap: its sales take slots from one block, with no append of their own, and the stop gives back the rest', async function () {
    const now = new Date('2026-11-21T15:00:00Z');
    const dir = tempDir('cap-blocks');
    const stream = 'cap-big-0-2026-11';
    const routingOf = (max: number) => ({ buyers: [{ id: 'big', price: 40, caps: [{ period: 'month', max }] }] });
    try {
      const svc = await TestService.start({ dataDir: dir.path, routing: routingOf(1_000_000), now: () => now });
      try {
        const key = await svc.key();
        const replies = await Promise.all(Array.from({ length: 20 }, () => svc.post(validLead(), { 'x-api-key': key })));
        for (const reply of replies) expect(reply.body, reply.text).to.include({ code: 'SOLD', revenue: 40 });
        // One block of 64 for the 20 sales: not an append each, which each sale would wait for.
        expect((await svc.service.store.readStream(stream)).map((e) => e.type)).to.deep.equal(['CapSlotsReserved']);
      } finally {
        await svc.stop();
      }
      const store = await openEventStore({ dataDir: dir.path });
      try {
        expect((await store.readStream(stream)).map((e) => [e.type, (e.data as { slots: number }).slots])).to.deep.equal([
          ['CapSlotsReserved', 64],
          ['CapSlotsReturned', 44],
        ]);
        expect((await readFolded(store, stream, capDecider)).state.used, 'the slots sold').to.equal(20);
      } finally {
        await store.close();
      }
    } finally {
      dir.remove();
    }
  });

  it('a reload gives back the cap slots in hand: a cap lowered below them counts only those sold', async function () {
    const now = new Date('2026-11-21T15:00:00Z');
    const stream = 'cap-big-0-2026-11';
    const routingOf = (max: number) => ({ buyers: [{ id: 'big', price: 40, caps: [{ period: 'month', max }] }] });
    await withService({ routing: routingOf(1_000_000), now: () => now }, async (svc, key) => {
      for (let i = 0; i < 20; i++) expect((await svc.post(validLead(), { 'x-api-key': key })).body).to.include({ code: 'SOLD' });
      const used = async () => (await readFolded(svc.service.store, stream, capDecider)).state.used;
      expect(await used(), 'a block of 64').to.equal(64);
      writeFileSync(join(svc.dataDir, 'routing.json'), JSON.stringify(routingOf(25)));
      expect((await svc.service.reload()).routing).to.include({ changed: true });
      await until('the block given back', async () => (await used()) === 20, 10_000, 10);
      const after = await Promise.all(Array.from({ length: 10 }, () => svc.post(validLead(), { 'x-api-key': key })));
      expect(after.filter((reply) => reply.body.code === 'SOLD'), 'the 5 left under the new cap').to.have.length(5);
      expect(await used()).to.equal(25);
    });
  });

  it('buckets: the first matching bucket, else the default', async function () {
    const routing = { buyers: [], buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }, { id: 'zip-9', zip_prefixes: ['9'] }] };
    await withService({ routing }, async (svc, key) => {
      const tx = await svc.post(validLead({ accident_state: 'TX', zip: '75001' }), { 'x-api-key': key });
      expect((await routed(svc, tx.body.lead_id)).target).to.deep.equal({ kind: 'bucket', id: 'unsold-tx' });
      const ca = await svc.post(validLead({ accident_state: 'CA', zip: '90210' }), { 'x-api-key': key });
      expect((await routed(svc, ca.body.lead_id)).target).to.deep.equal({ kind: 'bucket', id: 'zip-9' });
      const ny = await svc.post(validLead({ accident_state: 'NY', zip: '10001' }), { 'x-api-key': key });
      expect((await routed(svc, ny.body.lead_id)).target).to.deep.equal({ kind: 'bucket', id: 'unsold' });
    });
  });

  it('a test lead runs the pipeline, is flagged, uses no cap and claims no contact', async function () {
    const now = new Date('2026-11-21T15:00:00Z');
    const buyers = [{ id: 'one-a-day', price: 40, caps: [{ period: 'day', max: 1, tz: 'America/New_York' }] }];
    await withService({ routing: { buyers }, now: () => now }, async (svc, key) => {
      const lead = validLead({ test: true });
      const test1 = await svc.post(lead, { 'x-api-key': key });
      const test2 = await svc.post({ ...validLead(), test: true }, { 'x-api-key': key });
      for (const reply of [test1, test2]) expect(reply.body).to.include({ code: 'SOLD', test: true, revenue: 40 });
      expect(await svc.service.store.readStream('cap-one-a-day-0-2026-11-21')).to.deep.equal([]);
      // The cap is untouched and the contact unclaimed: the same consumer, for real, still sells.
      const real = await svc.post({ ...lead, test: false }, { 'x-api-key': key });
      expect(real.body).to.include({ code: 'SOLD', revenue: 40 });
      expect(real.body).to.not.have.property('test');
      const events = await svc.service.store.readStream(`lead-${String(test1.body.lead_id)}`);
      expect((events[0]!.data as { test: boolean }).test).to.equal(true);
    });
  });

  it('a buyer with two caps: its cap_reached names the cap that is full, with the period it counts and its zone', async function () {
    const now = new Date('2026-11-21T15:00:00Z');
    const buyers = [
      { id: 'two-caps', price: 40, caps: [{ period: 'day', max: 5 }, { period: 'month', max: 1, tz: 'America/New_York' }] },
      { id: 'fallback', price: 1 },
    ];
    await withService({ routing: { buyers }, now: () => now }, async (svc, key) => {
      for (const test of [false, true]) {
        const first = await svc.post(validLead(), { 'x-api-key': key });
        expect(first.body).to.include({ code: 'SOLD', revenue: test ? 1 : 40 });
        const second = await svc.post(validLead({ test }), { 'x-api-key': key });
        expect(second.body).to.include({ code: 'SOLD', revenue: 1 });
        const capped = (await routed(svc, second.body.lead_id)).candidates.find((c) => c.buyer === 'two-caps');
        // The day cap has room (1 of 5 used): only the month's is full, and a real lead and a test lead say so alike.
        expect(capped).to.deep.include({ reason: 'cap_reached', detail: 'month cap 1 (2026-11 America/New_York)' });
      }
    });
  });

  it('a test lead meets a full cap as a real lead would (cap_reached, next buyer, then the bucket) and takes no slot', async function () {
    const now = new Date('2026-11-21T15:00:00Z');
    const buyers = [
      { id: 'daily', price: 40, caps: [{ period: 'day', max: 1, tz: 'America/New_York' }] },
      { id: 'hourly', price: 20, caps: [{ period: 'hour', max: 1, tz: 'America/New_York' }] },
    ];
    const routing = { buyers, buckets: [{ id: 'overflow', default: true }] };
    await withService({ routing, now: () => now }, async (svc, key) => {
      const post = (lead: Record<string, unknown>) => svc.post(lead, { 'x-api-key': key });
      const reasons = async (leadId: unknown) => (await routed(svc, leadId)).candidates.map((c) => [c.buyer, c.reason]);

      const real1 = await post(validLead());
      expect(real1.body).to.include({ code: 'SOLD', revenue: 40 });
      const test1 = await post(validLead({ test: true }));
      expect(test1.body).to.include({ code: 'SOLD', revenue: 20, test: true });
      expect(await reasons(test1.body.lead_id)).to.deep.equal([['daily', 'cap_reached'], ['hourly', 'eligible']]);

      // The test lead took no hourly slot: the next real lead still gets it.
      const real2 = await post(validLead());
      expect(real2.body).to.include({ code: 'SOLD', revenue: 20 });
      const test2 = await post(validLead({ test: true }));
      expect(test2.body).to.include({ code: 'UNSOLD', test: true });
      expect((await routed(svc, test2.body.lead_id)).target).to.deep.equal({ kind: 'bucket', id: 'overflow' });
      expect(await reasons(test2.body.lead_id)).to.deep.equal([['daily', 'cap_reached'], ['hourly', 'cap_reached']]);

      // Each cap stream holds exactly the one slot its real lead took.
      const slots = async (stream: string) => (await svc.service.store.readStream(stream)).map((e) => [e.type, (e.data as { lead_id: number }).lead_id]);
      expect(await slots('cap-daily-0-2026-11-21')).to.deep.equal([['CapSlotTaken', real1.body.lead_id]]);
      expect(await slots('cap-hourly-0-2026-11-21T10')).to.deep.equal([['CapSlotTaken', real2.body.lead_id]]);
    });
  });
});

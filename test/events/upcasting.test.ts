import { expect } from 'chai';
import { runEventsCommand } from '../../src/cli/events.js';
import { runReplayCommand } from '../../src/cli/replay.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { type EventData, type EventStore, type RecordedEvent, openEventStore } from '../../src/event-store/index.js';
import { EventDecodeError } from '../../src/events/codec/index.js';
import { type LeadReceivedV0Data, leadReceivedV0 } from '../../src/events/codec/lead-received-v0.js';
import { LEAD_EVENT_SCHEMA, LEAD_RECEIVED_SCHEMA, type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import { CERT_URL, TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';

/** The version a lead event reads at: LeadReceived's own (its personal fields are encrypted), else the lead's. */
const schemaOf = (type: string): number => (type === 'LeadReceived' ? LEAD_RECEIVED_SCHEMA : LEAD_EVENT_SCHEMA);

// Events the first releases wrote, before lead events carried `metadata.schema`, read by today's
// service: written raw into the embedded store (as those releases left them on disk), then read
// through every path a reader takes, and always seen in the current layout.

/** A sold lead of the first releases: no schema in any event's metadata, LeadReceived in its old layout. */
function oldLead(leadId: number, zip = '90210-1234'): EventData[] {
  const receivedAt = '2026-01-05T17:00:00.000Z';
  const metadata = { trace_id: `0af7651916cd43dd8448eb211c80319${leadId % 10}`, occurred_at: receivedAt, supplier_id: 'sup-old' };
  const received: LeadReceivedV0Data = {
    lead_id: leadId,
    supplier: 'sup-old',
    key_id: 'k0',
    test: false,
    lead: {
      first_name: 'Ada', last_name: 'Lovelace', email: `ada.${leadId}@example.com`, mobile: '+12135550143', zip,
      accident_state: 'CA', certificate_url: CERT_URL, certificate_id: CERT_URL.slice(-40), sid: 'google', s1: 'click-1', test: false,
    },
    received_at: receivedAt,
  };
  const pass = { result: 'pass', provider: 'internal', detail: 'ok' };
  return [
    { type: 'LeadReceived', data: received, metadata },
    { type: 'LeadEnriched', data: { lead_id: leadId, checks: { phone: pass, email: pass, consent: pass } }, metadata },
    {
      type: 'LeadRouted',
      data: { lead_id: leadId, target: { kind: 'buyer', id: 'acme-law' }, price: 42.5, currency: 'USD', strategy: 'highest_price', routing_version: 'v0', candidates: [] },
      metadata,
    },
    { type: 'LeadSold', data: { lead_id: leadId, buyer: 'acme-law', revenue: 42.5, currency: 'USD', sold_at: receivedAt }, metadata },
  ];
}

/** What the first releases' LeadReceived of `oldLead` reads as today. */
function currentReceived(leadId: number): LeadReceived['data'] {
  return {
    lead_id: leadId,
    supplier: 'sup-old',
    key_id: 'k0',
    sid: 'google',
    s1: 'click-1',
    accident_state: 'CA',
    test: false,
    lead: {
      first_name: 'Ada', last_name: 'Lovelace', email: `ada.${leadId}@example.com`, mobile: '+12135550143', mobile_national: '2135550143',
      zip: '90210', zip4: '1234', accident_state: 'CA', certificate_url: CERT_URL, certificate_id: CERT_URL.slice(-40), sid: 'google', s1: 'click-1', test: false,
    },
    received_at: '2026-01-05T17:00:00.000Z',
  };
}

/** Writes events bypassing the codec, as an older release left them in the data dir. */
async function writeRaw(dataDir: string, streams: Record<string, EventData[]>): Promise<void> {
  const raw = await EmbeddedEventStore.open(dataDir);
  try {
    for (const [stream, events] of Object.entries(streams)) await raw.append(stream, events, { expectedRevision: 'no_stream' });
  } finally {
    await raw.close();
  }
}

const received = (events: RecordedEvent[]) => events.find((e) => e.type === 'LeadReceived')!;

describe('LeadReceived schema 0 (the first releases)', function () {
  const upcast = (data: unknown) => leadReceivedV0.up(data, {}) as LeadReceived['data'];

  it('gains sid, s1 and accident_state from its lead, and the lead its national number and ZIP+4 split', function () {
    const [event] = oldLead(5);
    expect(upcast(event!.data)).to.deep.equal(currentReceived(5));
    expect(upcast(oldLead(5, '90210')[0]!.data).lead).to.include({ zip: '90210', zip4: null, mobile_national: '2135550143' });
  });

  it('a lead that failed validation recorded no source fields: they read as null', function () {
    const data = { lead_id: 6, supplier: 'sup-old', key_id: 'k0', test: false, lead: null, received_at: '2026-01-05T17:00:00.000Z' };
    expect(upcast(data)).to.deep.equal({ ...data, sid: null, s1: null, accident_state: null });
  });

  it('a mobile outside +1 or a malformed ZIP is an error that quotes neither', function () {
    const lead = (oldLead(7)[0]!.data as LeadReceivedV0Data).lead!;
    const error = (() => {
      try {
        return upcast({ ...(oldLead(7)[0]!.data as object), lead: { ...lead, mobile: '+442071838750' } });
      } catch (e) {
        return e as Error;
      }
    })() as Error;
    expect(error.message).to.equal('the mobile is not a North American E.164 number');
    expect(() => upcast({ ...(oldLead(7)[0]!.data as object), lead: { ...lead, zip: '9021' } })).to.throw('the ZIP code is neither five digits nor ZIP+4');
  });
});

describe('events of the first releases, read through the store the service opens', function () {
  let dir: ReturnType<typeof tempDir>;
  let store: EventStore | undefined;
  beforeEach(() => (dir = tempDir('upcasting')));
  afterEach(async () => {
    await store?.close();
    store = undefined;
    dir.remove();
  });

  it('readStream, readAll and a subscription see the current layout and version', async function () {
    await writeRaw(dir.path, { [leadStream(5)]: oldLead(5) });
    store = await openEventStore({ dataDir: dir.path });

    const stream = await store.readStream(leadStream(5));
    expect(stream.map((e) => e.type)).to.deep.equal(['LeadReceived', 'LeadEnriched', 'LeadRouted', 'LeadSold']);
    expect(received(stream).data).to.deep.equal(currentReceived(5));
    for (const event of stream) expect(event.metadata, event.type).to.include({ schema: schemaOf(event.type), stored_schema: 0, supplier_id: 'sup-old' });

    expect(received(await store.readAll()).data).to.deep.equal(currentReceived(5));

    const subscription = store.subscribeToAll();
    const seen: RecordedEvent[] = [];
    for await (const event of subscription) {
      seen.push(event);
      if (seen.length === 4) break;
    }
    expect(received(seen).data).to.deep.equal(currentReceived(5));
    expect(seen.every((e) => e.metadata.schema === schemaOf(e.type))).to.equal(true);
  });

  it('`leadpost events` prints the current layout', async function () {
    await writeRaw(dir.path, { [leadStream(5)]: oldLead(5) });
    let out = '';
    const io = { out: { write: (t: string) => (out += t) }, err: { write: () => true } };
    expect(await runEventsCommand([leadStream(5), '--json'], io, { LEADPOST_DATA_DIR: dir.path })).to.equal(0);
    const first = JSON.parse(out.split('\n')[0]!) as RecordedEvent;
    expect(first.data).to.deep.equal(currentReceived(5));
    expect(first.metadata).to.include({ schema: LEAD_RECEIVED_SCHEMA, stored_schema: 0 });
  });

  it('an event no upcaster can read is an error naming its stream, not its data', async function () {
    const [event, ...rest] = oldLead(5);
    const data = event!.data as LeadReceivedV0Data;
    await writeRaw(dir.path, { [leadStream(5)]: [{ ...event!, data: { ...data, lead: { ...data.lead!, mobile: '+442071838750' } } }, ...rest] });
    store = await openEventStore({ dataDir: dir.path });
    const error = await store.readStream(leadStream(5)).then(() => null, (e: unknown) => e as Error);
    expect(error).to.be.instanceOf(EventDecodeError);
    expect(error!.message).to.match(/^cannot read LeadReceived schema 0 of stream lead-5@0 \(event [0-9a-f-]{36}\): the upcaster from schema 0 to 1 failed: the mobile is not a North American E\.164 number$/);
    expect(error!.message).to.not.contain('2071838750').and.not.contain('ada.');
  });
});

describe('the service over events of the first releases', function () {
  // Lead ids far above the service's own blocks, so no post of the test could take them.
  const REPLAYED = 9_000_001;
  const LIVE = 9_000_002;

  it('GET /functions/leads/{id} shows them in the current layout, whether `leadpost replay` or the live projection made the view', async function () {
    const dir = tempDir('upcasting-service');
    let svc: TestService | undefined;
    try {
      await writeRaw(dir.path, { [leadStream(REPLAYED)]: oldLead(REPLAYED) });
      const io = { out: { write: () => true }, err: { write: () => true } };
      expect(await runReplayCommand([], io, { LEADPOST_DATA_DIR: dir.path })).to.equal(0);
      // Written after the replay: the service's own projection reads it.
      await writeRaw(dir.path, { [leadStream(LIVE)]: oldLead(LIVE, '90210') });

      svc = await TestService.start({ dataDir: dir.path });
      const admin = await svc.key('admin', 'root');
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      for (const [leadId, zip4] of [[REPLAYED, '1234'], [LIVE, null]] as const) {
        const reply = await svc.request('GET', `/functions/leads/${leadId}`, { 'x-api-key': admin });
        expect(reply.status, reply.text).to.equal(200);
        const view = reply.body.lead as Record<string, unknown>;
        expect(view, `lead ${leadId}`).to.include({ lead_id: leadId, supplier: 'sup-old', sid: 'google', s1: 'click-1', lead_status: 'sold', sold: true, revenue: 42.5, buyer: 'acme-law' });
        expect(view.lead, `lead ${leadId}`).to.deep.equal({ ...currentReceived(leadId).lead, zip4 });
      }
    } finally {
      await svc?.stop();
      dir.remove();
    }
  });

  it('an event no upcaster can read stops the projections there, and /readyz and /metrics show their lag growing', async function () {
    const dir = tempDir('upcasting-stuck');
    let svc: TestService | undefined;
    try {
      svc = await TestService.start({ dataDir: dir.path, env: { READY_MAX_LAG_SECONDS: '1' } });
      await until('/readyz 200 with the projections caught up', async () => (await svc!.request('GET', '/readyz')).status === 200);
      const [event, ...rest] = oldLead(LIVE);
      const data = event!.data as LeadReceivedV0Data;
      await writeRaw(dir.path, { [leadStream(LIVE)]: [{ ...event!, data: { ...data, lead: { ...data.lead!, mobile: '+442071838750' } } }, ...rest] });

      // The lag is measured on the event that stopped them, which cannot be read: it grows with the clock.
      const reply = await until('/readyz 503 naming the projections over 1 s behind', async () => {
        const answer = await svc!.request('GET', '/readyz');
        return answer.status === 503 && /behind by more than 1 s: leads/.test(String(answer.body.message)) ? answer : false;
      });
      const items = (reply.body.checks as { projections: { items: Array<{ projection: string; caught_up: boolean; events_behind: number }> } }).projections.items;
      expect(items.find((item) => item.projection === 'leads')).to.include({ caught_up: false }).and.have.property('events_behind').above(0);
      const lag = /^leadpost_projection_lag_seconds\{projection="leads"\} (\S+)$/m.exec((await svc.request('GET', '/metrics')).text);
      expect(Number(lag?.[1]), 'the lead projection\'s lag on /metrics').to.be.at.least(1);
    } finally {
      await svc?.stop();
      dir.remove();
    }
  });
});

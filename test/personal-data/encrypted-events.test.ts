import { expect } from 'chai';
import { cpSync } from 'node:fs';
import { relative } from 'node:path';
import { deliveryBody } from '../../src/delivery/payload.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { type EventStore, type RecordedEvent, openEventStore } from '../../src/event-store/index.js';
import { SealedLeadError, openLead } from '../../src/events/codec/index.js';
import { type LeadReceived, type LeadSold, leadStream } from '../../src/events/lead-events.js';
import { type ErasedLead, PERSONAL_FIELDS } from '../../src/leads/lead.js';
import { openPersonalDataKeys } from '../../src/personal-data/index.js';
import { TestService, leadWith } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { consumers, contentsOf, eventsJson, filesUnder, found } from '../support/consumers.js';

// The personal fields of a lead are encrypted in the event store: no byte of a consumer's name,
// e-mail or mobile is in events.db, yet every reader gets the lead whole; destroying a lead's data
// key erases its personal data and nothing else.

const CONSUMERS = consumers(Date.now() % 1_000_000, [
  ['Wilhelmina', 'Quartermaine'],
  ['Bartholomew', 'Featherstonehaugh'],
  ['Evangeline', 'Montgomery-Smythe'],
]);

const receivedOf = (events: RecordedEvent[]) => events.find((e) => e.type === 'LeadReceived') as unknown as RecordedEvent<'LeadReceived', LeadReceived['data']>;

describe('personal data encrypted in the event store', function () {
  this.timeout(60_000);
  const dir = tempDir('encrypted-events');
  const leadIds: number[] = [];
  after(() => dir.remove());

  before(async function () {
    const svc = await TestService.start({ dataDir: dir.path });
    try {
      const key = await svc.key();
      const admin = await svc.key('admin', 'root');
      for (const consumer of CONSUMERS) {
        const reply = await svc.post(leadWith(consumer.email, consumer.mobile, { first_name: consumer.first_name, last_name: consumer.last_name }), { 'x-api-key': key });
        expect(reply.status, reply.text).to.equal(201);
        leadIds.push(reply.body.lead_id as number);
      }
      // Read back whole over HTTP, by an admin: the view folded from the decrypted events.
      for (const [i, consumer] of CONSUMERS.entries()) {
        const reply = await svc.request('GET', `/functions/leads/${leadIds[i]}`, { 'x-api-key': admin });
        expect(reply.status, reply.text).to.equal(200);
        expect((reply.body.lead as { lead: Record<string, unknown> }).lead).to.include({
          first_name: consumer.first_name,
          last_name: consumer.last_name,
          email: consumer.email,
          mobile: consumer.mobile,
          mobile_national: consumer.national,
          zip: '90210',
          accident_state: 'CA',
        });
      }
    } finally {
      // Stopping closes events.db: its WAL is checkpointed into it.
      await svc.stop();
    }
  });

  it('no byte of any consumer (names, e-mail, mobile in E.164 and national) is in any file of the data dir: events, read models, keys, TLS', function () {
    const files = filesUnder(dir.path);
    expect(files.map((f) => relative(dir.path, f))).to.include.members(['events.db', 'keys.db']);
    expect(files.map((f) => relative(dir.path, f))).to.include.members(['readmodels.db', 'tls/key.pem']);
    for (const consumer of CONSUMERS) expect(found(contentsOf(files), consumer), consumer.email).to.deep.equal([]);
  });

  it('the projections keep the envelope, never the fields: the lead view row holds it sealed', async function () {
    const svc = await TestService.start({ dataDir: dir.path });
    try {
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const row = await svc.service.readModels.get(svc.service.projections.collection('leads'), String(leadIds[0]));
      const lead = row!.lead as Record<string, unknown>;
      for (const field of PERSONAL_FIELDS) expect(lead, field).to.not.have.property(field);
      expect(lead.pii).to.include({ v: 1 });
    } finally {
      await svc.stop();
    }
  });

  it('the stored LeadReceived holds one envelope in place of the personal fields, the rest clear', async function () {
    const raw = await EmbeddedEventStore.open(dir.path);
    try {
      const [event] = await raw.readStream(leadStream(leadIds[0]!), { maxCount: 1 });
      expect(event!.metadata.schema).to.equal(2);
      const lead = (event!.data as { lead: Record<string, unknown> }).lead;
      for (const field of PERSONAL_FIELDS) expect(lead, field).to.not.have.property(field);
      expect(lead).to.include({ zip: '90210', zip4: null, accident_state: 'CA', sid: 'src-1', s1: 'click-1', test: false });
      expect(lead.pii).to.have.all.keys('v', 'key', 'iv', 'ct', 'tag');
      expect(lead.pii).to.include({ v: 1 });
    } finally {
      await raw.close();
    }
  });

  it('`leadpost events --json` prints each lead whole, in clear', async function () {
    for (const [i, consumer] of CONSUMERS.entries()) {
      const received = receivedOf(await eventsJson(dir.path, leadStream(leadIds[i]!)));
      expect(received.metadata).to.include({ schema: 2 });
      expect(received.data.lead).to.include({ first_name: consumer.first_name, last_name: consumer.last_name, email: consumer.email, mobile: consumer.mobile, mobile_national: consumer.national });
    }
  });

  it("an envelope moved to another lead's event does not open: an error naming the lead, not its data", async function () {
    // A copy of the data dir, so the same keys; the envelope is appended to another stream.
    const other = tempDir('encrypted-moved');
    try {
      cpSync(dir.path, other.path, { recursive: true });
      const raw = await EmbeddedEventStore.open(other.path);
      const [first] = await raw.readStream(leadStream(leadIds[0]!), { maxCount: 1 });
      await raw.close();
      const moved = await EmbeddedEventStore.open(other.path);
      await moved.append('lead-999999', [{ type: first!.type, data: first!.data, metadata: first!.metadata }], { expectedRevision: 'no_stream' });
      await moved.close();
      const store = await openEventStore({ dataDir: other.path });
      const keys = await openPersonalDataKeys({ dataDir: other.path });
      try {
        // Reading it is fine (projections never open it); opening it is not.
        const [event] = await store.readStream('lead-999999');
        const error = await Promise.resolve()
          .then(() => openLead(keys, 999999, (event!.data as LeadReceived['data']).lead!))
          .then(
            () => null,
            (e: unknown) => e as Error,
          );
        expect(error).to.be.instanceOf(SealedLeadError);
        expect(error!.message).to.match(/^the personal data of lead-999999 does not open with data key [0-9a-f]{32}/);
        for (const consumer of CONSUMERS) expect(error!.message).to.not.contain(consumer.email);
      } finally {
        await keys.close();
        await store.close();
      }
    } finally {
      other.remove();
    }
  });

  describe("after one lead's data key is destroyed", function () {
    before(async function () {
      const raw = await EmbeddedEventStore.open(dir.path);
      const [first] = await raw.readStream(leadStream(leadIds[1]!), { maxCount: 1 });
      await raw.close();
      const keys = await openPersonalDataKeys({ dataDir: dir.path });
      try {
        await keys.destroy([(first!.data as { lead: { pii: { key: string } } }).lead.pii.key]);
      } finally {
        await keys.close();
      }
    });

    it('its lead opens with no personal field and erased: true; the other leads open whole', async function () {
      const store = await openEventStore({ dataDir: dir.path });
      const keys = await openPersonalDataKeys({ dataDir: dir.path });
      let events: RecordedEvent[];
      let opened: unknown;
      try {
        events = await store.readStream(leadStream(leadIds[1]!));
        opened = await openLead(keys, leadIds[1]!, receivedOf(events).data.lead!);
      } finally {
        await keys.close();
        await store.close();
      }
      expect(opened).to.deep.equal({ zip: '90210', zip4: null, accident_state: 'CA', sid: 'src-1', s1: 'click-1', test: false, erased: true });

      // A delivery of it carries no consumer.
      const sale = events.find((e) => e.type === 'LeadSold')!.data as LeadSold['data'];
      expect(deliveryBody(receivedOf(events).data, opened as ErasedLead, sale).lead).to.equal(null);

      for (const i of [0, 2]) {
        const whole = receivedOf(await eventsJson(dir.path, leadStream(leadIds[i]!)));
        expect(whole.data.lead).to.include({ first_name: CONSUMERS[i]!.first_name, email: CONSUMERS[i]!.email, mobile: CONSUMERS[i]!.mobile });
      }
      const shown = receivedOf(await eventsJson(dir.path, leadStream(leadIds[1]!)));
      expect(shown.data.lead).to.deep.include({ erased: true });
      expect(JSON.stringify(shown)).to.not.contain(CONSUMERS[1]!.email);
    });

    it('the service starts on the same data and serves the other leads whole', async function () {
      const svc = await TestService.start({ dataDir: dir.path });
      try {
        const admin = await svc.key('admin', 'root');
        const reply = await svc.request('GET', `/functions/leads/${leadIds[2]}`, { 'x-api-key': admin });
        expect(reply.status).to.equal(200);
        expect((reply.body.lead as { lead: Record<string, unknown> }).lead).to.include({ email: CONSUMERS[2]!.email });
        const erased = await svc.request('GET', `/functions/leads/${leadIds[1]}`, { 'x-api-key': admin });
        expect((erased.body.lead as { lead: Record<string, unknown> }).lead).to.deep.equal({ zip: '90210', zip4: null, accident_state: 'CA', sid: 'src-1', s1: 'click-1', test: false, erased: true });
      } finally {
        await svc.stop();
      }
    });
  });
});

describe('a LeadReceived written in clear by an older release (version 1)', function () {
  it('reads as written, with its version upcast to 2', async function () {
    const dir = tempDir('clear-v1');
    let store: EventStore | undefined;
    try {
      const lead = {
        first_name: 'Ada', last_name: 'Lovelace', email: 'ada.v1@example.com', mobile: '+12135550143', mobile_national: '2135550143',
        zip: '90210', zip4: null, accident_state: 'CA', certificate_url: 'https://cert.trustedform.com/x', certificate_id: 'x', sid: 'src-1', s1: null, test: false,
      };
      const data: LeadReceived['data'] = { lead_id: 7, supplier: 'sup-1', key_id: 'k', sid: 'src-1', s1: null, accident_state: 'CA', test: false, lead, received_at: '2026-01-05T17:00:00.000Z' };
      const raw = await EmbeddedEventStore.open(dir.path);
      await raw.append(leadStream(7), [{ type: 'LeadReceived', data, metadata: { schema: 1, trace_id: 't' } }], { expectedRevision: 'no_stream' });
      await raw.close();
      store = await openEventStore({ dataDir: dir.path });
      const [event] = await store.readStream(leadStream(7));
      expect(event!.data).to.deep.equal(data);
      expect(event!.metadata).to.deep.equal({ schema: 2, stored_schema: 1, trace_id: 't' });
      const [printed] = await eventsJson(dir.path, leadStream(7));
      expect(printed!.data).to.deep.equal(data);
    } finally {
      await store?.close();
      dir.remove();
    }
  });
});

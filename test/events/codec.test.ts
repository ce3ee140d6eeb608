import { expect } from 'chai';
import type { AllSubscription, EventData, EventMetadata, EventStore, RecordedEvent } from '../../src/event-store/port.js';
import { START } from '../../src/event-store/port.js';
import { EVENT_CODEC, EventCodec, EventDecodeError, EventEncodeError, UpcastError, type Upcaster, codedEventStore } from '../../src/events/codec/index.js';
import type { Sealer } from '../../src/events/codec/codec.js';
import { LEAD_EVENT_SCHEMA } from '../../src/events/lead-events.js';

// The codec alone: what passes through untouched (and must stay the same object: it is on the
// post path and under every replay), how an old event is upcast step by step, and how a failure
// is reported.

function recorded(type: string, data: unknown, metadata: EventMetadata = {}, streamId = 'thing-1'): RecordedEvent {
  return { id: '0190a0a0-0000-7000-8000-000000000001', streamId, revision: 3, position: { commit: 9, prepare: 0 }, type, data, metadata, created: 0 };
}

/** A type at version 2 whose field was renamed (0 → 1) and then nested (1 → 2). */
/** A codec result that needed no key store: it is there at once, not a promise. */
function now<T>(value: T | Promise<T>): T {
  if (value instanceof Promise) throw new Error('expected the result at once, not a promise');
  return value;
}

const renamed: Upcaster = { type: 'Thing', from: 0, to: 1, up: (data) => ({ name: (data as { title: string }).title }) };
const nested: Upcaster = {
  type: 'Thing',
  from: 1,
  to: 2,
  up: (data, metadata) => ({ label: { name: (data as { name: string }).name }, by: metadata.supplier_id ?? null }),
};
const codec = new EventCodec({ current: { Thing: 2 }, upcasters: [nested, renamed] });

describe('event codec', function () {
  describe('decode', function () {
    it('returns an event already in its current schema as the same object', function () {
      const event = recorded('Thing', { label: { name: 'a' } }, { schema: 2 });
      expect(codec.decode('thing-1', event)).to.equal(event);
      const lead = recorded('LeadSold', { lead_id: 1 }, { schema: LEAD_EVENT_SCHEMA });
      expect(EVENT_CODEC.decode('lead-1', lead)).to.equal(lead);
    });

    it('returns an event of a type it does not know as the same object, whatever its schema', function () {
      for (const metadata of [{}, { schema: 1 }, { schema: 7 }]) {
        const event = recorded('ContactClaimed', { lead_id: 1 }, metadata);
        expect(codec.decode('contact-x', event)).to.equal(event);
        expect(EVENT_CODEC.decode('contact-x', event)).to.equal(event);
      }
    });

    it('upcasts through every version in order; an event without a schema is version 0', function () {
      const v0 = recorded('Thing', { title: 'a' }, { supplier_id: 'sup-1' });
      const decoded = now(codec.decode('thing-1', v0));
      expect(decoded.data).to.deep.equal({ label: { name: 'a' }, by: 'sup-1' });
      expect(decoded.metadata).to.deep.equal({ supplier_id: 'sup-1', schema: 2, stored_schema: 0 });
      expect({ ...decoded, data: null, metadata: null }).to.deep.equal({ ...v0, data: null, metadata: null });
      // The stored event is left as it was: the store may hand the same object to other readers.
      expect(v0.data).to.deep.equal({ title: 'a' });
      expect(v0.metadata).to.deep.equal({ supplier_id: 'sup-1' });

      const v1 = now(codec.decode('thing-1', recorded('Thing', { name: 'b' }, { schema: 1 })));
      expect(v1.data).to.deep.equal({ label: { name: 'b' }, by: null });
      expect(v1.metadata).to.deep.equal({ schema: 2, stored_schema: 1 });
    });

    it('an upcaster that throws gives an error naming the type, schema, stream and event, without the data', function () {
      const failing = new EventCodec({
        current: { Thing: 1 },
        upcasters: [{ type: 'Thing', from: 0, to: 1, up: () => JSON.parse('ada@example.com') as unknown }],
      });
      const error = catching(() => failing.decode('thing-42', recorded('Thing', { email: 'ada@example.com' }, {}, 'thing-42')));
      expect(error).to.be.instanceOf(EventDecodeError);
      expect(error.message).to.equal(
        'cannot read Thing schema 0 of stream thing-42@3 (event 0190a0a0-0000-7000-8000-000000000001): ' +
          "the upcaster from schema 0 to 1 failed: SyntaxError (its message is withheld: it may quote the event's data)",
      );
      expect(error).to.include({ streamId: 'thing-42', eventType: 'Thing', schema: 0 });
      expect(error.cause).to.equal(undefined);

      const explained = new EventCodec({
        current: { Thing: 1 },
        upcasters: [{ type: 'Thing', from: 0, to: 1, up: () => { throw new UpcastError('the data has no title'); } }],
      });
      expect(catching(() => explained.decode('thing-42', recorded('Thing', {}))).message).to.match(/^cannot read Thing schema 0 of stream thing-42@3 .*: the upcaster from schema 0 to 1 failed: the data has no title$/);
    });

    it('a missing step, a schema newer than this release, or a schema that is not a version is an error, not a guess', function () {
      const gap = new EventCodec({ current: { Thing: 2 }, upcasters: [renamed] });
      expect(catching(() => gap.decode('thing-1', recorded('Thing', { title: 'a' }))).message).to.match(/Thing schema 0 of stream thing-1@3 .*: no upcaster from schema 1 to 2$/);
      expect(catching(() => codec.decode('thing-1', recorded('Thing', {}, { schema: 3 }))).message).to.match(/Thing schema 3 .*: written by a newer release: this one reads up to schema 2$/);
      expect(catching(() => codec.decode('thing-1', recorded('Thing', {}, { schema: '1' }))).message).to.match(/Thing schema "1" .*: the schema is not a version number$/);
    });
  });

  describe('encode', function () {
    it('returns an event that carries its current schema, or of a type it does not know, as the same object', function () {
      const current = { type: 'Thing', data: {}, metadata: { schema: 2, trace_id: 't' } };
      expect(codec.encode('thing-1', current)).to.equal(current);
      const unknown = { type: 'CapSlotTaken', data: {} };
      expect(codec.encode('cap-1', unknown)).to.equal(unknown);
    });

    it('stamps the current schema on an event of a known type written without one', function () {
      const bare = { type: 'Thing', data: { label: { name: 'a' } }, metadata: { trace_id: 't' } };
      expect(codec.encode('thing-1', bare)).to.deep.equal({ ...bare, metadata: { trace_id: 't', schema: 2 } });
      expect(bare.metadata).to.deep.equal({ trace_id: 't' });
      expect(now(codec.encode('thing-1', { type: 'Thing', data: {} })).metadata).to.deep.equal({ schema: 2 });
    });

    it('refuses an event written in another schema than its current one', function () {
      const error = catching(() => codec.encode('thing-1', { type: 'Thing', data: {}, metadata: { schema: 1 } }));
      expect(error).to.be.instanceOf(EventEncodeError);
      expect(error.message).to.equal('cannot append Thing schema 1 to stream thing-1: events are written in their current schema, 2');
    });
  });

  describe('registry', function () {
    it('refuses upcasters that skip a version, go past the current one, repeat one, or belong to no known type', function () {
      const up = (data: unknown) => data;
      expect(() => new EventCodec({ current: { Thing: 2 }, upcasters: [{ type: 'Thing', from: 0, to: 2, up }] })).to.throw(/one version up/);
      expect(() => new EventCodec({ current: { Thing: 1 }, upcasters: [{ type: 'Thing', from: 1, to: 2, up }] })).to.throw(/at most 1/);
      expect(() => new EventCodec({ current: { Thing: 1 }, upcasters: [renamed, renamed] })).to.throw(/two upcasters of Thing from schema 0/);
      expect(() => new EventCodec({ current: {}, upcasters: [renamed] })).to.throw(/no current schema/);
    });

    it("every lead event is at the lead's schema (LeadReceived one above: its personal fields are encrypted) and reads from version 0", function () {
      expect(EVENT_CODEC.currentSchema('LeadReceived')).to.equal(LEAD_EVENT_SCHEMA + 1);
      for (const type of ['LeadRejected', 'LeadEnriched', 'LeadRouted', 'LeadSold', 'LeadDeliveryAttempted', 'LeadDelivered', 'LeadDeliveryFailed', 'FeedbackRecorded', 'LeadReturned']) {
        expect(EVENT_CODEC.currentSchema(type), type).to.equal(LEAD_EVENT_SCHEMA);
      }
      // Before they carried a schema, a buyer's feedback and return were appended with bare metadata.
      const bare = recorded('FeedbackRecorded', { lead_id: 1, buyer: 'b', type: 'return', reason: null, recorded_at: 'x' });
      const decoded = now(EVENT_CODEC.decode('lead-1', bare));
      expect(decoded.data).to.equal(bare.data);
      expect(decoded.metadata).to.deep.equal({ schema: LEAD_EVENT_SCHEMA, stored_schema: 0 });
    });
  });
});

describe('coded event store', function () {
  /** A store that answers every read with `events` and keeps what is appended. */
  function fakeStore(events: RecordedEvent[]) {
    const appended: Array<readonly EventData[]> = [];
    let unsubscribed = 0;
    const store: EventStore = {
      append: async (_stream, batch) => {
        appended.push(batch);
        return { nextExpectedRevision: 0, position: START };
      },
      readStream: async () => events,
      readAll: async () => events,
      subscribeToAll: (): AllSubscription => ({
        unsubscribe: async () => void (unsubscribed += 1),
        async *[Symbol.asyncIterator]() {
          yield* events;
        },
      }),
      headPosition: async () => START,
      close: async () => {},
    };
    return { store, appended, unsubscribed: () => unsubscribed };
  }

  it('hands back the very array and events it read when they are current, and appends the very batch it was given', async function () {
    const events = [recorded('Thing', { label: { name: 'a' } }, { schema: 2 }), recorded('CapSlotTaken', {})];
    const fake = fakeStore(events);
    const coded = codedEventStore(fake.store, codec);
    expect(await coded.readStream('thing-1')).to.equal(events);
    expect(await coded.readAll()).to.equal(events);
    const seen: RecordedEvent[] = [];
    for await (const event of coded.subscribeToAll()) seen.push(event);
    expect(seen[0]).to.equal(events[0]);
    expect(seen[1]).to.equal(events[1]);
    const batch = [{ type: 'Thing', data: {}, metadata: { schema: 2 } }];
    await coded.append('thing-1', batch);
    expect(fake.appended[0]).to.equal(batch);
  });

  it('decodes old events on every read and encodes appends', async function () {
    const events = [recorded('Thing', { name: 'n' }, { schema: 2 }), recorded('Thing', { title: 'a' })];
    const fake = fakeStore(events);
    const coded = codedEventStore(fake.store, codec);
    const current = { label: { name: 'a' }, by: null };
    expect((await coded.readStream('thing-1')).map((e) => e.data)).to.deep.equal([{ name: 'n' }, current]);
    expect((await coded.readAll())[1]!.data).to.deep.equal(current);
    const seen: unknown[] = [];
    for await (const event of coded.subscribeToAll()) seen.push(event.data);
    expect(seen[1]).to.deep.equal(current);
    await coded.append('thing-1', [{ type: 'Thing', data: {} }]);
    expect(fake.appended[0]![0]!.metadata).to.deep.equal({ schema: 2 });
    const refused = await coded.append('thing-1', [{ type: 'Thing', data: {}, metadata: { schema: 0 } }]).then(() => null, (e: unknown) => e);
    expect(refused).to.be.instanceOf(EventEncodeError);
    expect(fake.appended).to.have.length(1);
  });

  it('a subscription meeting an event it cannot decode ends with the error naming it, and is unsubscribed', async function () {
    const failing = new EventCodec({ current: { Thing: 1 }, upcasters: [{ type: 'Thing', from: 0, to: 1, up: () => { throw new UpcastError('no title'); } }] });
    const fake = fakeStore([recorded('Other', {}), recorded('Thing', {}, {}, 'thing-7'), recorded('Other', {})]);
    const seen: string[] = [];
    const error = await (async () => {
      for await (const event of codedEventStore(fake.store, failing).subscribeToAll()) seen.push(event.type);
    })().then(() => null, (e: unknown) => e as Error);
    expect(seen).to.deep.equal(['Other']);
    expect(error).to.be.instanceOf(EventDecodeError);
    expect(error!.message).to.match(/^cannot read Thing schema 0 of stream thing-7@3 .*: the upcaster from schema 0 to 1 failed: no title$/);
    expect(fake.unsubscribed()).to.equal(1);
  });

  describe('a type with a sealer that needs the key store (a promise)', function () {
    /** Seals `secret` into `sealed` (reversed), later. */
    const sealer: Sealer = {
      type: 'Thing',
      seal: (data) => {
        const { secret, ...rest } = data as { secret?: string };
        return secret === undefined ? data : Promise.resolve({ ...rest, sealed: [...secret].reverse().join('') });
      },
    };
    const sealing = new EventCodec({ current: { Thing: 1 }, sealers: [sealer] });

    it('appends sealed events, and reads them back still sealed, as the same objects, on every read', async function () {
      const plain = recorded('Thing', { n: 1 }, { schema: 1 });
      const sealed = recorded('Thing', { n: 2, sealed: 'cba' }, { schema: 1 });
      const fake = fakeStore([sealed, plain]);
      const coded = codedEventStore(fake.store, sealing);
      const read = await coded.readStream('thing-1');
      expect(read[0]).to.equal(sealed);
      expect(read[1]).to.equal(plain);
      expect((await coded.readAll())[0]).to.equal(sealed);
      const seen: unknown[] = [];
      for await (const event of coded.subscribeToAll()) seen.push(event);
      expect(seen).to.deep.equal([sealed, plain]);
      await coded.append('thing-1', [{ type: 'Thing', data: { secret: 'xyz' } }]);
      expect(fake.appended[0]).to.deep.equal([{ type: 'Thing', data: { sealed: 'zyx' }, metadata: { schema: 1 } }]);
    });
  });
});

function catching(run: () => unknown): Error & Record<string, unknown> {
  try {
    run();
  } catch (error) {
    return error as Error & Record<string, unknown>;
  }
  throw new Error('expected an error');
}

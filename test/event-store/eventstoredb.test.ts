// The EventStoreDB adapter: the shared contract suite against a real server when EVENTSTORE_URL is
// set, and, always, unit tests of its mappings and of its paging and resubscription logic against a
// fake client that behaves as the 6.x client does (inclusive readAll, exclusive subscriptions).
import assert from 'node:assert/strict';
import {
  BACKWARDS,
  DeadlineExceededError,
  END,
  START as CLIENT_START,
  UnavailableError,
  WrongExpectedVersionError,
  type AllStreamRecordedEvent,
  type AllStreamResolvedEvent,
  type EventStoreDBClient,
  type ReadAllOptions,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import {
  EventStoreDbEventStore,
  fromClientPosition,
  isUnavailable,
  isUserEvent,
  toActualRevision,
  toClientExpectedRevision,
  toClientReadPosition,
  toRecordedEvent,
  translateError,
} from '../../src/event-store/eventstoredb.js';
import { EventStoreUnavailableError, START, WrongExpectedRevisionError, type RecordedEvent } from '../../src/event-store/port.js';
import { eventStoreContract } from './contract.js';

const url = process.env.EVENTSTORE_URL;
if (url) {
  eventStoreContract('EventStoreDB', () => EventStoreDbEventStore.connect(url), {
    childEnv: () => ({ EVENTSTORE_URL: url }),
  });
} else {
  describe('EventStoreDB adapter', function () {
    it('runs the contract suite against a server', function () {
      console.log('skipped: set EVENTSTORE_URL=esdb://localhost:2113?tls=false to run the EventStoreDB contract suite');
      this.skip();
    });
  });
}

// --- fakes -------------------------------------------------------------------------------------

/** Event n sits at $all position n*100. */
function recorded(n: number, shape: { streamId?: string; type?: string; binary?: boolean } = {}): AllStreamResolvedEvent {
  const common = {
    streamId: shape.streamId ?? `lead-${n}`,
    id: `018f0000-0000-7000-8000-${String(n).padStart(12, '0')}`,
    revision: 0n,
    type: shape.type ?? `E${n}`,
    created: new Date(1_700_000_000_000 + n),
    metadata: { trace_id: `t${n}` },
    position: { commit: BigInt(n * 100), prepare: BigInt(n * 100) },
  };
  const event: AllStreamRecordedEvent = shape.binary
    ? { ...common, isJson: false, data: new Uint8Array([n]) }
    : { ...common, isJson: true, data: { n } };
  return { event };
}
const system = (n: number) => recorded(n, { streamId: '$stats-127.0.0.1:2113', type: '$statsCollected' });

function positionOf(resolved: AllStreamResolvedEvent): bigint {
  return resolved.event!.position.commit;
}

/** `readAll` as the 6.x client does it: `fromPosition` inclusive (in both directions, the worst case). */
class FakeLog {
  readonly reads: ReadAllOptions[] = [];
  constructor(readonly events: AllStreamResolvedEvent[]) {}

  readAll(options: ReadAllOptions = {}): AsyncIterable<AllStreamResolvedEvent> {
    this.reads.push(options);
    const backwards = options.direction === BACKWARDS;
    const from = options.fromPosition ?? (backwards ? END : CLIENT_START);
    let events = backwards ? [...this.events].reverse() : this.events;
    if (typeof from === 'object') {
      events = events.filter((e) => (backwards ? positionOf(e) <= from.commit : positionOf(e) >= from.commit));
    } else if (from === (backwards ? CLIENT_START : END)) {
      events = [];
    }
    const page = events.slice(0, Number(options.maxCount ?? Number.MAX_SAFE_INTEGER));
    return (async function* () {
      yield* page;
    })();
  }
}

/** A client subscription that yields its events, then drops with an error or stays live until unsubscribed. */
function fakeSubscription(events: AllStreamResolvedEvent[], ending: 'drop' | 'live') {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    unsubscribed: false,
    async *[Symbol.asyncIterator]() {
      yield* events;
      if (ending === 'drop') throw new UnavailableError(undefined, 'connection reset');
      await released;
    },
    async unsubscribe() {
      this.unsubscribed = true;
      release();
    },
  };
}

class FakeSubscriber {
  readonly calls: SubscribeToAllOptions[] = [];
  disposed = false;
  constructor(readonly script: Array<ReturnType<typeof fakeSubscription>>) {}

  subscribeToAll(options: SubscribeToAllOptions) {
    this.calls.push(options);
    const next = this.script.shift();
    if (!next) throw new Error('no more scripted subscriptions');
    return next;
  }

  async dispose() {
    this.disposed = true;
  }
}

const storeOn = (fake: object) => new EventStoreDbEventStore(fake as unknown as EventStoreDBClient);

// --- unit tests ----------------------------------------------------------------------------------

describe('EventStoreDB adapter mappings', function () {
  it('maps expected revisions to the client constants and bigints', function () {
    assert.equal(toClientExpectedRevision('no_stream'), 'no_stream');
    assert.equal(toClientExpectedRevision('stream_exists'), 'stream_exists');
    assert.equal(toClientExpectedRevision('any'), 'any');
    assert.equal(toClientExpectedRevision(0), 0n);
    assert.equal(toClientExpectedRevision(41), 41n);
  });

  it("maps the actual version: bigint to number, 'no_stream' and -1 to 'no_stream'", function () {
    assert.equal(toActualRevision(7n), 7);
    assert.equal(toActualRevision(0n), 0);
    assert.equal(toActualRevision('no_stream'), 'no_stream');
    assert.equal(toActualRevision(-1n), 'no_stream');
  });

  it("turns the client's WrongExpectedVersionError into WrongExpectedRevisionError", function () {
    const behind = new WrongExpectedVersionError(undefined, { streamName: 'lead-1', expected: 1n, current: 4n });
    const error = translateError(behind, 'lead-1', 1);
    assert.ok(error instanceof WrongExpectedRevisionError);
    assert.equal(error.streamId, 'lead-1');
    assert.equal(error.expected, 1);
    assert.equal(error.actual, 4);

    const missing = new WrongExpectedVersionError(undefined, { streamName: 'lead-2', expected: 'stream_exists', current: 'no_stream' });
    const noStream = translateError(missing, 'lead-2', 'stream_exists');
    assert.ok(noStream instanceof WrongExpectedRevisionError);
    assert.equal(noStream.expected, 'stream_exists');
    assert.equal(noStream.actual, 'no_stream');
  });

  it('recognises a WrongExpectedVersionError-shaped object by its type', function () {
    const shaped = { type: 'wrong-expected-version', actualVersion: 12n, message: '' };
    const error = translateError(shaped, 'idem-abc', 'no_stream');
    assert.ok(error instanceof WrongExpectedRevisionError);
    assert.equal(error.actual, 12);
    assert.equal(error.expected, 'no_stream');
  });

  it('treats unavailable, deadline and gRPC UNAVAILABLE errors as unavailable, nothing else', function () {
    assert.equal(isUnavailable(new UnavailableError(undefined, 'down')), true);
    assert.equal(isUnavailable(new DeadlineExceededError(undefined, 'slow')), true);
    assert.equal(isUnavailable(Object.assign(new Error('14 UNAVAILABLE: No connection established'), { code: 14 })), true);
    assert.equal(isUnavailable(new Error('Failed to discover after 10 attempts.')), true);
    assert.equal(isUnavailable(new WrongExpectedVersionError(undefined, { streamName: 's', expected: 0n, current: 1n })), false);
    assert.equal(isUnavailable(new Error('boom')), false);
    assert.equal(isUnavailable(undefined), false);

    const cause = new UnavailableError(undefined, 'down');
    const error = translateError(cause, 'lead-1', 'any');
    assert.ok(error instanceof EventStoreUnavailableError);
    assert.equal(error.cause, cause);
    const other = new Error('boom');
    assert.equal(translateError(other), other);
  });

  it('converts positions both ways; START is the client START', function () {
    assert.deepEqual(fromClientPosition({ commit: 123_456n, prepare: 123_400n }), { commit: 123_456, prepare: 123_400 });
    assert.equal(toClientReadPosition(START), 'start');
    assert.deepEqual(toClientReadPosition({ commit: 500, prepare: 499 }), { commit: 500n, prepare: 499n });
    assert.deepEqual(toClientReadPosition({ commit: 0, prepare: 0 }), { commit: 0n, prepare: 0n });
  });

  it('maps a recorded event: numbers for bigints, epoch ms for created, {} for missing metadata', function () {
    const event = recorded(3).event!;
    assert.deepEqual(toRecordedEvent(event), {
      id: '018f0000-0000-7000-8000-000000000003',
      streamId: 'lead-3',
      revision: 0,
      position: { commit: 300, prepare: 300 },
      type: 'E3',
      data: { n: 3 },
      metadata: { trace_id: 't3' },
      created: 1_700_000_000_003,
    });
    assert.deepEqual(toRecordedEvent({ ...event, revision: 9n, metadata: undefined }).metadata, {});
    assert.equal(toRecordedEvent({ ...event, revision: 9n }).revision, 9);
    assert.deepEqual(toRecordedEvent({ ...event, metadata: new Uint8Array([1, 2]) }).metadata, {});
  });

  it('keeps only JSON events of non-system streams and types', function () {
    assert.equal(isUserEvent(recorded(1)), true);
    assert.equal(isUserEvent(system(2)), false);
    assert.equal(isUserEvent(recorded(3, { type: '$>' })), false);
    assert.equal(isUserEvent(recorded(4, { streamId: '$$lead-4', type: 'Meta' })), false);
    assert.equal(isUserEvent(recorded(5, { binary: true })), false);
    assert.equal(isUserEvent({}), false);
  });
});

describe('EventStoreDB adapter reading $all (fake client)', function () {
  const log = () =>
    new FakeLog([
      recorded(1),
      system(2),
      recorded(3, { type: '$>' }),
      recorded(4),
      recorded(5, { binary: true }),
      recorded(6),
      system(7),
      recorded(8),
    ]);

  it('reads user events from the start, strictly after a position although the client is inclusive', async function () {
    const store = storeOn(log());
    assert.deepEqual((await store.readAll()).map((e) => e.type), ['E1', 'E4', 'E6', 'E8']);
    assert.deepEqual((await store.readAll({ fromPosition: START })).map((e) => e.type), ['E1', 'E4', 'E6', 'E8']);
    assert.deepEqual((await store.readAll({ fromPosition: { commit: 400, prepare: 400 } })).map((e) => e.type), ['E6', 'E8']);
    assert.deepEqual(await store.readAll({ fromPosition: { commit: 800, prepare: 800 } }), []);
  });

  it('counts maxCount in returned events, reading more pages when filtered events fill one', async function () {
    const fake = log();
    const store = storeOn(fake);
    const two = await store.readAll({ fromPosition: { commit: 100, prepare: 100 }, maxCount: 2 });
    assert.deepEqual(two.map((e) => e.type), ['E4', 'E6']);
    assert.ok(fake.reads.length > 1, 'more than one page read');
    assert.deepEqual(await store.readAll({ maxCount: 0 }), []);
  });

  it('finds the head behind trailing system events, over several pages', async function () {
    const events = [recorded(1), recorded(2), ...Array.from({ length: 250 }, (_, i) => system(3 + i))];
    assert.deepEqual(await storeOn(new FakeLog(events)).headPosition(), { commit: 200, prepare: 200 });
    assert.deepEqual(await storeOn(new FakeLog(events.slice(2))).headPosition(), START);
    assert.deepEqual(await storeOn(new FakeLog([])).headPosition(), START);
  });
});

describe('EventStoreDB adapter subscription (fake client)', function () {
  async function take(iterable: AsyncIterable<RecordedEvent>, count: number, onEach?: (e: RecordedEvent) => Promise<void>) {
    const seen: string[] = [];
    for await (const event of iterable) {
      seen.push(event.type);
      await onEach?.(event);
      if (seen.length === count) break;
    }
    return seen;
  }

  it('resubscribes after a drop from the last position, without duplicates or gaps', async function () {
    const fake = new FakeSubscriber([
      fakeSubscription([recorded(1), system(2), recorded(3)], 'drop'),
      // A server that repeats the last event on resubscription must not cause a duplicate.
      fakeSubscription([recorded(3), recorded(4), recorded(5)], 'live'),
    ]);
    const subscription = storeOn(fake).subscribeToAll({ fromPosition: START });
    const started = Date.now();
    assert.deepEqual(await take(subscription, 4), ['E1', 'E3', 'E4', 'E5']);
    assert.ok(Date.now() - started >= 90, 'waited for the backoff before resubscribing');
    assert.equal(fake.calls.length, 2);
    assert.equal(fake.calls[0]!.fromPosition, 'start');
    assert.deepEqual(fake.calls[1]!.fromPosition, { commit: 300n, prepare: 300n });
    const filter = fake.calls[0]!.filter;
    assert.ok(filter && 'regex' in filter, 'a server-side filter');
    assert.equal(filter.regex, '^[^$].*');
  });

  it('starts after the given position and stops yielding as soon as it is unsubscribed', async function () {
    const live = fakeSubscription([recorded(6), recorded(7), recorded(8)], 'live');
    const fake = new FakeSubscriber([live]);
    const subscription = storeOn(fake).subscribeToAll({ fromPosition: { commit: 500, prepare: 500 } });
    const seen = await take(subscription, 10, async () => subscription.unsubscribe());
    assert.deepEqual(seen, ['E6']);
    assert.deepEqual(fake.calls[0]!.fromPosition, { commit: 500n, prepare: 500n });
    assert.equal(live.unsubscribed, true);
  });

  it('close ends a live subscription and disposes of the client', async function () {
    const live = fakeSubscription([recorded(1)], 'live');
    const fake = new FakeSubscriber([live]);
    const store = storeOn(fake);
    const subscription = store.subscribeToAll();
    const consumed = take(subscription, 10);
    await new Promise((resolve) => setTimeout(resolve, 10));
    await store.close();
    assert.deepEqual(await consumed, ['E1']);
    assert.equal(live.unsubscribed, true);
    assert.equal(fake.disposed, true);
  });
});

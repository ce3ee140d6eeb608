// The EventStoreDB adapter: the shared contract suite against a real server when EVENTSTORE_URL is
// set, and, always, unit tests of its mappings and of its paging and resubscription logic against a
// fake client that behaves as the 6.x client does (inclusive readAll, exclusive subscriptions).
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import {
  AccessDeniedError,
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  START as CLIENT_START,
  StreamNotFoundError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  convertToCommandError,
  type AllStreamRecordedEvent,
  type AllStreamResolvedEvent,
  type AppendResult as ClientAppendResult,
  type EventData as ClientEventData,
  type EventStoreDBClient,
  type ReadAllOptions,
  type ReadStreamOptions as ClientReadStreamOptions,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import {
  type AdapterLogger,
  EventStoreDbEventStore,
  type EventStoreDbOptions,
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
import type { Logger } from 'pino';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { PROJECTIONS } from '../../src/projections/projections.js';
import { ProjectionRunner } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
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

/**
 * A client subscription that yields its events, then drops with the server gone ('drop'), fails
 * with the given client error, or stays live until unsubscribed.
 */
function fakeSubscription(events: AllStreamResolvedEvent[], ending: 'drop' | 'live' | Error) {
  let release = () => {};
  const released = new Promise<void>((resolve) => (release = resolve));
  return {
    unsubscribed: false,
    async *[Symbol.asyncIterator]() {
      yield* events;
      if (ending === 'drop') throw new UnavailableError(undefined, 'connection reset');
      if (ending instanceof Error) throw ending;
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

const storeOn = (fake: object, options: EventStoreDbOptions = {}) => new EventStoreDbEventStore(fake as unknown as EventStoreDBClient, options);

/** A logger that keeps its warnings, for the lines the adapter writes. */
function warnings() {
  const lines: Array<{ details: Record<string, unknown>; message: string }> = [];
  const logger = { warn: (details: Record<string, unknown>, message: string) => void lines.push({ details, message }) };
  return { lines, logger: logger as unknown as AdapterLogger };
}

// --- the client's own errors ---------------------------------------------------------------------
// Built the way the client builds them from what the server sends, through its own code: a failed
// call's gRPC status through `convertToCommandError`, a batch append's in-band google.rpc.Status
// (which the server fills as its Streams.BatchAppend does) through the client's `unpackToCommandError`.

const GRPC_STATUS = { 1: 'CANCELLED', 2: 'UNKNOWN', 3: 'INVALID_ARGUMENT', 4: 'DEADLINE_EXCEEDED', 7: 'PERMISSION_DENIED', 8: 'RESOURCE_EXHAUSTED', 14: 'UNAVAILABLE' } as const;

/** What grpc-js rejects a call with (`callErrorFromStatus`), converted as the client converts it. */
function callError(code: keyof typeof GRPC_STATUS, details: string, exception?: string): Error {
  const metadata = { getMap: () => (exception ? { exception } : {}) };
  const grpc = Object.assign(new Error(`${code} ${GRPC_STATUS[code]}: ${details}`), { code, details, metadata });
  return convertToCommandError(grpc as unknown as Parameters<typeof convertToCommandError>[0]) as Error;
}

const require = createRequire(import.meta.url);
const { Status } = require('@eventstore/db-client/generated/status_pb.js') as {
  Status: new () => { setCode(code: number): void; setMessage(message: string): void; setDetails(details: unknown): void };
};
const { Any } = require('google-protobuf/google/protobuf/any_pb.js') as { Any: new () => { pack(bytes: Uint8Array, name: string): void } };
const { Empty } = require('google-protobuf/google/protobuf/empty_pb.js') as { Empty: new () => { serializeBinary(): Uint8Array } };
const { unpackToCommandError } = require('@eventstore/db-client/dist/streams/appendToStream/unpackError.js') as {
  unpackToCommandError(status: unknown, streamName: string): Error;
};

/**
 * A batch append answered with an error Status as the server builds it: for a NotHandled reason
 * `{ Details = Any.Pack(new Empty()), Message }` and no code; `Status.Unknown` packs an empty
 * `event_store.client.Unknown`.
 */
function batchAppendError(message: string, detailsType = 'google.protobuf.Empty'): Error {
  const status = new Status();
  status.setMessage(message);
  const details = new Any();
  // Every details message used here is empty, so Empty's bytes serve for each type.
  details.pack(new Empty().serializeBinary(), detailsType);
  status.setDetails(details);
  return unpackToCommandError(status, 'lead-1');
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => assert.fail('expected a rejection'),
    (error: unknown) => error,
  );
}

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
    // A stream read on a server before 22.6 gives 2^64 - 1 for the event's place in $all: no place.
    const none = 2n ** 64n - 1n;
    assert.deepEqual(toRecordedEvent({ ...event, position: { commit: none, prepare: none } }).position, START);
    assert.deepEqual(toRecordedEvent({ ...event, position: { commit: 2n ** 53n - 1n, prepare: 7n } }).position, { commit: 2 ** 53 - 1, prepare: 7 });
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
    let delivering = false;
    const consumed = take(subscription, 10, async () => {
      delivering = true;
    });
    await until('the subscription delivering its first event', () => delivering, 5000, 5);
    await store.close();
    assert.deepEqual(await consumed, ['E1']);
    assert.equal(live.unsubscribed, true);
    assert.equal(fake.disposed, true);
  });
});

describe('EventStoreDB adapter: which client errors mean "unavailable"', function () {
  it('a server not ready, busy or without a leader, a cancelled call and exhausted resources are; access denied, a bad request, a fault and an oversized message are not', function () {
    const unavailable = [
      // Batch appends (what appendToStream uses on 21.10+ servers) carry these in-band.
      batchAppendError('Server Is Not Ready'),
      batchAppendError('Server Is Busy'),
      batchAppendError('No leader info available in response'),
      // Other calls get them as a gRPC status.
      callError(14, 'Server Is Not Ready'),
      callError(14, 'Server Is Too Busy'),
      callError(2, 'No leader info available in response'),
      callError(4, 'Deadline exceeded'),
      callError(1, 'Call cancelled'),
      callError(1, 'Cancelled on client'),
      callError(8, 'Bandwidth exhausted or memory limit exceeded'),
    ];
    // The client's classes for them, so the mapping is tested against what the client really throws.
    assert.ok(unavailable[0] instanceof UnknownError && unavailable[0].message === 'Could not recognize Server Is Not Ready');
    assert.ok(unavailable[3] instanceof UnavailableError);
    assert.ok(unavailable[5] instanceof UnknownError);
    assert.ok(unavailable[7] instanceof CancelledError);
    assert.ok(unavailable[8] instanceof UnknownError && (unavailable[8] as { code?: unknown }).code === 1);
    assert.ok(unavailable[9] instanceof UnknownError);
    // An append cut off (past its deadline, cancelled) may still be written; one the server refused never will.
    const mayLand = [false, false, false, false, false, false, true, true, true, false];
    unavailable.forEach((error, i) => {
      assert.equal(isUnavailable(error), true, error.message);
      const translated = translateError(error, 'lead-1', 'any');
      assert.ok(translated instanceof EventStoreUnavailableError, error.message);
      assert.equal(translated.cause, error);
      assert.equal(translated.mayLandLater, mayLand[i], error.message);
      assert.equal((translateError(error) as EventStoreUnavailableError).mayLandLater, false, `a read: ${error.message}`);
    });

    const faults = [
      callError(7, 'Access Denied', 'access-denied'),
      callError(3, "'7' is not a valid System.Int64"),
      callError(2, 'Unexpected FilteredReadAllResult: Error'),
      callError(2, 'Exception was thrown by handler.'),
      callError(8, 'Received message larger than max (20971520 vs 17825792)'),
      batchAppendError('Unknown', 'event_store.client.Unknown'),
    ];
    assert.ok(faults[0] instanceof AccessDeniedError);
    for (const error of faults) {
      assert.equal(isUnavailable(error), false, error.message);
      assert.equal(translateError(error), error);
    }
  });

  it('an append the server is not ready for and a read it cancels reject as EventStoreUnavailableError', async function () {
    const notReady = batchAppendError('Server Is Not Ready');
    const cancelled = callError(1, 'Call cancelled');
    const store = storeOn({
      appendToStream: async () => Promise.reject(notReady),
      readAll: () =>
        (async function* () {
          yield recorded(1);
          throw cancelled;
        })(),
    });
    const append = await rejection(store.append('lead-1', [{ type: 'E', data: {} }]));
    assert.ok(append instanceof EventStoreUnavailableError);
    assert.equal(append.cause, notReady);
    const read = await rejection(store.readAll());
    assert.ok(read instanceof EventStoreUnavailableError);
    assert.equal(read.cause, cancelled);
  });
});

describe('EventStoreDB adapter subscription failures (fake client)', function () {
  const failures: Array<[string, () => Error]> = [
    ['access denied', () => callError(7, 'Access Denied', 'access-denied')],
    ['a server fault reading $all', () => callError(2, 'Unexpected FilteredReadAllResult: Error')],
    ['a bad request', () => callError(3, "'7' is not a valid System.Int64")],
  ];
  for (const [what, failure] of failures) {
    it(`ends with the client's error on ${what}, without resubscribing`, async function () {
      const error = failure();
      const fake = new FakeSubscriber([fakeSubscription([recorded(1)], error), fakeSubscription([recorded(2)], 'live')]);
      const { lines, logger } = warnings();
      const subscription = storeOn(fake, { logger }).subscribeToAll();
      const seen: string[] = [];
      const ended = await rejection(
        (async () => {
          for await (const event of subscription) {
            seen.push(event.type);
            // A resubscription would deliver E2: stop there rather than wait on the live fake.
            if (seen.length === 2) break;
          }
        })(),
      );
      assert.equal(ended, error);
      assert.deepEqual(seen, ['E1']);
      assert.equal(fake.calls.length, 1);
      assert.deepEqual(lines, []);
    });
  }

  it('resubscribes when the server is unavailable, not ready, cancels or has no leader, with a warning each time', async function () {
    const drops = [
      new UnavailableError(undefined, 'connection reset'),
      callError(14, 'Server Is Not Ready'),
      callError(1, 'Call cancelled'),
      callError(2, 'No leader info available in response'),
    ];
    const fake = new FakeSubscriber([
      ...drops.map((error, i) => fakeSubscription([recorded(i + 1)], error)),
      fakeSubscription([recorded(5)], 'live'),
    ]);
    const { lines, logger } = warnings();
    const subscription = storeOn(fake, { logger }).subscribeToAll();
    const seen: string[] = [];
    for await (const event of subscription) {
      seen.push(event.type);
      if (seen.length === 5) break;
    }
    assert.deepEqual(seen, ['E1', 'E2', 'E3', 'E4', 'E5']);
    assert.equal(fake.calls.length, 5);
    assert.deepEqual(
      lines.map((line) => [line.message, line.details.err]),
      drops.map((error) => ['EventStoreDB $all subscription dropped; resubscribing', error]),
    );
    assert.deepEqual(lines[1]!.details.after, { commit: 200, prepare: 200 });
  });

  it('the projection runner hears of a refused subscription and reports it', async function () {
    this.timeout(5000);
    const dir = tempDir('esdb-runner');
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const denied = callError(7, 'Access Denied', 'access-denied');
    const fake = new FakeSubscriber([fakeSubscription([], denied), fakeSubscription([], 'live')]);
    let reported: (line: { details: Record<string, unknown>; message: string }) => void = () => {};
    const report = new Promise<{ details: Record<string, unknown>; message: string }>((resolve) => (reported = resolve));
    const logger = { warn: (details: Record<string, unknown>, message: string) => reported({ details, message }) } as unknown as Logger;
    const runner = new ProjectionRunner(storeOn(fake), readModels, PROJECTIONS[0]!, 'esdb', { logger });
    try {
      await runner.prepare();
      runner.start();
      const line = await report;
      assert.equal(line.message, 'projection stopped; resubscribing');
      assert.equal(line.details.err, denied);
    } finally {
      await runner.stop();
      await readModels.close();
      dir.remove();
    }
  });
});

/**
 * A client with one call of each kind in flight: appends wait to be answered, reads yield two
 * events and then wait. Its dispose cancels them as the client's does: an append rejects with the
 * converted cancellation, a read ends as if it were complete (the client swallows the error).
 */
class FakeServer {
  readonly appends: Array<{ events: ClientEventData[]; resolve(result: ClientAppendResult): void }> = [];
  reads = 0;
  disposed = false;
  readonly #cancels: Array<() => void> = [];

  appendToStream(_stream: string, events: ClientEventData[]): Promise<ClientAppendResult> {
    return new Promise((resolve, reject) => {
      this.appends.push({ events, resolve });
      this.#cancels.push(() => reject(callError(1, 'Cancelled on client')));
    });
  }

  readAll(): AsyncIterable<AllStreamResolvedEvent> {
    return this.#read([recorded(1), recorded(2)]);
  }

  readStream(): AsyncIterable<AllStreamResolvedEvent> {
    return this.#read([recorded(1), { event: { ...recorded(2).event!, streamId: 'lead-1', revision: 1n } }]);
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    for (const cancel of this.#cancels) cancel();
  }

  #read(events: AllStreamResolvedEvent[]): AsyncIterable<AllStreamResolvedEvent> {
    this.reads++;
    const cancelled = new Promise<void>((resolve) => this.#cancels.push(resolve));
    return (async function* () {
      yield* events;
      await cancelled;
    })();
  }
}

describe('EventStoreDB adapter close (fake client)', function () {
  it('refuses every call after close, with the error the embedded store gives', async function () {
    const dir = tempDir('esdb-close');
    const embedded = await EmbeddedEventStore.open(dir.path);
    await embedded.close();
    const embeddedError = await rejection(embedded.append('lead-1', [{ type: 'E', data: {} }]));
    dir.remove();

    const fake = new FakeServer();
    const store = storeOn(fake);
    await store.close();
    const refused = [
      await rejection(store.append('lead-1', [{ type: 'E', data: {} }])),
      await rejection(store.append('lead-1', [])),
      await rejection(store.readStream('lead-1')),
      await rejection(store.readAll()),
      await rejection(store.headPosition()),
      await rejection(
        (async () => {
          for await (const event of store.subscribeToAll()) void event;
        })(),
      ),
    ];
    for (const error of refused) {
      assert.ok(error instanceof EventStoreUnavailableError);
      assert.ok(embeddedError instanceof EventStoreUnavailableError);
      assert.equal(error.message, embeddedError.message);
    }
    assert.equal(fake.appends.length, 0);
    assert.equal(fake.reads, 0);
    assert.equal(fake.disposed, true);
  });

  it('lets an append already sent finish before it disposes of the client', async function () {
    const fake = new FakeServer();
    const store = storeOn(fake);
    const appending = store.append('lead-1', [{ type: 'E', data: {} }], { expectedRevision: 'no_stream' });
    assert.equal(fake.appends.length, 1);
    const closing = store.close();
    // A turn of the event loop: everything close does without waiting on the append has run.
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(fake.disposed, false, 'disposed of the client under an append in flight');
    fake.appends[0]!.resolve({ success: true, nextExpectedRevision: 0n, position: { commit: 700n, prepare: 700n } });
    assert.deepEqual(await appending, { nextExpectedRevision: 0, position: { commit: 700, prepare: 700 } });
    await closing;
    assert.equal(fake.disposed, true);
  });

  it('fails a read that close cuts short instead of returning part of it', async function () {
    const fake = new FakeServer();
    const store = storeOn(fake);
    const readingAll = store.readAll();
    const readingStream = store.readStream('lead-1');
    assert.equal(fake.reads, 2);
    await store.close();
    for (const reading of [readingAll, readingStream]) {
      const error = await rejection(reading);
      assert.ok(error instanceof EventStoreUnavailableError);
      assert.equal(error.message, 'the event store is closed');
    }
  });
});

/**
 * appendToStream serialising the events the way the 6.2.1 client does, inside its promise executor
 * (streams/appendToStream/batchAppend.js, eventBatcher): data of a JSON event through
 * JSON.stringify and Buffer.from, metadata likewise unless its constructor is Uint8Array.
 */
class FakeWire {
  calls = 0;
  readonly sent: Array<{ contentType: string; data: string; metadata: string | undefined; metadataAsBytes: boolean }> = [];

  appendToStream(_stream: string, events: ClientEventData[]): Promise<ClientAppendResult> {
    this.calls++;
    // An async executor, as the client's: a throw in it leaves the append unsettled, the flaw this reproduces.
    return new Promise<ClientAppendResult>(async (resolve) => {
      for (const event of events) {
        const data = event.contentType === 'application/json' ? Buffer.from(JSON.stringify(event.data), 'utf8') : Buffer.from(event.data as Uint8Array);
        const metadata = event.metadata as unknown;
        const metadataAsBytes = metadata instanceof Object && metadata.constructor === Uint8Array;
        const metadataBytes = metadata ? (metadataAsBytes ? Buffer.from(metadata as Uint8Array) : Buffer.from(JSON.stringify(metadata), 'utf8')) : undefined;
        this.sent.push({ contentType: event.contentType, data: data.toString('utf8'), metadata: metadataBytes?.toString('utf8'), metadataAsBytes });
      }
      resolve({ success: true, nextExpectedRevision: BigInt(events.length - 1), position: { commit: 100n, prepare: 100n } });
    });
  }
}

describe('EventStoreDB adapter serialisation (fake client)', function () {
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  const cases: Array<[string, { data: unknown; metadata?: Record<string, unknown> }]> = [
    ['undefined as the whole data', { data: undefined }],
    ['a BigInt in the data', { data: { amount: 10n } }],
    ['a cycle in the data', { data: cyclic }],
    ['a BigInt in the metadata', { data: {}, metadata: { trace: 1n } }],
  ];
  for (const [what, event] of cases) {
    it(`refuses ${what} with a clear error before the client sees the append`, async function () {
      const fake = new FakeWire();
      const error = await rejection(storeOn(fake).append('lead-1', [{ type: 'LeadReceived', ...event }]));
      assert.ok(error instanceof TypeError);
      assert.match(error.message, /^cannot append LeadReceived to lead-1: its data or metadata is not JSON/);
      assert.equal(fake.calls, 0);
    });
  }

  it('sends JSON data the client serialises to the same text, and metadata as bytes', async function () {
    const fake = new FakeWire();
    const data = { lead_id: 7, price: 12.5, tags: ['a', 'b'], dropped: undefined, at: new Date(Date.UTC(2026, 0, 2)) };
    await storeOn(fake).append('lead-7', [{ type: 'LeadReceived', data, metadata: { trace_id: 't-1' } }, { type: 'LeadEnriched', data: [1, null] }]);
    assert.deepEqual(fake.sent, [
      { contentType: 'application/json', data: JSON.stringify(data), metadata: '{"trace_id":"t-1"}', metadataAsBytes: true },
      { contentType: 'application/json', data: '[1,null]', metadata: undefined, metadataAsBytes: false },
    ]);
  });
});

/**
 * A server holding one stream, `lead-4` at revision 4, and answering an empty append as
 * EventStoreDB does: success, revision 0 whatever the stream, and no position.
 */
class FakeStreams extends FakeLog {
  appendCalls = 0;
  constructor() {
    super([recorded(1), recorded(2)]);
  }

  readStream(streamName: string, options: ClientReadStreamOptions = {}): AsyncIterable<AllStreamResolvedEvent> {
    assert.equal(options.direction, BACKWARDS);
    assert.equal(options.fromRevision, END);
    return (async function* () {
      if (streamName !== 'lead-4') throw new StreamNotFoundError(undefined, streamName);
      yield { event: { ...recorded(4).event!, streamId: 'lead-4', revision: 4n } };
    })();
  }

  async appendToStream(): Promise<ClientAppendResult> {
    this.appendCalls++;
    return { success: true, nextExpectedRevision: 0n, position: undefined };
  }
}

describe('EventStoreDB adapter: a client set not to throw on a failed append (fake client)', function () {
  /** As the 6.x client answers with throwOnAppendFailure=false in the connection string. */
  class AnswersFailure extends FakeStreams {
    override async appendToStream(): Promise<ClientAppendResult> {
      this.appendCalls++;
      return { success: false, nextExpectedRevision: 4n, position: undefined };
    }
  }

  it('rejects with WrongExpectedRevisionError and the actual revision, as when the client throws', async function () {
    const fake = new AnswersFailure();
    const store = storeOn(fake);
    const error = await rejection(store.append('lead-4', [{ type: 'E', data: {} }], { expectedRevision: 2 }));
    assert.ok(error instanceof WrongExpectedRevisionError);
    assert.deepEqual([error.streamId, error.expected, error.actual], ['lead-4', 2, 4]);
    const missing = await rejection(store.append('lead-9', [{ type: 'E', data: {} }], { expectedRevision: 'stream_exists' }));
    assert.ok(missing instanceof WrongExpectedRevisionError);
    assert.equal(missing.actual, 'no_stream');
    assert.equal(fake.appendCalls, 2);
  });
});

describe('EventStoreDB adapter: an append of no events (fake client)', function () {
  const head = { commit: 200, prepare: 200 };

  it("answers the stream's revision as it is, -1 for a missing stream, with the head position", async function () {
    const fake = new FakeStreams();
    const store = storeOn(fake);
    for (const expectedRevision of ['any', 'no_stream'] as const) {
      assert.deepEqual(await store.append('lead-9', [], { expectedRevision }), { nextExpectedRevision: -1, position: head });
    }
    for (const expectedRevision of ['any', 'stream_exists', 4] as const) {
      assert.deepEqual(await store.append('lead-4', [], { expectedRevision }), { nextExpectedRevision: 4, position: head });
    }
    assert.equal(fake.appendCalls, 0);
  });

  it('checks the expected revision as a real append would', async function () {
    const store = storeOn(new FakeStreams());
    const checks: Array<[string, 'no_stream' | 'stream_exists' | number, number | 'no_stream']> = [
      ['lead-9', 'stream_exists', 'no_stream'],
      ['lead-9', 0, 'no_stream'],
      ['lead-4', 'no_stream', 4],
      ['lead-4', 2, 4],
    ];
    for (const [streamId, expected, actual] of checks) {
      const error = await rejection(store.append(streamId, [], { expectedRevision: expected }));
      assert.ok(error instanceof WrongExpectedRevisionError, `${streamId} ${expected}`);
      assert.deepEqual([error.streamId, error.expected, error.actual], [streamId, expected, actual]);
    }
  });
});

describe('EventStoreDB adapter: an expected revision no stream can be at (fake client)', function () {
  const { BatchAppendReq } = require('@eventstore/db-client/generated/streams_pb.js') as {
    BatchAppendReq: { new (): { setOptions(options: unknown): void; serializeBinary(): Uint8Array }; Options: new () => { setStreamPosition(position: string): void } };
  };

  /** Serialises the expected revision as the client's batch append does, before anything reaches the server. */
  class Serialising extends FakeStreams {
    override async appendToStream(_stream?: string, _events?: unknown, options: { expectedRevision?: bigint | string } = {}): Promise<ClientAppendResult> {
      this.appendCalls++;
      const request = new BatchAppendReq();
      const settings = new BatchAppendReq.Options();
      if (typeof options.expectedRevision === 'bigint') settings.setStreamPosition(options.expectedRevision.toString(10));
      request.setOptions(settings);
      // grpc-js cancels the whole batch-append call when this throws, failing every append in flight on it.
      request.serializeBinary();
      return { success: true, nextExpectedRevision: 5n, position: { commit: 500n, prepare: 500n } };
    }
  }

  it('fails as a wrong revision, with the actual one, as in the embedded store, and is never sent', async function () {
    const fake = new Serialising();
    const store = storeOn(fake);
    const checks: Array<[string, number, number | 'no_stream']> = [
      ['lead-9', -1, 'no_stream'],
      ['lead-4', -1, 4],
      ['lead-4', 3.5, 4],
    ];
    for (const [streamId, expected, actual] of checks) {
      const error = await rejection(store.append(streamId, [{ type: 'E', data: {} }], { expectedRevision: expected }));
      assert.ok(error instanceof WrongExpectedRevisionError, `${streamId} ${expected}: ${String(error)}`);
      assert.deepEqual([error.streamId, error.expected, error.actual], [streamId, expected, actual]);
    }
    assert.equal(fake.appendCalls, 0);
    assert.equal((await store.append('lead-4', [{ type: 'E', data: {} }], { expectedRevision: 4 })).nextExpectedRevision, 5);
  });
});

// The EventStoreDB adapter replaces a client stuck on a failure it keeps, without a server. The
// stuck client is the 6.2.1 client itself, its server-features call answered with an error (the
// gRPC client under it is the only fake), so the test holds the client's behaviour as well as the
// adapter's; the other clients are fakes that behave as it does: a subscription it cancels (its
// own or by dispose) ends like a complete one, `subscribeToAll` is exclusive of its position, a
// backwards read of $all from END gives the newest events.
import { expect } from 'chai';
import {
  BACKWARDS,
  CancelledError,
  DeadlineExceededError,
  END,
  EventStoreDBClient,
  NotLeaderError,
  UnavailableError,
  UnknownError,
  WrongExpectedVersionError,
  type AllStreamResolvedEvent,
  type AppendResult as ClientAppendResult,
  type EventData as ClientEventData,
  type ReadAllOptions,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import { createRequire } from 'node:module';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import sinon from 'sinon';
import { type AdapterLogger, EventStoreDbEventStore } from '../../src/event-store/eventstoredb.js';
import { EventStoreUnavailableError, type RecordedEvent, WrongExpectedRevisionError } from '../../src/event-store/port.js';
import { rejection } from '../support/rejection.js';

const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_UNAVAILABLE = 14;
/** The server's (here a proxy's) own text, which no log line may carry. */
const PROXY_TEXT = 'upstream 10.1.2.3 timed out for consumer jane.doe@example.com';

/** A failed gRPC call as grpc-js reports it. */
const grpcError = (code: number) => Object.assign(new Error(`${code} STATUS: ${PROXY_TEXT}`), { code, details: PROXY_TEXT });
/**
 * A call past its gRPC deadline, as the client reports it (made from the gRPC error); not the
 * server's in-band commit timeout, a DeadlineExceededError made from nothing, which never counts.
 */
const pastDeadline = () => new DeadlineExceededError(grpcError(GRPC_DEADLINE_EXCEEDED) as unknown as ConstructorParameters<typeof DeadlineExceededError>[0]);

interface ClientInternals {
  getGRPCClient: (client: unknown, name: string) => Promise<unknown>;
  getChannel: () => Promise<{ close(): void }>;
  readonly capabilities: Promise<unknown>;
}

/**
 * The real client, its server-features call answered with `answers` in turn (an error code, null
 * for a server that lists no method, or 'never' for one that takes the call and never answers). Only the gRPC client under it is replaced; the channel
 * is the client's own (never connected), so its reconnection works as it does against a server.
 */
function clientWithFeatures(answers: Array<number | null | 'never'>) {
  const client = EventStoreDBClient.connectionString('esdb://127.0.0.1:1?tls=false');
  const internals = client as unknown as ClientInternals;
  const fetched = { count: 0 };
  internals.getGRPCClient = async () => {
    const channel = await internals.getChannel();
    return {
      getChannel: () => channel,
      getSupportedMethods(_request: unknown, callback: (error: unknown, methods?: unknown) => void) {
        fetched.count++;
        const answer = answers.length > 1 ? answers.shift() : answers[0];
        if (answer === 'never') return;
        if (answer === null || answer === undefined) callback(null, { getEventStoreServerVersion: () => '24.10.0', getMethodsList: () => [] });
        else callback(grpcError(answer));
      },
    };
  };
  const dispose = sinon.spy(client, 'dispose');
  return { client, internals, fetched, dispose };
}

/** Lead n's LeadReceived at $all position n*100. */
function leadReceived(n: number): AllStreamResolvedEvent {
  const position = { commit: BigInt(n * 100), prepare: BigInt(n * 100) };
  return {
    event: { streamId: `lead-${n}`, id: `018f0000-0000-7000-8000-${String(n).padStart(12, '0')}`, revision: 0n, type: 'LeadReceived', created: new Date(1_700_000_000_000 + n), metadata: {}, position, isJson: true, data: { lead_id: n } },
  };
}

/** The events every client of one test sees: written by the store, or by another instance. */
class FakeServer {
  readonly log: AllStreamResolvedEvent[] = [];
  readonly #listeners = new Set<() => void>();

  write(): AllStreamResolvedEvent {
    const event = leadReceived(this.log.length + 1);
    this.log.push(event);
    for (const listener of this.#listeners) listener();
    return event;
  }

  listen(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }
}

/** A client of `server`, whose appends fail with `appendsFail` (each call its own error) when given. */
class FakeClient {
  readonly subscriptions: SubscribeToAllOptions[] = [];
  readonly #cancels = new Set<() => void>();
  appends = 0;
  reads = 0;
  disposed = false;
  /** Reads fail with this, when given. */
  readsFail: (() => Error) | undefined;
  /** The next append is held until this resolves, when given. */
  hold: Promise<void> | undefined;

  constructor(
    readonly server: FakeServer,
    public appendsFail?: (() => Error) | undefined,
  ) {}

  async appendToStream(_streamId: string, _events: ClientEventData[]): Promise<ClientAppendResult> {
    this.appends++;
    const hold = this.hold;
    this.hold = undefined;
    await hold;
    if (this.appendsFail) throw this.appendsFail();
    const event = this.server.write();
    return { success: true, nextExpectedRevision: 0n, position: event.event!.position };
  }

  readStream(): AsyncIterable<AllStreamResolvedEvent> {
    this.reads++;
    const fail = this.readsFail;
    return (async function* () {
      if (fail) throw fail();
    })();
  }

  readAll(options: ReadAllOptions = {}): AsyncIterable<AllStreamResolvedEvent> {
    expect([options.direction, options.fromPosition]).to.deep.equal([BACKWARDS, END]);
    const newest = [...this.server.log].reverse().slice(0, Number(options.maxCount));
    return (async function* () {
      yield* newest;
    })();
  }

  subscribeToAll(options: SubscribeToAllOptions) {
    this.subscriptions.push(options);
    const from = options.fromPosition;
    const after = typeof from === 'object' ? from.commit : -1n;
    let cancelled = false;
    let wake = () => {};
    const cancel = () => {
      cancelled = true;
      wake();
    };
    this.#cancels.add(cancel);
    const server = this.server;
    return {
      async *[Symbol.asyncIterator]() {
        const stopListening = server.listen(() => wake());
        try {
          for (let next = 0; !cancelled; ) {
            const event = server.log[next];
            if (!event) {
              await new Promise<void>((resolve) => (wake = resolve));
              continue;
            }
            next++;
            if (event.event!.position.commit > after) yield event;
          }
        } finally {
          stopListening();
        }
      },
      unsubscribe: async () => cancel(),
    };
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    for (const cancel of this.#cancels) cancel();
  }
}

function warnings() {
  const lines: Array<{ details: Record<string, unknown>; message: string }> = [];
  const logger = { warn: (details: Record<string, unknown>, message: string) => void lines.push({ details, message }) };
  return { lines, logger: logger as unknown as AdapterLogger };
}

/** A factory handing out `clients` in turn. */
function factoryOf(...clients: object[]) {
  return sinon.spy(() => {
    const next = clients.shift();
    if (!next) throw new Error('no more clients');
    return next as EventStoreDBClient;
  });
}

const lead = [{ type: 'LeadReceived', data: { lead_id: 1 } }];
const leadIds = (events: RecordedEvent[]) => events.map((event) => (event.data as { lead_id: number }).lead_id);

/** Waits for `done`, however slow the machine, failing the test after 10 s. */
async function until(done: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !done(); await sleep(5)) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
  }
}

describe('EventStoreDB client 6.2.1: the server features it keeps', function () {
  it('keeps a failed fetch for good when it failed past its deadline, and fetches again after UNAVAILABLE', async function () {
    const deadline = clientWithFeatures([GRPC_DEADLINE_EXCEEDED]);
    for (let i = 0; i < 3; i++) {
      const error = await rejection(deadline.internals.capabilities);
      expect((error as { code?: number }).code).to.equal(GRPC_DEADLINE_EXCEEDED);
      await nextTurn();
    }
    expect(deadline.fetched.count, 'fetched once, its failure kept').to.equal(1);
    (await deadline.internals.getChannel()).close();

    const unavailable = clientWithFeatures([GRPC_UNAVAILABLE, null]);
    await rejection(unavailable.internals.capabilities);
    // The client resets what it keeps once its error handler has looked at the channel.
    await nextTurn();
    await unavailable.internals.capabilities;
    expect(unavailable.fetched.count, 'fetched again after UNAVAILABLE').to.equal(2);
    (await unavailable.internals.getChannel()).close();
  });
});

describe('EventStoreDB adapter: a client stuck on a failure it keeps', function () {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date'] })));
  afterEach(() => clock.restore());

  it('replaces it once after five failed appends over 10 s, disposes of it, warns once without the server text, and appends then succeed', async function () {
    const stuck = clientWithFeatures([GRPC_DEADLINE_EXCEEDED]);
    const healthy = new FakeClient(new FakeServer());
    const factory = factoryOf(stuck.client, healthy);
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factory, { logger });
    for (let i = 0; i < 4; i++) {
      const error = await rejection(store.append('lead-1', lead));
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
      clock.tick(3_000);
    }
    expect(factory.callCount, 'four failures in 9 s are not yet a run').to.equal(1);
    expect(lines).to.deep.equal([]);
    expect(await rejection(store.append('lead-1', lead))).to.be.instanceOf(EventStoreUnavailableError);
    expect(factory.callCount).to.equal(2);
    await until(() => stuck.dispose.called);
    expect(lines).to.have.length(1);
    expect(lines[0]!.message).to.match(/client replaced: its appends kept failing/);
    expect(lines[0]!.details).to.deep.equal({ calls: 'appends', failures: 5, seconds: 12, error: { name: 'Error', code: GRPC_DEADLINE_EXCEEDED } });
    expect(JSON.stringify(lines)).not.to.match(/upstream|jane|10\.1\.2\.3/);

    const appended = await store.append('lead-1', lead);
    expect(appended.position).to.deep.equal({ commit: 100, prepare: 100 });
    expect(healthy.appends).to.equal(1);
    await store.close();
    expect(healthy.disposed).to.equal(true);
    expect(lines, 'one warning in all').to.have.length(1);
    (await stuck.internals.getChannel()).close();
  });

  it('counts appends only against appends: reads that succeed in between do not hide a stuck append', async function () {
    const server = new FakeServer();
    const stuck = new FakeClient(server, pastDeadline);
    const factory = factoryOf(stuck, new FakeClient(server));
    const store = new EventStoreDbEventStore(factory);
    for (let i = 0; i < 5; i++) {
      expect(await store.readStream('lead-1')).to.deep.equal([]);
      await rejection(store.append('lead-1', lead));
      clock.tick(3_000);
    }
    expect(stuck.reads, 'each append failed after a read succeeded').to.equal(5);
    expect(factory.callCount).to.equal(2);
    await until(() => stuck.disposed);
    await store.close();
  });

  it('replaces it after five failed reads over 10 s too, such as a channel answering INTERNAL', async function () {
    const server = new FakeServer();
    const stuck = new FakeClient(server);
    stuck.readsFail = () => grpcError(13);
    const healthy = new FakeClient(server);
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factoryOf(stuck, healthy), { logger });
    for (let i = 0; i < 5; i++) {
      clock.tick(3_000);
      expect(await rejection(store.readStream('lead-1'))).to.have.property('code', 13);
    }
    expect(await store.readStream('lead-1')).to.deep.equal([]);
    expect(healthy.reads).to.equal(1);
    expect(lines.map((line) => line.details)).to.deep.equal([{ calls: 'reads', failures: 5, seconds: 12, error: { name: 'Error', code: 13 } }]);
    await until(() => stuck.disposed);
    await store.close();
  });

  it('never counts a revision conflict, nor an error the client reconnects on by itself, nor a server not ready', async function () {
    const conflict = () => new WrongExpectedVersionError(undefined, { streamName: 'lead-1', expected: 0n, current: 3n });
    for (const appendsFail of [
      conflict,
      () => new UnavailableError(undefined, PROXY_TEXT),
      () => new CancelledError(undefined, PROXY_TEXT),
      () => new NotLeaderError({ code: 5, metadata: { getMap: () => ({ 'leader-endpoint-host': 'node-2', 'leader-endpoint-port': '2113' }) } } as unknown as ConstructorParameters<typeof NotLeaderError>[0]),
      () => new UnknownError(undefined, 'Could not recognize Server Is Not Ready'),
    ]) {
      const factory = factoryOf(new FakeClient(new FakeServer(), appendsFail), new FakeClient(new FakeServer()));
      const store = new EventStoreDbEventStore(factory);
      for (let i = 0; i < 12; i++) {
        await rejection(store.append('lead-1', lead, { expectedRevision: 0 }));
        clock.tick(5_000);
      }
      expect(factory.callCount, appendsFail().constructor.name).to.equal(1);
      await store.close();
    }
    const store = new EventStoreDbEventStore(factoryOf(new FakeClient(new FakeServer(), conflict)));
    expect(await rejection(store.append('lead-1', lead, { expectedRevision: 0 }))).to.be.instanceOf(WrongExpectedRevisionError);
    await store.close();
  });

  it('does not replace it for failures below the threshold: too few, too quick, or broken by a success', async function () {
    const server = new FakeServer();
    const flaky = new FakeClient(server);
    const failing = (yes: boolean) => (flaky.appendsFail = yes ? pastDeadline : undefined);
    const factory = factoryOf(flaky, new FakeClient(server));
    const store = new EventStoreDbEventStore(factory);
    const fail = async (count: number, everyMs: number) => {
      for (let i = 0; i < count; i++) {
        await rejection(store.append('lead-1', lead));
        clock.tick(everyMs);
      }
    };
    failing(true);
    await fail(4, 20_000); // four over a minute
    failing(false);
    await store.append('lead-1', lead);
    failing(true);
    await fail(20, 400); // twenty in 8 s
    failing(false);
    await store.append('lead-1', lead);
    failing(true);
    await fail(4, 5_000);
    failing(false);
    await store.append('lead-1', lead);
    failing(true);
    await fail(4, 5_000);
    expect(factory.callCount).to.equal(1);
    expect(flaky.disposed).to.equal(false);
    await fail(1, 0); // the fifth since the last success, 20 s after the first
    expect(factory.callCount).to.equal(2);
    await store.close();
  });

  it('replaces a client at most once a minute, however its successor fails', async function () {
    const server = new FakeServer();
    const stuck = () => new FakeClient(server, () => new UnknownError(undefined, PROXY_TEXT));
    const { lines, logger } = warnings();
    const factory = factoryOf(stuck(), stuck(), stuck());
    const store = new EventStoreDbEventStore(factory, { logger });
    for (let second = 0; second < 72; second += 3) {
      await rejection(store.append('lead-1', lead));
      clock.tick(3_000);
    }
    expect(factory.callCount, 'replaced at 12 s, and again at 72 s at the soonest').to.equal(2);
    await rejection(store.append('lead-1', lead));
    expect(factory.callCount).to.equal(3);
    expect(lines.map((line) => line.details.error)).to.deep.equal([
      { name: 'UnknownError', type: 'unknown' },
      { name: 'UnknownError', type: 'unknown' },
    ]);
    await store.close();
  });

  it('lets an append already sent on the old client finish before disposing of it', async function () {
    const server = new FakeServer();
    let answer = () => {};
    const old = new FakeClient(server);
    old.hold = new Promise<void>((resolve) => (answer = resolve));
    const factory = factoryOf(old, new FakeClient(server));
    const store = new EventStoreDbEventStore(factory);
    const sent = store.append('lead-1', lead);
    await until(() => old.appends === 1);
    old.appendsFail = pastDeadline;
    for (let i = 0; i < 5; i++) {
      await rejection(store.append('lead-1', lead));
      clock.tick(3_000);
    }
    expect(factory.callCount).to.equal(2);
    await nextTurn();
    expect(old.disposed, 'kept while an append on it runs').to.equal(false);
    old.appendsFail = undefined;
    answer();
    expect((await sent).position).to.deep.equal({ commit: 100, prepare: 100 });
    await until(() => old.disposed);
    await store.close();
  });

  it('disposes of the old client after 10 s at most, failing an append it never answered as unavailable: it may have been written', async function () {
    clock.restore();
    clock = sinon.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date', 'setTimeout', 'clearTimeout'] });
    const server = new FakeServer();
    const old = new FakeClient(server);
    old.hold = new Promise<void>(() => {});
    // A deadline longer than the wait, for the append to be left unanswered rather than past its deadline.
    const store = new EventStoreDbEventStore(factoryOf(old, new FakeClient(server)), { callDeadlineMs: 60_000 });
    const unanswered = rejection(store.append('lead-1', lead));
    old.appendsFail = pastDeadline;
    for (let i = 0; i < 5; i++) {
      clock.tick(3_000);
      await rejection(store.append('lead-1', lead));
    }
    await clock.tickAsync(9_999);
    expect(old.disposed).to.equal(false);
    await clock.tickAsync(1);
    expect(old.disposed).to.equal(true);
    const error = await unanswered;
    expect(error).to.be.instanceOf(EventStoreUnavailableError);
    expect(error.message).to.match(/client was replaced before the server answered the append, which may have been written/);
    expect((error as EventStoreUnavailableError).mayLandLater).to.equal(true);
    expect((await store.append('lead-2', lead)).position).to.deep.equal({ commit: 100, prepare: 100 });
    await store.close();
  });

  it('moves a running subscription to the new client after its last event, without a gap, a repeat or a warning of its own', async function () {
    const server = new FakeServer();
    server.write();
    server.write();
    const stuck = new FakeClient(server, pastDeadline);
    const healthy = new FakeClient(server);
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factoryOf(stuck, healthy), { logger });
    const delivered: RecordedEvent[] = [];
    const subscription = store.subscribeToAll();
    const consuming = (async () => {
      for await (const event of subscription) {
        delivered.push(event);
        if (delivered.length === 4) break;
      }
    })();
    await until(() => delivered.length === 2);
    for (let i = 0; i < 5; i++) {
      await rejection(store.append('lead-3', lead));
      clock.tick(3_000);
    }
    await until(() => healthy.subscriptions.length === 1);
    expect(healthy.subscriptions[0]!.fromPosition).to.deep.equal({ commit: 200n, prepare: 200n });
    server.write(); // another instance's lead 3
    await store.append('lead-4', lead); // lead 4, through the new client
    await consuming;
    expect(leadIds(delivered)).to.deep.equal([1, 2, 3, 4]);
    expect(stuck.subscriptions).to.have.length(1);
    expect(lines.map((line) => line.message)).to.have.length(1);
    expect(lines[0]!.message).to.match(/client replaced/);
    await until(() => stuck.disposed);
    await store.close();
  });

  it('never replaces a client it was given as is', async function () {
    const stuck = new FakeClient(new FakeServer(), pastDeadline);
    const store = new EventStoreDbEventStore(stuck as unknown as EventStoreDBClient);
    for (let i = 0; i < 10; i++) {
      await rejection(store.append('lead-1', lead));
      clock.tick(3_000);
    }
    expect(stuck.disposed).to.equal(false);
    expect(stuck.appends).to.equal(10);
    await store.close();
    expect(stuck.disposed).to.equal(true);
  });
});

const require = createRequire(import.meta.url);
const { Status } = require('@eventstore/db-client/generated/status_pb.js') as {
  Status: new () => { setCode(code: number): void; setMessage(message: string): void; setDetails(details: unknown): void };
};
const { Any } = require('google-protobuf/google/protobuf/any_pb.js') as { Any: new () => { pack(bytes: Uint8Array, name: string): void } };
const { Timeout } = require('@eventstore/db-client/generated/shared_pb.js') as { Timeout: new () => { serializeBinary(): Uint8Array } };
const { unpackToCommandError } = require('@eventstore/db-client/dist/streams/appendToStream/unpackError.js') as {
  unpackToCommandError(status: unknown, streamName: string): Error;
};

/** The server's in-band answer to a batch append it could not commit in time, decoded by the client's own batch-append decoder. */
function commitTimeout(): Error {
  const status = new Status();
  status.setCode(GRPC_DEADLINE_EXCEEDED);
  status.setMessage('Timeout');
  const details = new Any();
  details.pack(new Timeout().serializeBinary(), 'event_store.client.Timeout');
  status.setDetails(details);
  return unpackToCommandError(status, 'lead-1');
}

describe('EventStoreDB adapter: a client whose calls are never answered', function () {
  /** Short, for the tests to take milliseconds; the run's 10 s are counted on a fake clock. */
  const DEADLINE_MS = 20;
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date'] })));
  afterEach(() => clock.restore());

  it('fails appends waiting on a server-features fetch never answered at the deadline, and replaces the client after five over 10 s', async function () {
    const stuck = clientWithFeatures(['never']);
    const healthy = new FakeClient(new FakeServer());
    const factory = factoryOf(stuck.client, healthy);
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factory, { logger, callDeadlineMs: DEADLINE_MS });
    for (let i = 0; i < 5; i++) {
      const error = await rejection(store.append('lead-1', lead));
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
      expect(error.message).to.match(/no answer to the append within 0\.02 s; it may have been written/);
      expect((error as EventStoreUnavailableError).mayLandLater).to.equal(true);
      clock.tick(3_000);
    }
    expect(stuck.fetched.count, 'one fetch, never answered, which every append waited on').to.equal(1);
    expect(factory.callCount).to.equal(2);
    expect(lines.map((line) => line.details)).to.deep.equal([{ calls: 'appends', failures: 5, seconds: 12, error: { name: 'NoAnswerError' } }]);
    await until(() => stuck.dispose.called);
    expect((await store.append('lead-1', lead)).position).to.deep.equal({ commit: 100, prepare: 100 });
    await store.close();
    (await stuck.internals.getChannel()).close();
  });

  it('replaces it after five reads never answered over 10 s: readStream, readAll, headPosition alike', async function () {
    const server = new FakeServer();
    const silent = () => ({ async *[Symbol.asyncIterator]() { await new Promise(() => {}); } });
    const stuck = Object.assign(new FakeClient(server), { readStream: silent, readAll: silent });
    const healthy = new FakeClient(server);
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factoryOf(stuck, healthy), { logger, callDeadlineMs: DEADLINE_MS });
    for (const read of [() => store.readStream('lead-1'), () => store.readAll(), () => store.headPosition(), () => store.readStream('lead-2'), () => store.headPosition()]) {
      expect(await rejection(read())).to.be.instanceOf(EventStoreUnavailableError);
      clock.tick(3_000);
    }
    expect(lines.map((line) => line.details)).to.deep.equal([{ calls: 'reads', failures: 5, seconds: 12, error: { name: 'NoAnswerError' } }]);
    expect(await store.readStream('lead-1')).to.deep.equal([]);
    expect(healthy.reads).to.equal(1);
    await until(() => stuck.disposed);
    await store.close();
  });

  it('lets a late answer change nothing: the append stays failed, a late success does not end the run, a late error is not unhandled', async function () {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const server = new FakeServer();
      const slow = new FakeClient(server);
      const factory = factoryOf(slow, new FakeClient(server));
      const store = new EventStoreDbEventStore(factory, { callDeadlineMs: DEADLINE_MS });
      for (let i = 0; i < 5; i++) {
        let answer = () => {};
        slow.hold = new Promise<void>((resolve) => (answer = resolve));
        // Every other late answer is an error.
        slow.appendsFail = i % 2 ? pastDeadline : undefined;
        const error = await rejection(store.append('lead-1', lead));
        expect(error.message).to.match(/no answer to the append/);
        answer();
        await sleep(DEADLINE_MS);
        clock.tick(3_000);
      }
      expect(server.log, 'the late answers were written').to.have.length(3);
      expect(factory.callCount, 'five failures over 12 s, the late successes notwithstanding').to.equal(2);
      await sleep(DEADLINE_MS);
      expect(unhandled).to.deep.equal([]);
      await store.close();
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});

describe("EventStoreDB adapter: the server's own commit timeout of a batch append", function () {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ now: 1_700_000_000_000, toFake: ['Date'] })));
  afterEach(() => clock.restore());

  it('is a 503 that says the server timed out committing, never "unreachable", and never replaces the client; a call past its gRPC deadline does', async function () {
    const timeout = commitTimeout();
    expect(timeout).to.be.instanceOf(DeadlineExceededError);
    const factory = factoryOf(new FakeClient(new FakeServer(), commitTimeout), new FakeClient(new FakeServer()));
    const { lines, logger } = warnings();
    const store = new EventStoreDbEventStore(factory, { logger });
    for (let i = 0; i < 12; i++) {
      const error = await rejection(store.append('lead-1', lead));
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
      expect(error.message).to.equal('EventStoreDB: the server timed out committing the append, which may have been written');
      expect((error as EventStoreUnavailableError).mayLandLater).to.equal(true);
      expect((error as { cause?: unknown }).cause).to.be.instanceOf(DeadlineExceededError);
      clock.tick(5_000);
    }
    expect(factory.callCount).to.equal(1);
    expect(lines).to.deep.equal([]);
    await store.close();

    const pastItsDeadline = factoryOf(new FakeClient(new FakeServer(), pastDeadline), new FakeClient(new FakeServer()));
    const other = new EventStoreDbEventStore(pastItsDeadline);
    for (let i = 0; i < 5; i++) {
      await rejection(other.append('lead-1', lead));
      clock.tick(3_000);
    }
    expect(pastItsDeadline.callCount).to.equal(2);
    await other.close();
  });
});

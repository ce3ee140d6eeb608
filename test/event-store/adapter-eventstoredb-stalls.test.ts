// The EventStoreDB adapter where the client leaves it waiting, without a server: a $all
// subscription whose stream stays open but sends nothing, and an append the client never answers
// when the store closes. The fake client behaves as the 6.2.1 client does: a subscription it
// cancels ends like a complete one; a backwards read of $all from END gives the newest events.
import { expect } from 'chai';
import {
  BACKWARDS,
  END,
  UnavailableError,
  type AllStreamResolvedEvent,
  type AppendResult as ClientAppendResult,
  type EventStoreDBClient,
  type ReadAllOptions,
  type SubscribeToAllOptions,
} from '@eventstore/db-client';
import { execFile } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import sinon from 'sinon';
import { type AdapterLogger, EventStoreDbEventStore } from '../../src/event-store/eventstoredb.js';
import { EventStoreUnavailableError, type RecordedEvent } from '../../src/event-store/port.js';
import { isStoreUnavailable } from '../../src/store-unavailable.js';
import { rejection } from '../support/rejection.js';

const IDLE_MS = 40;

/** Lead n's LeadReceived, at $all position n*100. */
function leadReceived(n: number): AllStreamResolvedEvent {
  const position = { commit: BigInt(n * 100), prepare: BigInt(n * 100) };
  return {
    event: { streamId: `lead-${n}`, id: `018f0000-0000-7000-8000-${String(n).padStart(12, '0')}`, revision: 0n, type: 'LeadReceived', created: new Date(1_700_000_000_000 + n), metadata: {}, position, isJson: true, data: { lead_id: n } },
  };
}

/** A client subscription that sends its events and then nothing, its stream open until cancelled. */
function silentAfter(events: AllStreamResolvedEvent[]) {
  let cancel = () => {};
  const cancelled = new Promise<void>((resolve) => (cancel = resolve));
  return {
    cancelled: false,
    async *[Symbol.asyncIterator]() {
      yield* events;
      await cancelled;
    },
    async unsubscribe() {
      this.cancelled = true;
      cancel();
    },
  };
}

/** A server holding `log`, whose $all subscriptions are the script's, in turn. */
class SilentServer {
  readonly subscriptions: SubscribeToAllOptions[] = [];
  readonly headReads: ReadAllOptions[] = [];
  headUnavailable = false;
  constructor(
    readonly log: AllStreamResolvedEvent[],
    readonly script: Array<ReturnType<typeof silentAfter>>,
  ) {}

  subscribeToAll(options: SubscribeToAllOptions) {
    this.subscriptions.push(options);
    const next = this.script.shift();
    if (!next) throw new Error('no more scripted subscriptions');
    return next;
  }

  readAll(options: ReadAllOptions = {}): AsyncIterable<AllStreamResolvedEvent> {
    expect([options.direction, options.fromPosition]).to.deep.equal([BACKWARDS, END]);
    this.headReads.push(options);
    const unavailable = this.headUnavailable;
    const newest = [...this.log].reverse().slice(0, Number(options.maxCount));
    return (async function* () {
      if (unavailable) throw new UnavailableError(undefined, 'connection reset');
      yield* newest;
    })();
  }

  async dispose(): Promise<void> {}
}

function warnings() {
  const lines: Array<{ details: Record<string, unknown>; message: string }> = [];
  const logger = { warn: (details: Record<string, unknown>, message: string) => void lines.push({ details, message }) };
  return { lines, logger: logger as unknown as AdapterLogger };
}

const storeOn = (fake: object, logger?: AdapterLogger) =>
  new EventStoreDbEventStore(fake as unknown as EventStoreDBClient, { logger, subscriptionIdleMs: IDLE_MS });

const leadIds = (events: RecordedEvent[]) => events.map((event) => (event.data as { lead_id: number }).lead_id);

/** Waits for `done`, however slow the machine, failing the test after 10 s. */
async function until(done: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 10_000; !done(); await sleep(5)) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
  }
}

describe('EventStoreDB adapter: a $all subscription gone silent (fake client)', function () {
  it('is started again after the last event it delivered when the store has later ones', async function () {
    const first = silentAfter([leadReceived(1), leadReceived(2)]);
    const server = new SilentServer([1, 2, 3].map(leadReceived), [first, silentAfter([leadReceived(3)])]);
    const { lines, logger } = warnings();
    const subscription = storeOn(server, logger).subscribeToAll();
    const delivered: RecordedEvent[] = [];
    for await (const event of subscription) {
      delivered.push(event);
      if (delivered.length === 3) break;
    }
    expect(leadIds(delivered)).to.deep.equal([1, 2, 3]);
    expect(first.cancelled).to.equal(true);
    expect(server.subscriptions).to.have.length(2);
    expect(server.subscriptions[1]!.fromPosition).to.deep.equal({ commit: 200n, prepare: 200n });
    expect(lines).to.have.length(1);
    expect(lines[0]!.message).to.match(/silent while the store has later events; resubscribing/);
    expect(lines[0]!.details).to.deep.include({ after: { commit: 200, prepare: 200 }, head: { commit: 300, prepare: 300 } });
  });

  it('is left alone while the store has nothing later, and no longer looked at once unsubscribed', async function () {
    const server = new SilentServer([1, 2].map(leadReceived), [silentAfter([leadReceived(1), leadReceived(2)])]);
    const { lines, logger } = warnings();
    const subscription = storeOn(server, logger).subscribeToAll();
    const delivered: RecordedEvent[] = [];
    const consuming = (async () => {
      for await (const event of subscription) delivered.push(event);
    })();
    await until(() => server.headReads.length >= 3);
    expect(server.subscriptions).to.have.length(1);
    expect(lines).to.deep.equal([]);
    await subscription.unsubscribe();
    await consuming;
    const looked = server.headReads.length;
    await sleep(IDLE_MS * 4);
    expect(server.headReads).to.have.length(looked);
    expect(leadIds(delivered)).to.deep.equal([1, 2]);
  });

  it('is not cancelled while the head cannot be read: the next look tries again', async function () {
    const first = silentAfter([leadReceived(1)]);
    const server = new SilentServer([1, 2].map(leadReceived), [first, silentAfter([leadReceived(2)])]);
    server.headUnavailable = true;
    const subscription = storeOn(server).subscribeToAll();
    const delivered: RecordedEvent[] = [];
    const consuming = (async () => {
      for await (const event of subscription) {
        delivered.push(event);
        if (delivered.length === 2) break;
      }
    })();
    await until(() => server.headReads.length >= 2);
    expect(first.cancelled).to.equal(false);
    server.headUnavailable = false;
    await consuming;
    expect(leadIds(delivered)).to.deep.equal([1, 2]);
    expect(server.subscriptions).to.have.length(2);
  });

  it('is no silence while the consumer holds an event, however long', async function () {
    const server = new SilentServer([1, 2, 3].map(leadReceived), [silentAfter([1, 2, 3].map(leadReceived))]);
    const subscription = storeOn(server).subscribeToAll();
    const delivered: RecordedEvent[] = [];
    for await (const event of subscription) {
      delivered.push(event);
      // The store's head (3) is past the last event delivered (1) all this time.
      if (delivered.length === 1) await sleep(IDLE_MS * 5);
      if (delivered.length === 3) break;
    }
    expect(leadIds(delivered)).to.deep.equal([1, 2, 3]);
    expect(server.headReads).to.deep.equal([]);
    expect(server.subscriptions).to.have.length(1);
  });

  it("never keeps the process alive: a process whose only work left is a silent subscription's watchdog exits", async function () {
    const adapter = new URL('../../src/event-store/eventstoredb.js', import.meta.url).href;
    // The child keeps itself alive for a few looks of the watchdog, then lets go.
    const child = `
      const { EventStoreDbEventStore } = await import(${JSON.stringify(adapter)});
      let headReads = 0;
      const client = {
        subscribeToAll: () => ({ async *[Symbol.asyncIterator]() { await new Promise(() => {}); }, async unsubscribe() {} }),
        readAll: () => (headReads++, (async function* () {})()),
        dispose: async () => {},
      };
      const subscription = new EventStoreDbEventStore(client, { subscriptionIdleMs: 10 }).subscribeToAll();
      void (async () => { for await (const event of subscription) void event; })();
      setTimeout(() => process.stdout.write(String(headReads)), 300);
    `;
    const { code, stdout, killed } = await new Promise<{ code: number | null; stdout: string; killed: boolean }>((resolve) => {
      const run = execFile(process.execPath, ['--input-type=module', '-e', child], { timeout: 20_000 }, (error, out) =>
        resolve({ code: error ? ((error as { code?: number }).code ?? null) : 0, stdout: out, killed: run.killed }),
      );
    });
    expect(killed, 'still running after 20 s').to.equal(false);
    expect(code).to.equal(0);
    expect(Number(stdout), 'looks at the head before the process lets go').to.be.at.least(2);
  });
});

/** A client that takes appends and never answers them, as a batch-append stream that ended without an error leaves them. */
class UnansweringServer {
  appends = 0;
  disposed = false;
  appendToStream(): Promise<ClientAppendResult> {
    this.appends++;
    return new Promise(() => {});
  }
  async dispose(): Promise<void> {
    this.disposed = true;
  }
}

describe('EventStoreDB adapter: close with an append never answered (fake client)', function () {
  let clock: sinon.SinonFakeTimers;
  beforeEach(() => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] })));
  afterEach(() => clock.restore());

  it('waits 10 s for it, then disposes of the client and fails it as unavailable: it may have been written', async function () {
    const server = new UnansweringServer();
    const store = storeOn(server);
    const appending = store.append('lead-1', [{ type: 'LeadReceived', data: { lead_id: 1 } }], { expectedRevision: 'no_stream' });
    const failed = rejection(appending);
    let closed = false;
    const closing = store.close().then(() => (closed = true));
    await clock.tickAsync(9_999);
    expect([closed, server.disposed]).to.deep.equal([false, false]);
    await clock.tickAsync(1);
    await closing;
    expect(server.disposed).to.equal(true);
    const error = await failed;
    expect(error).to.be.instanceOf(EventStoreUnavailableError);
    expect(error.message).to.match(/may have been written/);
    expect(isStoreUnavailable(error)).to.equal(true);
    expect((error as EventStoreUnavailableError).mayLandLater).to.equal(true);
    expect(server.appends).to.equal(1);
  });

  it('closes at once with no append in flight, and leaves no timer behind', async function () {
    const server = new UnansweringServer();
    await storeOn(server).close();
    expect(server.disposed).to.equal(true);
    expect(clock.countTimers()).to.equal(0);
  });
});

/**
 * A read the client started and the server never answers: the 6.2.1 client's ReadStream, which
 * iterates until its gRPC call ends, and can be cancelled (the gRPC call) or destroyed (the stream).
 */
function unansweredRead() {
  let end = () => {};
  const ended = new Promise<void>((resolve) => (end = resolve));
  return {
    cancelled: 0,
    destroyed: 0,
    async *[Symbol.asyncIterator](): AsyncGenerator<AllStreamResolvedEvent> {
      await ended;
      throw new Error('destroyed');
    },
    async cancel() {
      this.cancelled++;
    },
    destroy() {
      this.destroyed++;
      end();
    },
  };
}

/** A server (or a proxy whose upstream hangs) that takes every call and never answers it. */
class SilentCallsServer {
  appends = 0;
  readonly reads: Array<ReturnType<typeof unansweredRead>> = [];
  disposed = false;
  appendToStream(): Promise<ClientAppendResult> {
    this.appends++;
    return new Promise(() => {});
  }
  readStream() {
    const read = unansweredRead();
    this.reads.push(read);
    return read;
  }
  readAll() {
    return this.readStream();
  }
  async dispose(): Promise<void> {
    this.disposed = true;
  }
}

/** How `promise` settled within `ms`, or 'pending'. */
async function settledWithin(promise: Promise<unknown>, ms: number): Promise<{ error: unknown; afterMs: number } | 'pending'> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    promise.then(
      () => ({ error: undefined, afterMs: Date.now() - started }),
      (error: unknown) => ({ error, afterMs: Date.now() - started }),
    ),
    new Promise<'pending'>((resolve) => (timer = setTimeout(() => resolve('pending'), ms))),
  ]);
  clearTimeout(timer);
  return outcome;
}

describe('EventStoreDB adapter: a server that takes every call and never answers it (fake client)', function () {
  const DEADLINE_MS = 50;
  const lead = [{ type: 'LeadReceived', data: { lead_id: 1 } }];

  it('fails each of append, readStream, readAll, headPosition and an empty append as unavailable at the deadline, the reads cancelled in the client', async function () {
    const server = new SilentCallsServer();
    const store = new EventStoreDbEventStore(server as unknown as EventStoreDBClient, { callDeadlineMs: DEADLINE_MS });
    const calls = {
      append: store.append('lead-1', lead, { expectedRevision: 'no_stream' }),
      readStream: store.readStream('lead-1'),
      readAll: store.readAll({ maxCount: 10 }),
      headPosition: store.headPosition(),
      'an empty append (its last-revision read)': store.append('lead-1', [], { expectedRevision: 0 }),
    };
    for (const [call, promise] of Object.entries(calls)) {
      const outcome = await settledWithin(promise, 5_000);
      expect(outcome, `${call} still pending after 5 s`).not.to.equal('pending');
      const { error, afterMs } = outcome as { error: Error; afterMs: number };
      expect(error, call).to.be.instanceOf(EventStoreUnavailableError);
      expect(isStoreUnavailable(error), call).to.equal(true);
      expect(error.message, call).to.match(/EventStoreDB: no answer/);
      expect(afterMs, call).to.be.below(2_000);
    }
    expect((await rejection(calls.append)).message).to.match(/no answer to the append within 0\.05 s; it may have been written/);
    expect(server.appends).to.equal(1);
    expect(server.reads.map((read) => [read.cancelled, read.destroyed])).to.deep.equal([
      [1, 1],
      [1, 1],
      [1, 1],
      [1, 1],
    ]);
    await store.close();
    expect(server.disposed).to.equal(true);
  });

  it('leaves no timer behind when close abandons a call still waiting for its answer', async function () {
    const clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      const server = new SilentCallsServer();
      const store = new EventStoreDbEventStore(server as unknown as EventStoreDBClient);
      const reading = rejection(store.readStream('lead-1'));
      await clock.tickAsync(0);
      expect(clock.countTimers(), "the read's deadline").to.equal(1);
      await store.close();
      expect(await reading).to.be.instanceOf(EventStoreUnavailableError);
      expect(clock.countTimers()).to.equal(0);
    } finally {
      clock.restore();
    }
  });
});

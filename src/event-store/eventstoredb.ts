// The EventStore port on EventStoreDB, through @eventstore/db-client 6.x (gRPC).
//
// Facts about the 6.x client this adapter is built on (checked in its source, not assumed):
// - `readAll({fromPosition})` is INCLUSIVE: the event at that position comes back first. Our
//   positions are exclusive, so reads drop everything at or before the position they start from.
// - `subscribeToAll({fromPosition})` is EXCLUSIVE, like ours.
// - `created` is a Date (the client converts the server's .NET ticks), so `getTime()` is epoch ms.
// - A failed expected-revision check rejects with `WrongExpectedVersionError` (`type`
//   'wrong-expected-version'), whose `actualVersion` is a bigint or the string 'no_stream'.
// - Subscriptions never resubscribe by themselves, and caught-up / fell-behind / checkpoint
//   messages are emitted as events, not yielded; only resolved events are iterated.
// - `dispose()` cancels every call in flight, and a read or subscription cancelled by the client
//   ends like a complete one (the cancellation error is swallowed); calls made afterwards still
//   run. Closing is therefore ours to enforce.
// - A JSON event's data (and a non-Uint8Array metadata) is JSON.stringify'd inside the promise
//   executor of the append: a value that does not serialise there never settles the append and
//   surfaces as an unhandled rejection. Events are serialised here first.
// - An expected revision that is no uint64 (a negative one) cannot be serialised: grpc-js then
//   cancels the batch-append call, which every append in flight shares, and fails them all.
// - Batch appends (servers 21.10+) report a server that is not ready or busy in-band, as an
//   `UnknownError` "Could not recognize Server Is Not Ready" / "… Server Is Busy", without a code.
// - A failed fetch of the server's features, which every append waits on, is kept for the life of
//   the client unless the client reconnects on its error: a client stuck so is replaced (see
//   eventstoredb-renewal.ts).
// - Reads, subscriptions and the batch-append stream run without a deadline (the client passes
//   Infinity, over any `deadline` given), and so does the server-features fetch: a server or proxy
//   that takes a call and never answers leaves it pending for good. Every request here is held to
//   the adapter's own deadline instead (10 s); a read past it is cancelled, and it fails as
//   unavailable. An append cannot be cancelled alone (one batch-append stream carries them all).
// - A batch append the server could not commit in time is answered in-band (its `Timeout`), and
//   the client makes that a DeadlineExceededError of its own, from no gRPC error: no code, no
//   message. A call past its gRPC deadline is one made from the gRPC error (code 4).
import type { Logger } from 'pino';
import {
  ANY,
  BACKWARDS,
  END,
  ErrorType,
  EventStoreDBClient,
  FORWARDS,
  NO_STREAM,
  START as CLIENT_START,
  STREAM_EXISTS,
  excludeSystemEvents,
  jsonEvent,
  type AllStreamResolvedEvent,
  type AllStreamSubscription,
  type AppendExpectedRevision,
  type CurrentRevision,
  type EventData as ClientEventData,
  type JSONType,
  type Position as ClientPosition,
  type ReadAllOptions as ClientReadAllOptions,
  type ReadPosition,
  type RecordedEvent as ClientRecordedEvent,
  type StreamingRead,
} from '@eventstore/db-client';
import { newEventId } from './event-id.js';
import {
  type AllSubscription,
  type AppendOptions,
  type AppendResult,
  type EventData,
  type EventMetadata,
  type EventStore,
  EventStoreUnavailableError,
  type ExpectedRevision,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  START,
  type SubscribeOptions,
  WrongExpectedRevisionError,
  comparePositions,
  expectedRevisionMatches,
} from './port.js';
import { notJsonError } from './event-json.js';
import { type Ask, CALL_DEADLINE_MS, type CallKind, type ClientInUse, RETIRED_CLIENT_WAIT_MS, type Renewal, RenewableClient } from './eventstoredb-renewal.js';

const READ_PAGE = 500;
const HEAD_PAGE = 100;
const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5000;
const DEFAULT_SUBSCRIPTION_IDLE_MS = 30_000;
/**
 * How long close waits for the appends already sent. Not forever: the client's batch append
 * settles an append only on an answer or an error of its gRPC stream, and a stream that ends
 * without either leaves it pending (their own deadline ends them as soon, unless one longer was
 * given). A client replaced because it looked stuck is kept as long.
 */
const CLOSE_APPENDS_WAIT_MS = RETIRED_CLIENT_WAIT_MS;
// gRPC status codes; @grpc/grpc-js is only a transitive dependency, so it is not imported.
const GRPC_CANCELLED = 1;
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_RESOURCE_EXHAUSTED = 8;
const GRPC_UNAVAILABLE = 14;
const RETRYABLE_CODES: ReadonlySet<unknown> = new Set([GRPC_CANCELLED, GRPC_DEADLINE_EXCEEDED, GRPC_RESOURCE_EXHAUSTED, GRPC_UNAVAILABLE]);
const RETRYABLE_TYPES: ReadonlySet<unknown> = new Set([
  ErrorType.UNAVAILABLE,
  ErrorType.DEADLINE_EXCEEDED,
  // gRPC ABORTED. The server's commit timeout of a batch append comes as a DeadlineExceededError
  // (see isServerCommitTimeout); either way the append may be retried with the same ids.
  ErrorType.TIMEOUT,
  ErrorType.NOT_LEADER, // the client reconnects to the leader on the next call
  ErrorType.CANCELLED, // the server cancelled the call (shutting down, leader change); the client reconnects
]);
/**
 * What the server says when it cannot take a request for now (its NotHandled reasons). Through a
 * unary or streaming call they come as gRPC UNAVAILABLE (or UNKNOWN for the missing leader); a
 * batch append carries them in-band, and the client turns them into an UnknownError
 * "Could not recognize <message>".
 */
const SERVER_NOT_READY_MESSAGES: ReadonlySet<string> = new Set([
  'Server Is Not Ready',
  'Server Is Busy',
  'Server Is Too Busy',
  'No leader info available in response',
]);
/** RESOURCE_EXHAUSTED for a message over the size limit: retrying the same call cannot help. */
const MESSAGE_TOO_LARGE = /larger than|exceeds the maximum/i;
/**
 * Errors after which the client resets its channel and the server features it keeps: its
 * `shouldReconnect` says so for UnavailableError, CancelledError and NotLeaderError (gRPC
 * UNAVAILABLE and CANCELLED; CANCELLED is also what our own cancellations end with).
 */
const CLIENT_RECOVERS_TYPES: ReadonlySet<unknown> = new Set([ErrorType.UNAVAILABLE, ErrorType.CANCELLED, ErrorType.NOT_LEADER]);
const CLIENT_RECOVERS_CODES: ReadonlySet<unknown> = new Set([GRPC_CANCELLED, GRPC_UNAVAILABLE]);
/** The server's own answer to the request: the client reached it, whatever became of the call. */
const SERVER_ANSWER_TYPES: ReadonlySet<unknown> = new Set([
  ErrorType.WRONG_EXPECTED_VERSION,
  ErrorType.TIMEOUT,
  ErrorType.STREAM_NOT_FOUND,
  ErrorType.NO_STREAM,
  ErrorType.NOT_FOUND,
  ErrorType.ACCESS_DENIED,
  ErrorType.INVALID_ARGUMENT,
  ErrorType.INVALID_TRANSACTION,
  ErrorType.STREAM_DELETED,
  ErrorType.MAXIMUM_APPEND_SIZE_EXCEEDED,
  ErrorType.MISSING_REQUIRED_METADATA_PROPERTY,
]);

/** Where a dropped `$all` subscription says that it resubscribes (pino's logger fits). */
export type AdapterLogger = Pick<Logger, 'warn'>;

export interface EventStoreDbOptions {
  /** Where the adapter warns of a subscription it resubscribes and a client it replaces. */
  readonly logger?: AdapterLogger | undefined;
  /**
   * How long a request of the client (an append, a read, a page of one) may go unanswered before it
   * fails as unavailable, counting toward the replacement of a stuck client. 10 s when not given.
   */
  readonly callDeadlineMs?: number | undefined;
  /**
   * How long a `$all` subscription waits for the server's next event before it reads the store's
   * head: a head past the last event it delivered means the subscription went silent with events
   * to deliver (a stream a server or a proxy keeps open without sending), and it starts again from
   * that event. 30 s when not given.
   */
  readonly subscriptionIdleMs?: number | undefined;
}

export function toClientExpectedRevision(expected: ExpectedRevision): AppendExpectedRevision {
  switch (expected) {
    case 'no_stream':
      return NO_STREAM;
    case 'stream_exists':
      return STREAM_EXISTS;
    case 'any':
      return ANY;
    default:
      return BigInt(expected);
  }
}

/** An expectation the client can put on the wire: a named one, or a revision (a whole number from 0). */
function clientCanSend(expected: ExpectedRevision): boolean {
  return typeof expected !== 'number' || (Number.isSafeInteger(expected) && expected >= 0);
}

export function toActualRevision(actual: CurrentRevision): number | 'no_stream' {
  // Some server paths report a missing stream as -1 rather than as 'no_stream'.
  return actual === NO_STREAM || actual < 0n ? 'no_stream' : Number(actual);
}

export function fromClientPosition(position: ClientPosition): Position {
  return { commit: Number(position.commit), prepare: Number(position.prepare) };
}

/**
 * The client always gives an event a position, but servers before 22.6 answer a stream read with
 * 2^64 - 1 in place of the event's place in `$all` (as do events of explicit transactions), which
 * is no place at all and no safe number: such an event is read as having none (START).
 */
function isKnownPosition(position: ClientPosition): boolean {
  return position.commit <= MAX_POSITION && position.prepare <= MAX_POSITION;
}

const MAX_POSITION = BigInt(Number.MAX_SAFE_INTEGER);

export function toClientReadPosition(position: Position): ReadPosition {
  return comparePositions(position, START) <= 0 ? CLIENT_START : { commit: BigInt(position.commit), prepare: BigInt(position.prepare) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isWrongExpectedVersion(error: unknown): error is { actualVersion: CurrentRevision } {
  return isObject(error) && error.type === ErrorType.WRONG_EXPECTED_VERSION && 'actualVersion' in error;
}

/**
 * The server's in-band answer to a batch append it could not commit (or prepare, or forward) in
 * time: the client's `unpackToCommandError` makes it `new DeadlineExceededError()`, from nothing,
 * so it has no gRPC code and no raw error under it. A call that ran past its gRPC deadline is a
 * DeadlineExceededError made from the gRPC error (`convertToCommandError`), with code 4. The
 * server was reached and answered, so this is neither a stuck client nor "unreachable".
 */
function isServerCommitTimeout(error: unknown): boolean {
  return isObject(error) && error.type === ErrorType.DEADLINE_EXCEEDED && error.code === undefined && error._raw === undefined;
}

/** What a request the adapter gave up on fails with, under EventStoreUnavailableError: no answer by its deadline. */
class NoAnswerError extends Error {
  override readonly name = 'NoAnswerError';
}

/** The server's own text of a client error: without the client's or gRPC's prefix. */
function serverMessage(message: string): string {
  return message.replace(/^Could not recognize /, '').replace(/^\d+ [A-Z_]+: /, '');
}

/**
 * Whether a client error means "not now" rather than "never": the server is down, unreachable,
 * starting, busy, electing a leader, or cancelled the call. Such errors become
 * EventStoreUnavailableError (a 503 with Retry-After); anything else (access denied, a bad
 * request, an invalid position) is a fault that a retry would only repeat.
 */
export function isUnavailable(error: unknown): boolean {
  if (!isObject(error)) return false;
  if (RETRYABLE_TYPES.has(error.type)) return true;
  const message = typeof error.message === 'string' ? error.message : '';
  if (RETRYABLE_CODES.has(error.code)) return !(error.code === GRPC_RESOURCE_EXHAUSTED && MESSAGE_TOO_LARGE.test(message));
  if (error.type === ErrorType.UNKNOWN && SERVER_NOT_READY_MESSAGES.has(serverMessage(message))) return true;
  // Cluster discovery gives up with a plain Error.
  return message.startsWith('Failed to discover');
}

/**
 * Whether a call's error may come from a client stuck for good (see eventstoredb-renewal.ts), so
 * that it counts toward replacing the client: not a revision conflict or another answer of the
 * server (its commit timeout too), not an error the client reconnects on by itself, not one of our
 * own (closed, not JSON). What is left: DEADLINE_EXCEEDED of a call, a request with no answer by
 * the adapter's deadline, INTERNAL, UNKNOWN (but a server not ready or busy), a channel shut down,
 * a cluster discovery that gave up.
 */
export function countsTowardRenewal(error: unknown): boolean {
  if (error instanceof WrongExpectedRevisionError) return false;
  const cause = error instanceof EventStoreUnavailableError ? error.cause : error;
  if (!isObject(cause)) return false;
  const message = typeof cause.message === 'string' ? cause.message : '';
  if (CLIENT_RECOVERS_TYPES.has(cause.type) || CLIENT_RECOVERS_CODES.has(cause.code) || SERVER_ANSWER_TYPES.has(cause.type)) return false;
  if (isServerCommitTimeout(cause)) return false;
  if (cause.type === ErrorType.UNKNOWN && SERVER_NOT_READY_MESSAGES.has(serverMessage(message))) return false;
  return !(cause.code === GRPC_RESOURCE_EXHAUSTED && MESSAGE_TOO_LARGE.test(message));
}

/** What a log may say of an error: its class, type and gRPC code, never its text (the server's, or a URL with a password). */
function errorKind(error: unknown): Record<string, unknown> {
  const cause = error instanceof EventStoreUnavailableError && error.cause !== undefined ? error.cause : error;
  if (!isObject(cause)) return { name: typeof cause };
  const kind: Record<string, unknown> = { name: cause.constructor?.name ?? 'Object' };
  if (typeof cause.type === 'string') kind.type = cause.type;
  if (typeof cause.code === 'number' || typeof cause.code === 'string') kind.code = cause.code;
  return kind;
}

/** Our error for a client error: revision conflicts and outages become port errors, the rest pass through. */
export function translateError(error: unknown, streamId?: string, expected?: ExpectedRevision): unknown {
  if (streamId !== undefined && expected !== undefined && isWrongExpectedVersion(error)) {
    return new WrongExpectedRevisionError(streamId, expected, toActualRevision(error.actualVersion));
  }
  if (isServerCommitTimeout(error)) {
    return new EventStoreUnavailableError('EventStoreDB: the server timed out committing the append, which may have been written', { cause: error, mayLandLater: true });
  }
  if (isUnavailable(error)) {
    const message = error instanceof Error && error.message ? error.message : 'unreachable';
    // An append cut off on its way (a channel lost, a call past its deadline, cancelled) may have
    // reached the server, which may still write it: only a server's refusal says it never will.
    return new EventStoreUnavailableError(`EventStoreDB: ${message}`, { cause: error, mayLandLater: streamId !== undefined && !refusedUnwritten(error) });
  }
  return error;
}

/** A server's answer that it did not take the append: a follower's, or one not ready or too busy for it. */
function refusedUnwritten(error: unknown): boolean {
  if (!isObject(error)) return false;
  if (error.type === ErrorType.NOT_LEADER || error.code === GRPC_RESOURCE_EXHAUSTED) return true;
  return SERVER_NOT_READY_MESSAGES.has(serverMessage(typeof error.message === 'string' ? error.message : ''));
}

const utf8 = new TextEncoder();

/**
 * The events as the client sends them, serialised here so that a value JSON cannot hold fails this
 * append with a clear error instead of the client's promise executor. The client stringifies JSON
 * data itself, so it gets the parsed copy of our text (which always serialises, to the same text);
 * metadata goes as bytes, which the client passes through when their constructor is Uint8Array.
 */
function toProposedEvents(streamId: string, events: readonly EventData[]): ClientEventData[] {
  return events.map(({ id, type, data, metadata }) => {
    let dataText: string | undefined;
    let metadataText: string | undefined;
    try {
      dataText = JSON.stringify(data);
      metadataText = metadata === undefined ? undefined : JSON.stringify(metadata);
    } catch (error) {
      throw notJsonError(streamId, type, error);
    }
    if (dataText === undefined || (metadata !== undefined && metadataText === undefined)) throw notJsonError(streamId, type);
    return jsonEvent({
      id: id ?? newEventId(),
      type,
      data: JSON.parse(dataText) as JSONType,
      metadata: metadataText === undefined ? undefined : utf8.encode(metadataText),
    });
  });
}

function toMetadata(metadata: unknown): EventMetadata {
  return isObject(metadata) && !Array.isArray(metadata) && !(metadata instanceof Uint8Array) ? (metadata as EventMetadata) : {};
}

export function toRecordedEvent(event: ClientRecordedEvent): RecordedEvent {
  return {
    id: event.id,
    streamId: event.streamId,
    revision: Number(event.revision),
    position: event.position && isKnownPosition(event.position) ? fromClientPosition(event.position) : START,
    type: event.type,
    data: event.data,
    metadata: toMetadata(event.metadata),
    created: event.created.getTime(),
  };
}

/** What `$all` readers get: the application's own JSON events, no system events or links. */
export function isUserEvent(resolved: AllStreamResolvedEvent): boolean {
  const event = resolved.event;
  return !!event && !resolved.link && event.isJson && !event.type.startsWith('$') && !event.streamId.startsWith('$');
}

async function collect<T>(source: AsyncIterable<T>): Promise<T[]> {
  const items: T[] = [];
  for await (const item of source) items.push(item);
  return items;
}

/**
 * Everything a read of the client yields, held to the deadline: a read past it is cancelled in the
 * client (its gRPC call) and destroyed here, so that its iteration ends too.
 */
function readWithin<T>(ask: Ask, read: AsyncIterable<T>): Promise<T[]> {
  return ask(collect(read), () => {
    const streaming = read as Partial<Pick<StreamingRead<T>, 'cancel' | 'destroy'>>;
    if (typeof streaming.cancel === 'function') streaming.cancel().catch(() => {});
    if (typeof streaming.destroy === 'function') streaming.destroy();
  });
}

/** The embedded store's answer to a call after close, so both adapters refuse it the same way. */
function closedError(cause?: unknown): EventStoreUnavailableError {
  return new EventStoreUnavailableError('the event store is closed', cause === undefined ? undefined : { cause });
}

export class EventStoreDbEventStore implements EventStore {
  readonly #clients: RenewableClient;
  readonly #logger: AdapterLogger | undefined;
  readonly #subscriptionIdleMs: number;
  readonly #subscriptions = new Set<EventStoreDbSubscription>();
  /** No new call is accepted. */
  #closed = false;
  #closing: Promise<void> | undefined;

  /**
   * Takes the client it will dispose of on close, or a function that makes one: with a function, a
   * client that keeps failing in a way it does not recover from is replaced by a new one (see
   * eventstoredb-renewal.ts). `connect` is the usual way in.
   */
  constructor(client: EventStoreDBClient | (() => EventStoreDBClient), options: EventStoreDbOptions = {}) {
    this.#logger = options.logger;
    this.#subscriptionIdleMs = options.subscriptionIdleMs ?? DEFAULT_SUBSCRIPTION_IDLE_MS;
    // Zero would read the head on every turn of the event loop.
    if (!(this.#subscriptionIdleMs > 0)) throw new RangeError(`subscriptionIdleMs must be positive, not ${this.#subscriptionIdleMs}`);
    const deadlineMs = options.callDeadlineMs ?? CALL_DEADLINE_MS;
    if (!(deadlineMs > 0)) throw new RangeError(`callDeadlineMs must be positive, not ${deadlineMs}`);
    const seconds = `${deadlineMs / 1000} s`;
    this.#clients = new RenewableClient(
      client,
      {
        counts: countsTowardRenewal,
        renewed: (renewal) => this.#renewed(renewal),
        unanswered: (kind) =>
          kind === 'append'
            ? new EventStoreUnavailableError('EventStoreDB: the client was replaced before the server answered the append, which may have been written', { mayLandLater: true })
            : new EventStoreUnavailableError('EventStoreDB: the client was replaced before the server answered the read'),
        expired: (kind) => {
          const cause = new NoAnswerError(`no answer within ${seconds}`);
          return kind === 'append'
            ? new EventStoreUnavailableError(`EventStoreDB: no answer to the append within ${seconds}; it may have been written`, { cause, mayLandLater: true })
            : new EventStoreUnavailableError(`EventStoreDB: no answer within ${seconds}`, { cause });
        },
      },
      deadlineMs,
    );
  }

  static async connect(connectionString: string, options: EventStoreDbOptions = {}): Promise<EventStoreDbEventStore> {
    return new EventStoreDbEventStore(() => EventStoreDBClient.connectionString(connectionString), options);
  }

  async append(streamId: string, events: readonly EventData[], options: AppendOptions = {}): Promise<AppendResult> {
    if (this.#closed) throw closedError();
    const expected = options.expectedRevision ?? 'any';
    const proposed = toProposedEvents(streamId, events);
    // The server answers an empty append with revision 0 for a stream that does not exist; the
    // port's answer (the embedded store's) is the stream's revision as it is, -1 when missing.
    // An expected revision no stream can be at (negative, fractional) is checked the same way, so
    // that it fails as a wrong revision, as in the embedded store, and is never sent (see above).
    if (proposed.length === 0 || !clientCanSend(expected)) return this.#call((client, ask) => this.#appendNothing(client, ask, streamId, expected));
    return this.#clients.run('append', ({ client }, ask) => this.#appendEvents(client, ask, streamId, proposed, expected));
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    if (this.#closed) throw closedError();
    if (options.maxCount !== undefined && options.maxCount <= 0) return [];
    return this.#call(async (client, ask) => {
      try {
        const read = client.readStream(streamId, {
          direction: FORWARDS,
          fromRevision: options.fromRevision === undefined ? CLIENT_START : BigInt(options.fromRevision),
          maxCount: options.maxCount,
        });
        const events: RecordedEvent[] = [];
        for (const resolved of await readWithin(ask, read)) if (resolved.event) events.push(toRecordedEvent(resolved.event));
        return events;
      } catch (error) {
        if (isObject(error) && error.type === ErrorType.STREAM_NOT_FOUND) return [];
        throw error;
      }
    });
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    if (this.#closed) throw closedError();
    const limit = options.maxCount ?? Infinity;
    if (limit <= 0) return [];
    return this.#call(async (client, ask) => {
      // One more than wanted, because the first event of a page may be the one we start after.
      const pageSize = Math.max(2, Math.min(READ_PAGE, limit + 1));
      const events: RecordedEvent[] = [];
      let after = options.fromPosition ?? START;
      for (;;) {
        const page = await readAllPage(client, ask, { direction: FORWARDS, fromPosition: toClientReadPosition(after), maxCount: pageSize });
        const pageStart = after;
        for (const resolved of page) {
          if (!resolved.event) continue;
          const position = fromClientPosition(resolved.event.position);
          if (comparePositions(position, pageStart) <= 0) continue;
          after = position;
          if (!isUserEvent(resolved)) continue;
          events.push(toRecordedEvent(resolved.event));
          if (events.length >= limit) return events;
        }
        // System events are filtered here, not on the server, so a short page (not a short result) marks the end.
        if (page.length < pageSize || comparePositions(after, pageStart) <= 0) return events;
      }
    });
  }

  subscribeToAll(options: SubscribeOptions = {}): AllSubscription {
    const subscription = new EventStoreDbSubscription(options.fromPosition ?? START, {
      client: () => this.#clients.client,
      closed: () => this.#closed,
      logger: this.#logger,
      onEnd: () => this.#subscriptions.delete(subscription),
      idleMs: this.#subscriptionIdleMs,
      // Held to the deadline and counted as any read: a head read that never answers would stop the watchdog.
      head: () => this.headPosition(),
    });
    if (!this.#closed) this.#subscriptions.add(subscription);
    return subscription;
  }

  async headPosition(): Promise<Position> {
    if (this.#closed) throw closedError();
    return this.#call((client, ask) => this.#head(client, ask));
  }

  /**
   * Like the embedded store: ends the subscriptions, refuses new calls, lets the appends already
   * sent finish (for 10 s at most), then disposes of the client, which cuts the reads still running
   * short (they fail). An append still unanswered then fails as unavailable: it may have been written.
   */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.unsubscribe()));
    const unanswered = new EventStoreUnavailableError('the event store closed before EventStoreDB answered the append, which may have been written', { mayLandLater: true });
    await this.#clients.close(CLOSE_APPENDS_WAIT_MS, (kind: CallKind) => (kind === 'append' ? unanswered : closedError()));
  }

  /** One warning, naming the error's kind only; the subscriptions move to the new client. */
  #renewed({ kind, failures, seconds, cause }: Renewal): void {
    const calls = kind === 'append' ? 'appends' : 'reads';
    this.#logger?.warn(
      { calls, failures, seconds, error: errorKind(cause) },
      `EventStoreDB client replaced: its ${calls} kept failing with an error it does not recover from by itself`,
    );
    for (const subscription of this.#subscriptions) subscription.clientReplaced();
  }

  /**
   * Runs a read of the client, translating its errors. A read the disposal of its client cut short
   * ends in the client as if it were complete, so anything still running when disposal began fails
   * instead of returning part of an answer: as closed once the store is, else as unavailable.
   */
  #call<T>(run: (client: EventStoreDBClient, ask: Ask) => Promise<T>): Promise<T> {
    return this.#clients.run('read', async (inUse: ClientInUse, ask: Ask) => {
      let result: T;
      try {
        result = await run(inUse.client, ask);
      } catch (error) {
        if (inUse.disposing) throw this.#cutShort(error);
        throw translateError(error);
      }
      if (inUse.disposing) throw this.#cutShort();
      return result;
    });
  }

  #cutShort(cause?: unknown): EventStoreUnavailableError {
    if (this.#closed) return closedError(cause);
    return new EventStoreUnavailableError('EventStoreDB: the client was replaced while the read ran', cause === undefined ? undefined : { cause });
  }

  async #appendEvents(client: EventStoreDBClient, ask: Ask, streamId: string, proposed: ClientEventData[], expected: ExpectedRevision): Promise<AppendResult> {
    try {
      // The deadline covers the server-features fetch the client waits on first. Nothing cancels
      // the append in the client: its batch-append stream carries every append in flight.
      const result = await ask(client.appendToStream(streamId, proposed, { expectedRevision: toClientExpectedRevision(expected) }));
      // A connection string may set throwOnAppendFailure=false: the client then answers a failed
      // revision check as a result, not an error, and it must not pass for an append.
      if (result.success === false) throw new WrongExpectedRevisionError(streamId, expected, await this.#lastRevision(client, ask, streamId));
      return {
        nextExpectedRevision: Number(result.nextExpectedRevision),
        // Part of the append: close waits for it, so the head read is not cut short.
        position: result.position ? fromClientPosition(result.position) : await this.#head(client, ask),
      };
    } catch (error) {
      throw translateError(error, streamId, expected);
    }
  }

  async #appendNothing(client: EventStoreDBClient, ask: Ask, streamId: string, expected: ExpectedRevision): Promise<AppendResult> {
    const actual = await this.#lastRevision(client, ask, streamId);
    if (!expectedRevisionMatches(expected, actual)) throw new WrongExpectedRevisionError(streamId, expected, actual);
    return { nextExpectedRevision: actual === 'no_stream' ? -1 : actual, position: await this.#head(client, ask) };
  }

  /** The stream's last revision, from one event read backwards. */
  async #lastRevision(client: EventStoreDBClient, ask: Ask, streamId: string): Promise<number | 'no_stream'> {
    try {
      const read = client.readStream(streamId, { direction: BACKWARDS, fromRevision: END, maxCount: 1 });
      for (const resolved of await readWithin(ask, read)) {
        if (resolved.event) return Number(resolved.event.revision);
      }
      return 'no_stream';
    } catch (error) {
      if (isObject(error) && error.type === ErrorType.STREAM_NOT_FOUND) return 'no_stream';
      throw error;
    }
  }

  async #head(client: EventStoreDBClient, ask: Ask): Promise<Position> {
    let from: ReadPosition = END;
    let before: Position | undefined;
    // The tail of `$all` can be system events (stats, scavenges); walk back to the last one readers see.
    for (;;) {
      const page = await readAllPage(client, ask, { direction: BACKWARDS, fromPosition: from, maxCount: HEAD_PAGE });
      let oldest = before;
      for (const resolved of page) {
        if (!resolved.event) continue;
        const position = fromClientPosition(resolved.event.position);
        // Whether a backwards read repeats the event it starts at is not documented; skip it if so.
        if (before && comparePositions(position, before) >= 0) continue;
        if (isUserEvent(resolved)) return position;
        oldest = position;
      }
      if (page.length < HEAD_PAGE || !oldest || (before && comparePositions(oldest, before) >= 0)) return START;
      before = oldest;
      from = toClientReadPosition(oldest);
    }
  }
}

function readAllPage(client: EventStoreDBClient, ask: Ask, options: ClientReadAllOptions): Promise<AllStreamResolvedEvent[]> {
  return readWithin(ask, client.readAll(options));
}

interface SubscriptionContext {
  /** The store's client of the moment: each client subscription starts on it. */
  readonly client: () => EventStoreDBClient;
  /** Whether the store is closed: a subscription started after that fails as the embedded one does. */
  readonly closed: () => boolean;
  readonly logger: AdapterLogger | undefined;
  readonly onEnd: () => void;
  /** How long the server may be silent before the store's head is compared with the last event delivered. */
  readonly idleMs: number;
  /** The position of the store's last event a subscription delivers. */
  readonly head: () => Promise<Position>;
}

/**
 * One logical subscription over a series of client subscriptions: when one drops because the
 * server is unavailable, the next starts after the last event seen, so nothing is skipped, and
 * anything at or before it is dropped, so nothing is delivered twice. Any other failure (access
 * denied, an invalid position, a bad request) ends the iteration with that error, as the embedded
 * subscription does, so the projection runner reports it. A client subscription that stays open
 * but sends nothing while the store has later events is cancelled by a watchdog, and the next
 * starts the same way, as does one on a client the store replaced (at once, without a warning: the
 * store warns of the replacement). Single consumer.
 */
class EventStoreDbSubscription implements AllSubscription {
  readonly #context: SubscriptionContext;
  #after: Position;
  #current: AllStreamSubscription | undefined;
  /** The client `#current` runs on. */
  #currentOn: EventStoreDBClient | undefined;
  /** The client subscription was cancelled because the store replaced its client: the next starts at once. */
  #moving = false;
  #stopped = false;
  #iterating = false;
  #wake: (() => void) | undefined;
  /** Since when the subscription has waited for the server: its last event, or the consumer asking for the next. */
  #waitingSince = Date.now();
  /** The consumer has an event in hand: a silence meanwhile is its own, not the server's. */
  #consumerBusy = false;
  #watchdog: NodeJS.Timeout | undefined;
  /** The store's head when the watchdog cancelled the client subscription, for the warning. */
  #silentBehind: Position | undefined;

  constructor(fromPosition: Position, context: SubscriptionContext) {
    this.#after = fromPosition;
    this.#context = context;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<RecordedEvent, void, undefined> {
    if (this.#iterating) throw new Error('An AllSubscription can be iterated only once');
    this.#iterating = true;
    let backoff = MIN_BACKOFF_MS;
    try {
      this.#watchFor(this.#context.idleMs);
      while (!this.#stopped) {
        if (this.#context.closed()) throw closedError();
        let current: AllStreamSubscription | undefined;
        let failure: { error: unknown } | undefined;
        try {
          const client = this.#context.client();
          current = client.subscribeToAll({ fromPosition: toClientReadPosition(this.#after), filter: excludeSystemEvents() });
          this.#current = current;
          this.#currentOn = client;
          this.#waitingSince = Date.now();
          for await (const resolved of current) {
            this.#waitingSince = Date.now();
            // The consumer may unsubscribe from inside its loop while events are still buffered.
            if (this.#stopped) break;
            if (!resolved.event) continue;
            const position = fromClientPosition(resolved.event.position);
            if (comparePositions(position, this.#after) <= 0) continue;
            // Advance past filtered events too, so a resubscription does not read them again.
            this.#after = position;
            backoff = MIN_BACKOFF_MS;
            if (!isUserEvent(resolved)) continue;
            this.#consumerBusy = true;
            yield toRecordedEvent(resolved.event);
            this.#consumerBusy = false;
            this.#waitingSince = Date.now();
          }
        } catch (error) {
          failure = { error };
        } finally {
          this.#current = undefined;
          this.#currentOn = undefined;
          // Leaving the loop does not cancel the gRPC call; only unsubscribe does.
          await current?.unsubscribe().catch(() => {});
        }
        if (this.#stopped) break;
        if (this.#moving) {
          // Cancelled by us, on the old client: however it ended, the next starts on the new one.
          this.#moving = false;
          continue;
        }
        if (failure && !isUnavailable(failure.error)) throw translateError(failure.error);
        this.#warnResubscribing(failure, backoff);
        await this.#sleep(backoff);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    } finally {
      // Also reached when the consumer breaks out of its loop: that ends the subscription for good.
      this.#stopped = true;
      clearTimeout(this.#watchdog);
      this.#context.onEnd();
    }
  }

  async unsubscribe(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#watchdog);
    this.#wake?.();
    await this.#current?.unsubscribe().catch(() => {});
    if (!this.#iterating) this.#context.onEnd();
  }

  /** The store replaced its client: a client subscription on the old one is cancelled, and the next starts on the new one. */
  clientReplaced(): void {
    if (this.#stopped) return;
    const current = this.#current;
    if (current && this.#currentOn !== this.#context.client()) {
      this.#moving = true;
      void current.unsubscribe().catch(() => {});
    }
    // Between client subscriptions, waiting to resubscribe: the new client is worth a try now.
    else if (!current) this.#wake?.();
  }

  /** Dropped (server restart, network), ended by the server, or silent: it resubscribes after the last event seen. */
  #warnResubscribing(failure: { error: unknown } | undefined, backoff: number): void {
    const head = this.#silentBehind;
    this.#silentBehind = undefined;
    const details = { err: failure?.error, after: this.#after, retryInMs: backoff };
    if (failure) this.#context.logger?.warn(details, 'EventStoreDB $all subscription dropped; resubscribing');
    else if (head) this.#context.logger?.warn({ ...details, head }, 'EventStoreDB $all subscription silent while the store has later events; resubscribing');
    else this.#context.logger?.warn(details, 'EventStoreDB $all subscription ended by the server; resubscribing');
  }

  /** The watchdog's next look, in `ms`; its timer never keeps the process alive. */
  #watchFor(ms: number): void {
    if (this.#stopped) return;
    this.#watchdog = setTimeout(() => void this.#watch(), ms);
    this.#watchdog.unref();
  }

  async #watch(): Promise<void> {
    const idleMs = this.#context.idleMs;
    const quietFor = Date.now() - this.#waitingSince;
    if (this.#consumerBusy) return this.#watchFor(idleMs);
    if (quietFor < idleMs) return this.#watchFor(idleMs - quietFor);
    await this.#cancelIfBehind();
    this.#watchFor(idleMs);
  }

  /** Cancels the client subscription when the store holds an event past the last it delivered, which the loop then reads again. */
  async #cancelIfBehind(): Promise<void> {
    const current = this.#current;
    if (!current) return;
    let head: Position;
    try {
      head = await this.#context.head();
    } catch {
      // A store that cannot be read: the subscription's own call fails too if it is down, and the next look tries again.
      return;
    }
    // Heard from meanwhile, or already ended: nothing to cancel.
    if (current !== this.#current || this.#consumerBusy || Date.now() - this.#waitingSince < this.#context.idleMs) return;
    if (comparePositions(head, this.#after) <= 0) return;
    this.#silentBehind = head;
    await current.unsubscribe().catch(() => {});
  }

  #sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.#wake = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#wake = done;
    });
  }
}

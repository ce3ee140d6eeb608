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
  type JSONType,
  type Position as ClientPosition,
  type ReadAllOptions as ClientReadAllOptions,
  type ReadPosition,
  type RecordedEvent as ClientRecordedEvent,
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
} from './port.js';

const READ_PAGE = 500;
const HEAD_PAGE = 100;
const MIN_BACKOFF_MS = 100;
const MAX_BACKOFF_MS = 5000;
// gRPC status codes; @grpc/grpc-js is only a transitive dependency, so it is not imported.
const GRPC_DEADLINE_EXCEEDED = 4;
const GRPC_UNAVAILABLE = 14;
const RETRYABLE_TYPES: ReadonlySet<unknown> = new Set([
  ErrorType.UNAVAILABLE,
  ErrorType.DEADLINE_EXCEEDED,
  ErrorType.TIMEOUT, // the server's own commit/prepare timeout: the append may be retried with the same ids
  ErrorType.NOT_LEADER, // the client reconnects to the leader on the next call
]);

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

export function toActualRevision(actual: CurrentRevision): number | 'no_stream' {
  // Some server paths report a missing stream as -1 rather than as 'no_stream'.
  return actual === NO_STREAM || actual < 0n ? 'no_stream' : Number(actual);
}

export function fromClientPosition(position: ClientPosition): Position {
  return { commit: Number(position.commit), prepare: Number(position.prepare) };
}

export function toClientReadPosition(position: Position): ReadPosition {
  return comparePositions(position, START) <= 0 ? CLIENT_START : { commit: BigInt(position.commit), prepare: BigInt(position.prepare) };
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

function isWrongExpectedVersion(error: unknown): error is { actualVersion: CurrentRevision } {
  return isObject(error) && error.type === ErrorType.WRONG_EXPECTED_VERSION && 'actualVersion' in error;
}

export function isUnavailable(error: unknown): boolean {
  if (!isObject(error)) return false;
  if (RETRYABLE_TYPES.has(error.type)) return true;
  if (error.code === GRPC_UNAVAILABLE || error.code === GRPC_DEADLINE_EXCEEDED) return true;
  // Cluster discovery gives up with a plain Error.
  return typeof error.message === 'string' && error.message.startsWith('Failed to discover');
}

/** Our error for a client error: revision conflicts and outages become port errors, the rest pass through. */
export function translateError(error: unknown, streamId?: string, expected?: ExpectedRevision): unknown {
  if (streamId !== undefined && expected !== undefined && isWrongExpectedVersion(error)) {
    return new WrongExpectedRevisionError(streamId, expected, toActualRevision(error.actualVersion));
  }
  if (isUnavailable(error)) {
    const message = error instanceof Error && error.message ? error.message : 'unreachable';
    return new EventStoreUnavailableError(`EventStoreDB: ${message}`, { cause: error });
  }
  return error;
}

function toMetadata(metadata: unknown): EventMetadata {
  return isObject(metadata) && !Array.isArray(metadata) && !(metadata instanceof Uint8Array) ? (metadata as EventMetadata) : {};
}

export function toRecordedEvent(event: ClientRecordedEvent): RecordedEvent {
  return {
    id: event.id,
    streamId: event.streamId,
    revision: Number(event.revision),
    // Servers before 22.6 send no position on stream reads; 24.x always does.
    position: event.position ? fromClientPosition(event.position) : START,
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

export class EventStoreDbEventStore implements EventStore {
  readonly #client: EventStoreDBClient;
  readonly #subscriptions = new Set<EventStoreDbSubscription>();
  #closed = false;

  /** Takes the client it will dispose of on close; `connect` is the usual way in. */
  constructor(client: EventStoreDBClient) {
    this.#client = client;
  }

  static async connect(connectionString: string): Promise<EventStoreDbEventStore> {
    return new EventStoreDbEventStore(EventStoreDBClient.connectionString(connectionString));
  }

  async append(streamId: string, events: readonly EventData[], options: AppendOptions = {}): Promise<AppendResult> {
    const expected = options.expectedRevision ?? 'any';
    const proposed = events.map(({ id, type, data, metadata }) =>
      jsonEvent({ id: id ?? newEventId(), type, data: data as JSONType, metadata }),
    );
    try {
      const result = await this.#client.appendToStream(streamId, proposed, { expectedRevision: toClientExpectedRevision(expected) });
      return {
        nextExpectedRevision: Number(result.nextExpectedRevision),
        position: result.position ? fromClientPosition(result.position) : await this.headPosition(),
      };
    } catch (error) {
      throw translateError(error, streamId, expected);
    }
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    if (options.maxCount !== undefined && options.maxCount <= 0) return [];
    try {
      const read = this.#client.readStream(streamId, {
        direction: FORWARDS,
        fromRevision: options.fromRevision === undefined ? CLIENT_START : BigInt(options.fromRevision),
        maxCount: options.maxCount,
      });
      const events: RecordedEvent[] = [];
      for await (const resolved of read) if (resolved.event) events.push(toRecordedEvent(resolved.event));
      return events;
    } catch (error) {
      if (isObject(error) && error.type === ErrorType.STREAM_NOT_FOUND) return [];
      throw translateError(error);
    }
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    const limit = options.maxCount ?? Infinity;
    if (limit <= 0) return [];
    // One more than wanted, because the first event of a page may be the one we start after.
    const pageSize = Math.max(2, Math.min(READ_PAGE, limit + 1));
    const events: RecordedEvent[] = [];
    let after = options.fromPosition ?? START;
    try {
      for (;;) {
        const page = await this.#readAllPage({ direction: FORWARDS, fromPosition: toClientReadPosition(after), maxCount: pageSize });
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
    } catch (error) {
      throw translateError(error);
    }
  }

  subscribeToAll(options: SubscribeOptions = {}): AllSubscription {
    const subscription = new EventStoreDbSubscription(this.#client, options.fromPosition ?? START, () =>
      this.#subscriptions.delete(subscription),
    );
    if (this.#closed) void subscription.unsubscribe();
    else this.#subscriptions.add(subscription);
    return subscription;
  }

  async headPosition(): Promise<Position> {
    let from: ReadPosition = END;
    let before: Position | undefined;
    try {
      // The tail of `$all` can be system events (stats, scavenges); walk back to the last one readers see.
      for (;;) {
        const page = await this.#readAllPage({ direction: BACKWARDS, fromPosition: from, maxCount: HEAD_PAGE });
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
    } catch (error) {
      throw translateError(error);
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Promise.all([...this.#subscriptions].map((subscription) => subscription.unsubscribe()));
    await this.#client.dispose();
  }

  #readAllPage(options: ClientReadAllOptions): Promise<AllStreamResolvedEvent[]> {
    return collect(this.#client.readAll(options));
  }
}

/**
 * One logical subscription over a series of client subscriptions: when one drops, the next starts
 * after the last event seen, so nothing is skipped, and anything at or before it is dropped, so
 * nothing is delivered twice. Single consumer.
 */
class EventStoreDbSubscription implements AllSubscription {
  readonly #client: EventStoreDBClient;
  readonly #onEnd: () => void;
  #after: Position;
  #current: AllStreamSubscription | undefined;
  #stopped = false;
  #iterating = false;
  #wake: (() => void) | undefined;

  constructor(client: EventStoreDBClient, fromPosition: Position, onEnd: () => void) {
    this.#client = client;
    this.#after = fromPosition;
    this.#onEnd = onEnd;
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<RecordedEvent, void, undefined> {
    if (this.#iterating) throw new Error('An AllSubscription can be iterated only once');
    this.#iterating = true;
    let backoff = MIN_BACKOFF_MS;
    try {
      while (!this.#stopped) {
        let current: AllStreamSubscription | undefined;
        try {
          current = this.#client.subscribeToAll({ fromPosition: toClientReadPosition(this.#after), filter: excludeSystemEvents() });
          this.#current = current;
          for await (const resolved of current) {
            // The consumer may unsubscribe from inside its loop while events are still buffered.
            if (this.#stopped) break;
            if (!resolved.event) continue;
            const position = fromClientPosition(resolved.event.position);
            if (comparePositions(position, this.#after) <= 0) continue;
            // Advance past filtered events too, so a resubscription does not read them again.
            this.#after = position;
            backoff = MIN_BACKOFF_MS;
            if (isUserEvent(resolved)) yield toRecordedEvent(resolved.event);
          }
        } catch {
          // A dropped subscription (server restart, network): resubscribed below unless we stopped.
        } finally {
          this.#current = undefined;
          // Leaving the loop does not cancel the gRPC call; only unsubscribe does.
          await current?.unsubscribe().catch(() => {});
        }
        if (this.#stopped) break;
        await this.#sleep(backoff);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
      }
    } finally {
      // Also reached when the consumer breaks out of its loop: that ends the subscription for good.
      this.#stopped = true;
      this.#onEnd();
    }
  }

  async unsubscribe(): Promise<void> {
    this.#stopped = true;
    this.#wake?.();
    await this.#current?.unsubscribe().catch(() => {});
    if (!this.#iterating) this.#onEnd();
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

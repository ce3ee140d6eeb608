import type { AllSubscription, EventData, EventStore, RecordedEvent } from '../../event-store/port.js';
import type { EventCodec, MaybePromise } from './codec.js';

// The EventStore port with the codec on both sides: appends are encoded, and every read (a stream,
// `$all`, a subscription) is decoded. The store factory wraps every store it opens in it, so the
// service, the CLI and a replay read current-layout events whatever the adapter.
//
// It is on the post path and under every replay, so it copies nothing in the usual case: an event
// already in its current layout is the same object, and a batch where nothing changed is the
// same array. Sealing (personal data) happens on append only; a batch waits for the key store only
// when the pool of new data keys ran dry. Reads never touch the key store.

/**
 * `items` with `map` applied, or `items` itself when `map` returned every item unchanged; a
 * promise only when `map` returned one.
 */
function mapSame<T>(items: readonly T[], map: (item: T) => MaybePromise<T>): MaybePromise<readonly T[]> {
  let out: Array<MaybePromise<T>> | undefined;
  let waiting = false;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const mapped = map(item);
    if (mapped instanceof Promise) waiting = true;
    if (out) out.push(mapped);
    else if (mapped !== item) {
      out = items.slice(0, i);
      out.push(mapped);
    }
  }
  if (!out) return items;
  return waiting ? Promise.all(out) : (out as T[]);
}

export interface CodedEventStoreOptions {
  /** Closed after the store: what the codec holds open (the key store). */
  readonly alsoClose?: () => Promise<void>;
}

export function codedEventStore(store: EventStore, codec: EventCodec, options: CodedEventStoreOptions = {}): EventStore {
  // The embedded store hands the same recorded objects of its recent commits to every reader (the
  // four projections, read-your-writes), so an event that needed upcasting is upcast once per
  // process, not once per reader. Entries go when the store lets the object go.
  const memo = new WeakMap<RecordedEvent, RecordedEvent>();
  const decode = (event: RecordedEvent): RecordedEvent => {
    const known = memo.get(event);
    if (known !== undefined) return known;
    const decoded = codec.decode(event.streamId, event);
    if (decoded !== event) memo.set(event, decoded);
    return decoded;
  };
  return {
    append: async (streamId, events, appendOptions) => {
      const encoded = mapSame(events, (event) => codec.encode(streamId, event));
      return store.append(streamId, encoded instanceof Promise ? await encoded : encoded, appendOptions);
    },
    readStream: async (streamId, readOptions) => mapSame(await store.readStream(streamId, readOptions), decode) as RecordedEvent[],
    readAll: async (readOptions) => (readOptions?.asStored ? store.readAll(readOptions) : (mapSame(await store.readAll(readOptions), decode) as RecordedEvent[])),
    subscribeToAll: (subscribeOptions) => decodedSubscription(store.subscribeToAll(subscribeOptions), decode),
    headPosition: () => store.headPosition(),
    close: async () => {
      try {
        await store.close();
      } finally {
        await options.alsoClose?.();
      }
    },
  };
}

/**
 * The subscription's events, decoded as they are taken. An event that cannot be decoded ends the
 * subscription (so the store stops feeding it) and reaches the consumer's `for await` as the
 * decode error, which names the event: the projection runner logs it and resubscribes.
 */
function decodedSubscription(inner: AllSubscription, decode: (event: RecordedEvent) => RecordedEvent): AllSubscription {
  return {
    unsubscribe: () => inner.unsubscribe(),
    [Symbol.asyncIterator](): AsyncIterator<RecordedEvent> {
      const events = inner[Symbol.asyncIterator]();
      const decoded = (result: IteratorResult<RecordedEvent>): IteratorResult<RecordedEvent> | Promise<IteratorResult<RecordedEvent>> => {
        if (result.done) return result;
        const fail = (error: unknown) =>
          inner.unsubscribe().then(
            () => Promise.reject(error),
            () => Promise.reject(error),
          );
        let event: RecordedEvent;
        try {
          event = decode(result.value);
        } catch (error) {
          return fail(error);
        }
        return event === result.value ? result : { done: false, value: event };
      };
      return {
        next: () => events.next().then(decoded),
        return: async (value?: unknown) => (events.return ? events.return(value) : { done: true, value: undefined }),
      };
    },
  };
}

import type { AllSubscription, EventData, EventStore, RecordedEvent } from '../../event-store/port.js';
import type { EventCodec } from './codec.js';

// The EventStore port with the codec on both sides: appends are encoded, and every read (a stream,
// `$all`, a subscription) is decoded. The store factory wraps every store it opens in it, so the
// service, the CLI and a replay read current-layout events whatever the adapter.
//
// It is on the post path and under every replay, so it copies nothing in the usual case: an event
// already in its current layout is the same object, and a batch where nothing changed is the
// same array.

/** `items` with `map` applied, or `items` itself when `map` returned every item unchanged. */
function mapSame<T>(items: readonly T[], map: (item: T) => T): readonly T[] {
  let out: T[] | undefined;
  for (let i = 0; i < items.length; i++) {
    const item = items[i]!;
    const mapped = map(item);
    if (out) out.push(mapped);
    else if (mapped !== item) {
      out = items.slice(0, i);
      out.push(mapped);
    }
  }
  return out ?? items;
}

export function codedEventStore(store: EventStore, codec: EventCodec): EventStore {
  // The embedded store hands the same recorded objects of its recent commits to every reader (the
  // four projections, read-your-writes), so an event that needed upcasting is decoded once per
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
    append: (streamId, events, options) => {
      let encoded: readonly EventData[];
      try {
        encoded = mapSame(events, (event) => codec.encode(streamId, event));
      } catch (error) {
        return Promise.reject(error);
      }
      return store.append(streamId, encoded, options);
    },
    readStream: async (streamId, options) => mapSame(await store.readStream(streamId, options), decode) as RecordedEvent[],
    readAll: async (options) => mapSame(await store.readAll(options), decode) as RecordedEvent[],
    subscribeToAll: (options) => decodedSubscription(store.subscribeToAll(options), decode),
    headPosition: () => store.headPosition(),
    close: () => store.close(),
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
        let event: RecordedEvent;
        try {
          event = decode(result.value);
        } catch (error) {
          return inner.unsubscribe().then(
            () => Promise.reject(error),
            () => Promise.reject(error),
          );
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

// Counts appends for /metrics by wrapping the EventStore port, so the adapters (and their group
// commit) stay as they are: every caller of the service's store goes through this one object.

import { type EventStore, WrongExpectedRevisionError } from '../event-store/port.js';
import { isStoreUnavailable } from '../store-unavailable.js';

/** ok: written; conflict: the expected revision did not match (normal under races); unavailable: store down. */
export type AppendResultLabel = 'ok' | 'conflict' | 'unavailable' | 'error';

/** `error`: what a failed append threw (for readiness, which names its code). */
export type AppendCounter = (result: AppendResultLabel, events: number, error?: unknown) => void;

export function countingEventStore(store: EventStore, count: AppendCounter): EventStore {
  return {
    // One `then` rather than an async function around an await: every append of a post passes here.
    append: (streamId, events, options) => {
      const counted = (error: unknown): never => {
        count(error instanceof WrongExpectedRevisionError ? 'conflict' : isStoreUnavailable(error) ? 'unavailable' : 'error', 0, error);
        throw error;
      };
      let appending: ReturnType<EventStore['append']>;
      try {
        appending = store.append(streamId, events, options);
      } catch (error) {
        return Promise.reject(error).catch(counted);
      }
      return appending.then((result) => {
        count('ok', events.length);
        return result;
      }, counted);
    },
    readStream: (streamId, options) => store.readStream(streamId, options),
    readAll: (options) => store.readAll(options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    headPosition: () => store.headPosition(),
    close: () => store.close(),
  };
}

// Counts appends for /metrics by wrapping the EventStore port, so the adapters (and their group
// commit) stay as they are: every caller of the service's store goes through this one object.

import { type EventStore, WrongExpectedRevisionError } from '../event-store/port.js';
import { isStoreUnavailable } from '../store-unavailable.js';

/** ok: written; conflict: the expected revision did not match (normal under races); unavailable: store down. */
export type AppendResultLabel = 'ok' | 'conflict' | 'unavailable' | 'error';

export type AppendCounter = (result: AppendResultLabel, events: number) => void;

export function countingEventStore(store: EventStore, count: AppendCounter): EventStore {
  return {
    append: async (streamId, events, options) => {
      try {
        const result = await store.append(streamId, events, options);
        count('ok', events.length);
        return result;
      } catch (error) {
        count(error instanceof WrongExpectedRevisionError ? 'conflict' : isStoreUnavailable(error) ? 'unavailable' : 'error', 0);
        throw error;
      }
    },
    readStream: (streamId, options) => store.readStream(streamId, options),
    readAll: (options) => store.readAll(options),
    subscribeToAll: (options) => store.subscribeToAll(options),
    headPosition: () => store.headPosition(),
    close: () => store.close(),
  };
}

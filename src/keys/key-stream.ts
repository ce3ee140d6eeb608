// Reading and writing the `api-keys` stream. Every change is read → decide → append at the
// revision that was read, so two CLIs (or a CLI and an admin route) racing on keys never lose
// an event or decide on stale state: the loser re-reads and decides again.
import { type EventStore, WrongExpectedRevisionError } from '../event-store/index.js';
import { API_KEYS_STREAM, type ApiKeyEvent, foldKeys, initialKeyState, type KeyState } from './api-keys.js';

export interface LoadedKeys {
  readonly state: KeyState;
  /** Revision of the last event folded in; -1 when the stream is empty. */
  readonly revision: number;
}

export const NO_KEYS: LoadedKeys = { state: initialKeyState, revision: -1 };

/** Folds the events after `from` into it: the whole stream when `from` is omitted. */
export async function loadKeys(store: EventStore, from: LoadedKeys = NO_KEYS): Promise<LoadedKeys> {
  const events = await store.readStream(API_KEYS_STREAM, { fromRevision: from.revision + 1 });
  const last = events.at(-1);
  if (!last) return from;
  return { state: foldKeys(from.state, events), revision: last.revision };
}

const ATTEMPTS = 10;

/** Runs a command function against the current stream and appends what it decides. */
export async function changeKeys(
  store: EventStore,
  decide: (state: KeyState) => ApiKeyEvent[],
): Promise<{ events: ApiKeyEvent[]; state: KeyState }> {
  for (let attempt = 1; ; attempt++) {
    const loaded = await loadKeys(store);
    const events = decide(loaded.state);
    if (events.length === 0) return { events, state: loaded.state };
    try {
      const metadata = { schema: 1, occurred_at: new Date().toISOString() };
      await store.append(
        API_KEYS_STREAM,
        events.map((event) => ({ type: event.type, data: event.data, metadata })),
        { expectedRevision: loaded.revision < 0 ? 'no_stream' : loaded.revision },
      );
      return { events, state: foldKeys(loaded.state, events) };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError) || attempt >= ATTEMPTS) throw error;
    }
  }
}

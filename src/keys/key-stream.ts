// Reading and writing the `api-keys` stream. Every change goes through the command handler, so two
// CLIs racing on keys never lose an event or decide on stale state: the loser re-reads and decides
// again.
import { type Decider, handleCommand } from '../commands/handler.js';
import type { EventStore } from '../event-store/index.js';
import { API_KEYS_STREAM, type ApiKeyEvent, foldKeys, initialKeyState, type KeyState } from './api-keys.js';

export interface LoadedKeys {
  readonly state: KeyState;
  /** Revision of the last event folded in; -1 when the stream is empty. */
  readonly revision: number;
}

const NO_KEYS: LoadedKeys = { state: initialKeyState, revision: -1 };

/** Folds the events after `from` into it: the whole stream when `from` is omitted. */
export async function loadKeys(store: EventStore, from: LoadedKeys = NO_KEYS): Promise<LoadedKeys> {
  const events = await store.readStream(API_KEYS_STREAM, { fromRevision: from.revision + 1 });
  const last = events.at(-1);
  if (!last) return from;
  return { state: foldKeys(from.state, events), revision: last.revision };
}

/** The `api-keys` stream as a decider: a command is a function of the keys as they stand. */
export const keysDecider: Decider<(state: KeyState) => ApiKeyEvent[], KeyState, ApiKeyEvent> = {
  initialState: initialKeyState,
  evolve: (state, event) => foldKeys(state, [event]),
  decide: (command, state) => command(state),
};

/** Runs a command function against the current stream and appends what it decides. */
export async function changeKeys(
  store: EventStore,
  decide: (state: KeyState) => ApiKeyEvent[],
  now: Date = new Date(),
): Promise<{ events: ApiKeyEvent[]; state: KeyState }> {
  const metadata = { schema: 1, occurred_at: now.toISOString() };
  const { events, state } = await handleCommand(store, API_KEYS_STREAM, keysDecider, decide, { metadata });
  return { events, state };
}

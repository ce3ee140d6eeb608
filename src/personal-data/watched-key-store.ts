import { KeyIdTakenError, type DataKeyStore } from './key-store.js';

// The key store as the service uses it, each use's outcome told to `watch`: the probe of /readyz
// reads nothing of the keys, so a store that answers it while every real read and write fails (a
// damaged keys.db, a MongoDB collection the user may no longer read) still looked ready, and the
// instance stayed in the load balancer answering every post 503. The service's own uses are the
// evidence, as its appends are for the event store.

/** Told of every use: `undefined` for an answer, the error for a failure. */
export type KeyStoreWatch = (failure: unknown) => void;

export function watchedKeyStore(store: DataKeyStore, watch: KeyStoreWatch): DataKeyStore {
  const watched = async <T>(use: () => Promise<T>): Promise<T> => {
    try {
      const answer = await use();
      watch(undefined);
      return answer;
    } catch (error) {
      // An id already taken is the store's answer, not its failure.
      watch(error instanceof KeyIdTakenError ? undefined : error);
      throw error;
    }
  };
  return {
    create: (keys) => watched(() => store.create(keys)),
    fetch: (ids) => watched(() => store.fetch(ids)),
    destroy: (ids) => watched(() => store.destroy(ids)),
    secret: (name, candidate) => watched(() => store.secret(name, candidate)),
    probe: (write) => store.probe(write),
    rewrap: (rewrap) => store.rewrap(rewrap),
    close: () => store.close(),
  };
}

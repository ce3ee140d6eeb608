import { parentPort, workerData } from 'node:worker_threads';
import { join } from 'node:path';
import { EVENTS_FILE, openEventsDatabase } from '../../src/event-store/embedded/schema.js';
import { EmbeddedKeyStore } from '../../src/personal-data/embedded-key-store.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';

// A thread of first-open-race.test.ts: opens the store it is sent on a new data dir the moment
// every other thread is ready to (a barrier on shared memory), so that they race to create it.

const { barrier, threads } = workerData as { barrier: SharedArrayBuffer; threads: number };
const arrived = new Int32Array(barrier);

const opens = {
  events: async (dir: string) => openEventsDatabase(join(dir, EVENTS_FILE)).close(),
  readModels: async (dir: string) => EmbeddedReadModelStore.open(dir).close(),
  keys: async (dir: string) => EmbeddedKeyStore.open(dir).close(),
} as const;

parentPort!.on('message', ({ store, dir }: { store: keyof typeof opens; dir: string }) => {
  Atomics.add(arrived, 0, 1);
  while (Atomics.load(arrived, 0) % threads !== 0) {
    // Spins: a wait would let the first threads start before the last has arrived.
  }
  opens[store](dir).then(
    () => parentPort!.postMessage('ok'),
    (error: unknown) => parentPort!.postMessage(`failed: ${(error as Error).message}`),
  );
});

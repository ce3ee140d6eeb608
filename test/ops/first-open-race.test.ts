import { expect } from 'chai';
import { Worker } from 'node:worker_threads';
import { tempDir } from '../support/tmp.js';

// Processes that open a new data dir at once (two instances started together, a service and a
// CLI command) race to switch each new SQLite file to WAL. SQLite answers the loser SQLITE_BUSY at
// once, without its busy handler, so one of them failed to start ("database is locked"): about
// one start in fifty with three processes. Here threads race for it, released together by a
// barrier, which makes the race far likelier (without the fix, several opens in a hundred failed).

const THREADS = 4;
const ROUNDS = 60;

describe('stores opened at once by several processes on a new data dir', function () {
  this.timeout(120_000);

  let threads: Worker[];
  before(function () {
    const barrier = new SharedArrayBuffer(4);
    threads = Array.from({ length: THREADS }, () => new Worker(new URL('./first-open-thread.js', import.meta.url), { workerData: { barrier, threads: THREADS } }));
  });
  after(async function () {
    await Promise.all(threads.map((thread) => thread.terminate()));
  });

  for (const [store, name] of [['events', 'the event store'], ['readModels', 'the read-model store'], ['keys', 'the key store']] as const) {
    it(`${name}: every opener waits for the others instead of failing "database is locked" (${ROUNDS} rounds of ${THREADS})`, async function () {
      const failures: string[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const dir = tempDir('first-open-race');
        try {
          const answers = await Promise.all(
            threads.map(
              (thread) =>
                new Promise<string>((resolve, reject) => {
                  const answered = (answer: string) => {
                    thread.off('error', failed);
                    resolve(answer);
                  };
                  const failed = (error: Error) => {
                    thread.off('message', answered);
                    reject(error);
                  };
                  thread.once('message', answered).once('error', failed);
                  thread.postMessage({ store, dir: dir.path });
                }),
            ),
          );
          failures.push(...answers.filter((answer) => answer !== 'ok'));
        } finally {
          dir.remove();
        }
      }
      expect(failures).to.deep.equal([]);
    });
  }
});

import { Worker } from 'node:worker_threads';
import { closeThread } from './commit-thread-client.js';
import type { AggregateOptions, Group } from './port.js';
import type { ReaderAnswer, ReaderQuery, ReaderThreadOptions } from './reader-thread.js';

export type { ReaderThreadOptions };

/** A page of groups is small (at most a few hundred): a small heap is enough for the thread. */
const HEAP = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 } as const;

/** The serving thread's end of the reader thread: sends each question and settles it on its answer. */
export class ReaderThreadClient {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve(groups: Group[]): void; reject(error: Error): void }>();
  private queries = 0;
  /** Why the thread is gone, once it is: every question after that fails with it. */
  private lost: Error | undefined;

  constructor(
    options: ReaderThreadOptions,
    private readonly toError: (failure: NonNullable<ReaderAnswer['error']>) => Error,
  ) {
    this.worker = new Worker(new URL('./reader-thread.js', import.meta.url), { workerData: options, resourceLimits: HEAP });
    // It never keeps the process alive: a process that is done with its stores exits as it did.
    this.worker.unref();
    this.worker.once('error', (error) => this.fail(error));
    this.worker.once('exit', (code) => this.fail(new Error(`the read-model reader thread exited with code ${code}`)));
    this.worker.on('message', (answer: ReaderAnswer) => {
      const waiter = this.waiting.get(answer.id);
      this.waiting.delete(answer.id);
      if (!waiter) return;
      if (answer.error) waiter.reject(this.toError(answer.error));
      else waiter.resolve(answer.groups as Group[]);
      if (this.waiting.size === 0) this.worker.unref();
    });
  }

  aggregate(table: string, options: AggregateOptions): Promise<Group[]> {
    if (this.lost) return Promise.reject(this.lost);
    const id = this.queries++;
    return new Promise<Group[]>((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      // While a question is open the thread keeps the process alive, as a query on the main thread would.
      this.worker.ref();
      this.worker.postMessage({ id, table, options } satisfies ReaderQuery);
    });
  }

  async close(): Promise<void> {
    if (!this.lost) await closeThread(this.worker);
  }

  private fail(error: Error): void {
    this.lost ??= error;
    for (const waiter of this.waiting.values()) waiter.reject(this.lost);
    this.waiting.clear();
  }
}

import { Worker } from 'node:worker_threads';
import type { CommitThreadOptions, ThreadCommit, ThreadCommitResult } from './commit-thread.js';

/**
 * A serving process's thread heap: it holds one live commit's rows at a time (a few documents), so
 * a small heap is enough, and V8's defaults, sized for a main thread, would cost tens of MB. A
 * rebuild's commits carry thousands of documents each and keep V8's defaults.
 */
const SMALL_HEAP = { maxYoungGenerationSizeMb: 8, maxOldGenerationSizeMb: 64 } as const;

/** The main thread's end of the commit thread: sends commits in order and settles each on its answer. */
export class CommitThreadClient {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { projection: string; resolve(): void; reject(error: Error): void }>();
  private batches = 0;
  /** The last commit sent, settled either way: the thread answers in order, so all before it are too. */
  private last: Promise<unknown> = Promise.resolve();
  /** Why the thread is gone, once it is: every commit after that fails with it. */
  private lost: Error | undefined;

  /**
   * `refused` is told of each commit that fails, synchronously as the answer arrives, before any
   * caller can see the failure and make another commit.
   */
  constructor(
    options: CommitThreadOptions,
    private readonly toError: (failure: NonNullable<ThreadCommitResult['error']>) => Error,
    private readonly refused: (projection: string) => void,
  ) {
    this.worker = new Worker(new URL('./commit-thread.js', import.meta.url), {
      workerData: options,
      ...(options.smallHeap ? { resourceLimits: SMALL_HEAP } : {}),
    });
    this.worker.once('error', (error) => this.fail(error));
    this.worker.once('exit', (code) => this.fail(new Error(`the read-model commit thread exited with code ${code}`)));
    this.worker.on('message', (message: ThreadCommitResult) => {
      const waiter = this.waiting.get(message.batch);
      this.waiting.delete(message.batch);
      if (!waiter) return;
      if (message.error) {
        this.refused(waiter.projection);
        waiter.reject(this.toError(message.error));
      } else waiter.resolve();
    });
  }

  nextBatch(): number {
    return this.batches++;
  }

  /** Resolves when the commit is stored; commits are stored in the order sent. */
  send(commit: ThreadCommit): Promise<void> {
    if (this.lost) return Promise.reject(this.lost);
    const stored = new Promise<void>((resolve, reject) => {
      this.waiting.set(commit.batch, { projection: commit.projection, resolve, reject });
      // Posted before the thread listens, it waits in the port until it does.
      this.worker.postMessage(commit);
    });
    this.last = stored.catch(() => {});
    return stored;
  }

  /** Commits sent and not yet answered. */
  get inFlight(): number {
    return this.waiting.size;
  }

  /** After a failed commit, once every commit sent has been answered: the thread takes commits again. */
  reset(): void {
    if (!this.lost) this.worker.postMessage('reset');
  }

  /** Resolves when every commit sent so far has been answered (whatever the answer). */
  async idle(): Promise<void> {
    await this.last;
  }

  async close(): Promise<void> {
    await this.idle();
    if (!this.lost) await closeThread(this.worker);
  }

  private fail(error: Error): void {
    this.lost ??= error;
    for (const waiter of this.waiting.values()) {
      this.refused(waiter.projection);
      waiter.reject(this.lost);
    }
    this.waiting.clear();
  }
}

/** Asks a store's thread to close its connection and end (the message 'close', taken after those sent before it), and waits until it has. */
export async function closeThread(worker: Worker): Promise<void> {
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.postMessage('close');
  await exited;
}

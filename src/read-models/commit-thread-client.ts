import { Worker } from 'node:worker_threads';
import type { CommitThreadOptions, ThreadCommit, ThreadCommitResult } from './commit-thread.js';

/** The main thread's end of the commit thread: sends commits in order and settles each on its answer. */
export class CommitThreadClient {
  private readonly worker: Worker;
  private readonly waiting = new Map<number, { resolve(): void; reject(error: Error): void }>();
  private batches = 0;
  /** The last commit sent, settled either way: the thread answers in order, so all before it are too. */
  private last: Promise<unknown> = Promise.resolve();
  /** Why the thread is gone, once it is: every commit after that fails with it. */
  private lost: Error | undefined;

  constructor(
    options: CommitThreadOptions,
    private readonly toError: (failure: NonNullable<ThreadCommitResult['error']>) => Error,
  ) {
    this.worker = new Worker(new URL('./commit-thread.js', import.meta.url), { workerData: options });
    this.worker.once('error', (error) => this.fail(error));
    this.worker.once('exit', (code) => this.fail(new Error(`the read-model commit thread exited with code ${code}`)));
    this.worker.on('message', (message: ThreadCommitResult) => {
      const waiter = this.waiting.get(message.batch);
      this.waiting.delete(message.batch);
      if (message.error) waiter?.reject(this.toError(message.error));
      else waiter?.resolve();
    });
  }

  nextBatch(): number {
    return this.batches++;
  }

  /** Resolves when the commit is stored; commits are stored in the order sent. */
  send(commit: ThreadCommit): Promise<void> {
    if (this.lost) return Promise.reject(this.lost);
    const stored = new Promise<void>((resolve, reject) => {
      this.waiting.set(commit.batch, { resolve, reject });
      // Posted before the thread listens, it waits in the port until it does.
      this.worker.postMessage(commit);
    });
    this.last = stored.catch(() => {});
    return stored;
  }

  /** Resolves when every commit sent so far has been answered (whatever the answer). */
  async idle(): Promise<void> {
    await this.last;
  }

  async close(): Promise<void> {
    await this.idle();
    if (this.lost) return;
    const exited = new Promise((resolve) => this.worker.once('exit', resolve));
    this.worker.postMessage('close');
    await exited;
  }

  private fail(error: Error): void {
    this.lost ??= error;
    for (const waiter of this.waiting.values()) waiter.reject(this.lost);
    this.waiting.clear();
  }
}

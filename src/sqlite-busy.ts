import Database from 'better-sqlite3';

// A serving process's own SQLite connections wait for no lock in place. SQLite's busy_timeout
// waits by blocking the connection's thread, usually the main one: its event loop, /healthz,
// lease renewals and every request stopped for as long as another process (an operator's sqlite3
// shell, `leadpost erase`, a second instance) held the lock, up to the whole timeout a
// statement. So such a connection runs with busy_timeout 0 once opened, and an operation that
// finds the lock taken is tried again after a timer, the event loop going on meanwhile.

/**
 * How long an operation waits in all for another connection's lock before its store is
 * unavailable, unless its store says otherwise: what busy_timeout was.
 */
export const LOCK_WAIT_MS = 10_000;

/** The waits between tries (those of SQLite's own busy handler, to 50 ms). */
const RETRY_MS = [1, 2, 5, 10, 15, 20, 25, 25, 25, 50];

export const isBusy = (error: unknown): boolean => error instanceof Database.SqliteError && error.code.startsWith('SQLITE_BUSY');

/** What a step that SQLite answers without an error (a checkpoint that could not finish) throws to be tried again like any. */
export const busyError = (message: string): Error => new Database.SqliteError(message, 'SQLITE_BUSY');

/**
 * Runs `body` at once, as part of the call, and again after a short wait each time it fails on a
 * lock another connection holds, up to `budgetMs` in all; then that failure is thrown. Each try is
 * the whole body from its start (a transaction that failed was rolled back). Reads in WAL mode
 * wait for no writer, so it is writes, checkpoints (and a read during another connection's
 * recovery of the file) that come back here.
 */
export async function retryWhileBusy<T>(body: () => T, budgetMs: number = LOCK_WAIT_MS): Promise<T> {
  const started = Date.now();
  for (let tries = 0; ; tries++) {
    try {
      return body();
    } catch (error) {
      const left = budgetMs - (Date.now() - started);
      if (!isBusy(error) || left <= 0) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(left, RETRY_MS[Math.min(tries, RETRY_MS.length - 1)]!)));
    }
  }
}

/** For a short synchronous pause while a store opens, before anything is served. */
const PAUSE = new Int32Array(new SharedArrayBuffer(4));
const OPEN_RETRY_MS = 20;

/**
 * Runs the steps that open a store (its switch to WAL, its schema) again after a short pause
 * each time they fail on a lock, up to `budgetMs` in all. Processes opening a new data dir at
 * once (two instances started together, a service and a CLI) race to switch a new file to WAL,
 * and SQLite answers the loser SQLITE_BUSY at once, without its busy handler (waiting there could
 * deadlock): without this, one of them failed to start, about one start in fifty. The pause
 * blocks the thread, as busy_timeout does while a store opens: nothing is served yet.
 */
export function openingWhileBusy<T>(steps: () => T, budgetMs: number = LOCK_WAIT_MS): T {
  const started = Date.now();
  for (;;) {
    try {
      return steps();
    } catch (error) {
      if (!isBusy(error) || Date.now() - started >= budgetMs) throw error;
      Atomics.wait(PAUSE, 0, 0, OPEN_RETRY_MS);
    }
  }
}

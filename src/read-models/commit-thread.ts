import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { LEASE_LOST, type LeaseRow, SELECT_LEASE, createTableSql, fenceHolds, openReadModelsDatabase } from './embedded-schema.js';

// The SQLite half of the embedded read-model store's commits, on its own thread: the main thread
// folds the writes into documents and stringifies them, this thread stores them with the
// checkpoint in one transaction. A rebuild then uses both cores: while this thread writes one
// batch, the main thread decodes and folds the next; a live projector's main thread serves HTTP
// meanwhile. Commits are taken strictly in the order sent. A fenced commit (a projector holding
// its lease) checks the lease inside its own transaction, as the main thread's commits do.

export interface CommitThreadOptions {
  readonly file: string;
  readonly busyTimeoutMs: number;
  readonly cacheMiB?: number;
  /** Live commits of a serving process, a few documents each: a capped heap (commit-thread-client.ts). */
  readonly smallHeap?: boolean;
}

export interface ThreadCommit {
  readonly batch: number;
  readonly projection: string;
  readonly commit: number;
  readonly prepare: number;
  /** Documents to store, flattened: table, id, position key, document text; tables are checked names. */
  readonly rows: readonly string[];
  readonly collections: readonly string[];
  readonly fence?: { readonly lease: string; readonly holder: string; readonly token: number };
}

export interface ThreadCommitResult {
  readonly batch: number;
  readonly error?: { readonly message: string; readonly code?: string };
}

const isNoSuchTable = (error: unknown) => error instanceof Database.SqliteError && error.message.startsWith('no such table');

function serve(options: CommitThreadOptions): void {
  const db = openReadModelsDatabase(options.file, options.busyTimeoutMs, options.cacheMiB);
  const upserts = new Map<string, Database.Statement>();
  const upsert = (table: string): Database.Statement => {
    let statement = upserts.get(table);
    if (!statement) {
      db.exec(createTableSql(table));
      statement = db.prepare(`INSERT INTO "${table}" (id, pos, doc) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET pos = excluded.pos, doc = excluded.doc`);
      upserts.set(table, statement);
    }
    return statement;
  };
  const checkpoint = db.prepare(
    'INSERT INTO checkpoints (projection, commit_pos, prepare_pos) VALUES (?, ?, ?) ON CONFLICT (projection) DO UPDATE SET commit_pos = excluded.commit_pos, prepare_pos = excluded.prepare_pos',
  );
  const wrote = db.prepare('INSERT OR IGNORE INTO checkpoint_collections (collection, projection) VALUES (?, ?)');
  const leaseOf = db.prepare<[string], LeaseRow>(SELECT_LEASE);
  const store = db.transaction((commit: ThreadCommit) => {
    const fence = commit.fence;
    if (fence) {
      if (!fenceHolds(leaseOf.get(fence.lease), fence, Date.now())) {
        throw Object.assign(new Error(`the ${fence.lease} lease is no longer held by this process`), { code: LEASE_LOST });
      }
    }
    const rows = commit.rows;
    for (let i = 0; i < rows.length; i += 4) upsert(rows[i]!).run(rows[i + 1], rows[i + 2], rows[i + 3]);
    checkpoint.run(commit.projection, commit.commit, commit.prepare);
    for (const collection of commit.collections) wrote.run(collection, commit.projection);
  });
  // After a failed commit, later ones would move the checkpoint past the failed one's events:
  // every commit after it fails the same way, until the main thread, once it has had every answer
  // and forgotten what it sent, says to start again.
  let failure: ThreadCommitResult['error'];
  parentPort!.on('message', (message: ThreadCommit | 'close' | 'reset') => {
    if (message === 'close') {
      db.close();
      parentPort!.close();
      return;
    }
    if (message === 'reset') {
      failure = undefined;
      return;
    }
    if (!failure) {
      try {
        try {
          store.immediate(message);
        } catch (error) {
          // The main thread dropped a table this thread had a statement for: make it anew, once.
          if (!isNoSuchTable(error)) throw error;
          upserts.clear();
          store.immediate(message);
        }
        parentPort!.postMessage({ batch: message.batch } satisfies ThreadCommitResult);
        return;
      } catch (error) {
        failure = { message: (error as Error).message, code: (error as { code?: string }).code };
      }
    }
    parentPort!.postMessage({ batch: message.batch, error: failure } satisfies ThreadCommitResult);
  });
}

if (parentPort) serve(workerData as CommitThreadOptions);

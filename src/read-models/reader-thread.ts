import Database from 'better-sqlite3';
import { parentPort, workerData } from 'node:worker_threads';
import { openingWhileBusy } from '../sqlite-busy.js';
import type { AggregateOptions } from './port.js';
import { INDEX_NAMES_SQL, TABLE_EXISTS_SQL, aggregatePage } from './sqlite-aggregate.js';

// The embedded read-model store's reports, on a thread of their own (see the store's readerThread
// option): a connection of its own reads the same file, which WAL lets it do beside every writer,
// and the thread that serves HTTP only sends the question and gets the page back. It never writes.

export interface ReaderThreadOptions {
  readonly file: string;
  readonly busyTimeoutMs: number;
}

export interface ReaderQuery {
  readonly id: number;
  readonly table: string;
  readonly options: AggregateOptions;
}

export interface ReaderAnswer {
  readonly id: number;
  readonly groups?: unknown[];
  readonly error?: { readonly message: string; readonly code?: string };
}

/** Statements kept per SQL text; a burst of distinct report shapes must not grow it for ever. */
const MAX_STATEMENTS = 200;

function serve(options: ReaderThreadOptions): void {
  const db = new Database(options.file);
  db.pragma('query_only = ON');
  const statements = new Map<string, Database.Statement>();
  const prepare = (sql: string): Database.Statement => {
    let statement = statements.get(sql);
    if (!statement) {
      if (statements.size >= MAX_STATEMENTS) statements.clear();
      statements.set(sql, (statement = db.prepare(sql)));
    }
    return statement;
  };
  // One read transaction: the statements of a page see one state of the file.
  const page = db.transaction((table: string, query: AggregateOptions) => {
    if (prepare(TABLE_EXISTS_SQL).get(table) === undefined) return [];
    return aggregatePage(prepare, table, prepare(INDEX_NAMES_SQL).pluck().all(table) as string[], query);
  });
  parentPort!.on('message', (message: ReaderQuery | 'close') => {
    if (message === 'close') {
      db.close();
      parentPort!.close();
      return;
    }
    try {
      // A read waits in WAL mode only while another connection recovers the file after a crash; this thread may wait in place.
      const groups = openingWhileBusy(() => page(message.table, message.options), options.busyTimeoutMs);
      parentPort!.postMessage({ id: message.id, groups } satisfies ReaderAnswer);
    } catch (error) {
      const noSuchTable = error instanceof Database.SqliteError && error.message.startsWith('no such table');
      if (noSuchTable) statements.clear();
      parentPort!.postMessage(
        (noSuchTable ? { id: message.id, groups: [] } : { id: message.id, error: { message: (error as Error).message, code: (error as { code?: string }).code } }) satisfies ReaderAnswer,
      );
    }
  });
}

if (parentPort) serve(workerData as ReaderThreadOptions);

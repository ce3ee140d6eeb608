import Database from 'better-sqlite3';
import { join } from 'node:path';
import type { Position } from '../event-store/port.js';
import { makeDirectory } from '../make-directory.js';
import { LOCK_WAIT_MS, retryWhileBusy } from '../sqlite-busy.js';
import { type Doc, applyWrite } from './apply.js';
import { CommitThreadClient } from './commit-thread-client.js';
import { WrittenIds } from './written-ids.js';
import { LEASE_LOST, type LeaseRow, READ_MODELS_FILE, SELECT_LEASE, createTableSql, fenceHolds, openReadModelsDatabase, tableName } from './embedded-schema.js';
import {
  type AggregateOptions,
  type Fence,
  type FindOptions,
  type Group,
  type GroupValue,
  type IndexSpec,
  type Lease,
  LeaseLostError,
  type ReadDoc,
  type ReadModelStore,
  type ReadWrite,
  ReadModelUnavailableError,
  positionKey,
} from './port.js';
import { findSql, indexSql } from './sqlite-query.js';
import { INDEX_NAMES_SQL, TABLE_EXISTS_SQL, aggregatePage } from './sqlite-aggregate.js';
import { ReaderThreadClient, type ReaderThreadOptions } from './reader-thread-client.js';
import { checkAggregateOptions, checkIndexes, checkLease, checkLeaseRemoval, checkPosition, checkProjection, checkWrite } from './validate.js';

export interface EmbeddedReadModelOptions {
  /** How long a write waits for another connection's write lock before the store is unavailable. */
  readonly busyTimeoutMs?: number;
  /**
   * SQLite's page cache for this connection; better-sqlite3's default (16 MiB) when not given. A rebuild writes
   * documents all over several tables, and a larger cache keeps more of them in memory;
   * the service keeps the default, for its memory.
   */
  readonly cacheMiB?: number;
  /**
   * Store commits on a thread of their own (see commit-thread.ts), for a process that is the only
   * writer of the collections it commits to: `leadpost replay` building new collections, or a
   * projector whose commits are fenced by its lease. Documents are read outside the write
   * transaction. Commits become pipelined (`pipelinedCommits`).
   */
  readonly commitThread?: boolean;
  /**
   * With the commit thread: other processes write the same collections at other times (projectors
   * taking turns by a lease), so a document this store has not written may still be in the table.
   * Without it, a table that was empty when this store first committed to it is taken to hold only
   * what this store wrote, and a document it never wrote is not looked for.
   */
  readonly othersMayWrite?: boolean;
  /** With the commit thread: its commits are a live projector's, a few documents each, so its heap is capped. */
  readonly smallThreadHeap?: boolean;
  /**
   * Run aggregates (reports) on a thread of their own with a connection of its own, for a process
   * that serves HTTP: a report over a month of leads takes SQLite a few hundred milliseconds, and on
   * the main thread every request in flight waited that long behind it (an analyst's dashboard
   * refreshing held up suppliers' posts). The thread starts with the first aggregate.
   */
  readonly readerThread?: boolean;
}

/** A document this store has sent to its commit thread, until the thread has stored it. */
interface Sent {
  readonly pos: string;
  readonly doc: string;
  readonly batch: number;
}

/** SQLite failures that mean "the store cannot serve now" rather than "this request is wrong". */
const UNAVAILABLE = /^SQLITE_(FULL|IOERR|READONLY|CANTOPEN|BUSY|LOCKED|PERM|CORRUPT|NOTADB|NOMEM|PROTOCOL)/;
/** Statements are cached per SQL text; a burst of distinct filter shapes must not grow it forever. */
const MAX_STATEMENTS_PER_TABLE = 200;

/** A document as one commit sees it: read and parsed at most once, written once at the end. */
interface Pending {
  pos: string | null;
  text: string | null;
  doc: Doc | undefined;
  dirty: boolean;
}

type StoredRow = { pos: string; doc: string } | undefined;

interface DocStatements {
  readonly select: Database.Statement;
  readonly upsert: Database.Statement;
}

const isNoSuchTable = (error: unknown) => error instanceof Database.SqliteError && error.message.startsWith('no such table');

export class EmbeddedReadModelStore implements ReadModelStore {
  /** Tables known to exist, so that a commit does not ask the schema for each write. */
  private readonly tables = new Set<string>();
  private readonly statements = new Map<string, Map<string, Database.Statement>>();
  private readonly docStatementCache = new Map<string, DocStatements>();
  private readonly commitTransaction: Database.Transaction<
    (projection: string, checkpoint: Position, writes: readonly ReadWrite[], created: string[], fence: Fence | undefined) => void
  >;
  private readonly leaseTransaction: Database.Transaction<(name: string, holder: string, ttlMs: number) => Lease>;
  /** Several reads that must see one state of the file. */
  private readonly snapshot: <T>(read: () => T) => T;
  private closed = false;
  private readonly thread: CommitThreadClient | undefined;
  private readonly readerOptions: ReaderThreadOptions | undefined;
  private readerClient: ReaderThreadClient | undefined;
  /** With a commit thread: the newest text of each document sent to it and not yet stored, by table. */
  private readonly sent = new Map<string, Map<string, Sent>>();
  /** With a commit thread: whether each table was empty when first committed to (then `written` knows what it holds). */
  private readonly startedEmpty = new Map<string, boolean>();
  private readonly written = new WrittenIds();
  /** With a commit thread: the first failure of a commit, until every commit sent after it is answered. */
  private threadFailure: unknown;
  /**
   * With a commit thread: projections a commit of which failed, until their checkpoint is read
   * again. Their next commit was folded on top of the failed one (a timer's flush, say), and
   * storing it would move the checkpoint past events that were never stored.
   */
  private readonly refused = new Set<string>();
  private readonly othersMayWrite: boolean;
  /** How long an operation waits in all for another connection's lock before the store is unavailable. */
  private readonly busyTimeoutMs: number;
  readonly pipelinedCommits: boolean;

  private constructor(
    private readonly db: Database.Database,
    file: string,
    options: EmbeddedReadModelOptions,
  ) {
    this.busyTimeoutMs = Math.max(0, options.busyTimeoutMs ?? LOCK_WAIT_MS);
    this.commitTransaction = db.transaction((projection, checkpoint, writes, created, fence) => {
      if (fence) this.checkFence(fence);
      this.apply(projection, checkpoint, writes, created);
    });
    this.leaseTransaction = db.transaction((name, holder, ttlMs) => this.takeLease(name, holder, ttlMs));
    const snapshot = db.transaction((read: () => unknown) => read());
    this.snapshot = <T>(read: () => T) => snapshot(read) as T;
    this.pipelinedCommits = options.commitThread === true;
    this.readerOptions = options.readerThread ? { file, busyTimeoutMs: this.busyTimeoutMs } : undefined;
    this.othersMayWrite = options.othersMayWrite === true;
    if (options.commitThread) {
      const threadOptions = { file, busyTimeoutMs: options.busyTimeoutMs ?? LOCK_WAIT_MS, cacheMiB: options.cacheMiB, smallHeap: options.smallThreadHeap };
      this.thread = new CommitThreadClient(
        threadOptions,
        threadFailure,
        (projection) => this.refused.add(projection),
      );
    }
  }

  static open(dataDir: string, options: EmbeddedReadModelOptions = {}): EmbeddedReadModelStore {
    const file = join(dataDir, READ_MODELS_FILE);
    try {
      makeDirectory(dataDir);
      // Opened (its schema made) waiting the whole busy timeout in place, as nothing is served yet;
      // from then on a lock is waited for between turns of the event loop (see run).
      const db = openReadModelsDatabase(file, options.busyTimeoutMs ?? LOCK_WAIT_MS, options.cacheMiB);
      db.pragma('busy_timeout = 0');
      return new EmbeddedReadModelStore(db, file, options);
    } catch (error) {
      throw new ReadModelUnavailableError(`cannot open the read models at ${file}: ${(error as Error).message}`, { cause: error });
    }
  }

  commit(projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence?: Fence): Promise<void> {
    if (this.thread) return this.commitInThread(this.thread, projection, checkpoint, writes, fence);
    return this.run(() => {
      checkCommit(projection, checkpoint, writes);
      if (fence) checkLease(fence.lease, fence.holder);
      try {
        this.commitOnce(projection, checkpoint, writes, fence);
      } catch (error) {
        // Another connection dropped a table this one still thought existed: learn and retry.
        if (!isNoSuchTable(error)) throw error;
        this.forgetAll();
        this.commitOnce(projection, checkpoint, writes, fence);
      }
    });
  }

  acquireLease(name: string, holder: string, ttlMs: number): Promise<Lease> {
    return this.run(
      () => {
        checkLease(name, holder, ttlMs);
        // IMMEDIATE: read and write under the write lock, so that two processes never both take it.
        return this.leaseTransaction.immediate(name, holder, ttlMs);
      },
      // An answer later than the lease's time is no answer (the lease keeper has stopped waiting):
      // it must not take or renew the lease behind the asker's back.
      Math.min(this.busyTimeoutMs, ttlMs),
    );
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.run(() => {
      checkLease(name, holder);
      // The row stays, with its token: the next holder's is still higher.
      this.stmt('', 'UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ?').run(name, holder);
    });
  }

  lease(name: string): Promise<Lease | null> {
    return this.run(() => {
      const row = this.stmt('', SELECT_LEASE).get(name) as LeaseRow | undefined;
      return row ? { name, holder: row.holder, token: row.token, expiresAt: row.expires_at } : null;
    });
  }

  leasesNamed(prefix: string): Promise<Lease[]> {
    return this.run(() => {
      // By the prefix's length, not LIKE: a lease name may hold `_` or `%`.
      const rows = this.stmt('', 'SELECT name, holder, token, expires_at FROM leases WHERE substr(name, 1, length(?)) = ?').all(prefix, prefix) as Array<LeaseRow & { name: string }>;
      return rows.map((row) => ({ name: row.name, holder: row.holder, token: row.token, expiresAt: row.expires_at }));
    });
  }

  removeLeasesNamed(prefix: string, ranOutBefore: number): Promise<number> {
    return this.run(() => {
      checkLeaseRemoval(prefix, ranOutBefore);
      return this.stmt('', 'DELETE FROM leases WHERE substr(name, 1, length(?)) = ? AND expires_at < ?').run(prefix, prefix, ranOutBefore).changes;
    });
  }

  async checkpoint(projection: string): Promise<Position | null> {
    if (this.thread) {
      // Read once every commit sent is answered, so that it is the checkpoint as it will stay; a
      // projection that reads it starts again from there, and may commit again.
      await this.thread.idle();
      this.refused.delete(projection);
    }
    return this.run(() => {
      const row = this.stmt('', 'SELECT commit_pos AS "commit", prepare_pos AS prepare FROM checkpoints WHERE projection = ?').get(projection) as
        | Position
        | undefined;
      return row ? { commit: row.commit, prepare: row.prepare } : null;
    });
  }

  get(collection: string, id: string): Promise<ReadDoc | null> {
    return this.run(() => {
      const table = tableName(collection);
      return this.read(table, null, () => {
        const row = this.stmt(table, `SELECT doc FROM "${table}" WHERE id = ?`).get(id) as { doc: string } | undefined;
        return row ? toReadDoc(id, row.doc) : null;
      });
    });
  }

  find(collection: string, options: FindOptions): Promise<ReadDoc[]> {
    return this.run(() => {
      const table = tableName(collection);
      const statements = findSql(table, options);
      const readPage = () => {
        const docs: ReadDoc[] = [];
        for (const { sql, params } of statements) {
          if (docs.length >= options.limit) break;
          const rows = this.stmt(table, sql).all(...params, options.limit - docs.length) as Array<{ id: string; doc: string }>;
          for (const row of rows) docs.push(toReadDoc(row.id, row.doc));
        }
        return docs;
      };
      // Statements of one page see one state of the file.
      return this.read(table, [], () => (statements.length > 1 ? this.snapshot(readPage) : readPage()));
    });
  }

  aggregate(collection: string, options: AggregateOptions): Promise<Group[]> {
    const reader = this.reader();
    if (reader) {
      try {
        checkAggregateOptions(options);
      } catch (error) {
        return Promise.reject(error);
      }
      return options.limit === 0 ? Promise.resolve([]) : reader.aggregate(tableName(collection), options);
    }
    return this.run(() => {
      const table = tableName(collection);
      checkAggregateOptions(options);
      if (options.limit === 0) return [];
      return this.read(table, [], () => this.snapshot(() => aggregatePage((sql) => this.stmt(table, sql), table, this.indexNames(table), options)));
    });
  }

  /** The reader thread, started at the first aggregate that needs it (see readerThread). */
  private reader(): ReaderThreadClient | undefined {
    if (!this.readerOptions || this.closed) return undefined;
    this.readerClient ??= new ReaderThreadClient(this.readerOptions, threadFailure);
    return this.readerClient;
  }

  async ensureIndexes(collection: string, indexes: ReadonlyArray<IndexSpec>): Promise<void> {
    await this.thread?.idle();
    return this.run(() => {
      const table = tableName(collection);
      checkIndexes(indexes);
      this.db.transaction(() => {
        this.db.exec(createTableSql(table));
        for (const spec of indexes) for (const sql of indexSql(table, spec)) this.db.exec(sql);
      })();
      this.tables.add(table);
    });
  }

  async collections(): Promise<string[]> {
    // A table the commit thread is still creating is not there yet: let it finish first.
    await this.thread?.idle();
    return this.run(() => {
      const tables = this.stmt('', `SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'rm\\_%' ESCAPE '\\'`).pluck().all() as string[];
      return tables.map((table) => table.slice('rm_'.length));
    });
  }

  async drop(collection: string): Promise<void> {
    await this.thread?.idle();
    return this.run(() => {
      const table = tableName(collection);
      this.sent.delete(table);
      this.startedEmpty.delete(table);
      this.db.transaction(() => {
        this.db.exec(`DROP TABLE IF EXISTS "${table}"`);
        const writers = this.db.prepare('SELECT projection FROM checkpoint_collections WHERE collection = ?').pluck().all(collection) as string[];
        for (const projection of writers) this.forgetCheckpoint(projection);
      })();
      this.forget(table);
    });
  }

  /**
   * Rebuilds the file without its free space (VACUUM) and empties the WAL: no
   * byte of a dropped table or of an overwritten document is left in either. For a store no one
   * else writes to meanwhile (`leadpost seal-clear-leads`); it holds the file's lock while it runs.
   */
  async compact(): Promise<void> {
    await this.thread?.idle();
    return this.run(() => {
      // VACUUM copies the database into a temporary one: on disk, not in memory.
      this.db.pragma('temp_store = FILE');
      this.db.exec('VACUUM');
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    });
  }

  async resetCheckpoint(projection: string): Promise<void> {
    await this.thread?.idle();
    return this.run(() => this.forgetCheckpoint(projection));
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.readerClient?.close();
    await this.thread?.close();
    this.statements.clear();
    this.db.close();
  }

  /** Runs inside a transaction that holds the write lock. */
  private takeLease(name: string, holder: string, ttlMs: number): Lease {
    const now = Date.now();
    const row = this.stmt('', SELECT_LEASE).get(name) as LeaseRow | undefined;
    if (row && row.holder !== holder && row.expires_at > now) return { name, holder: row.holder, token: row.token, expiresAt: row.expires_at };
    // A renewal in time keeps the token; a lease taken anew, or back after it ran out, gets the next.
    const token = row && row.holder === holder && row.expires_at > now ? row.token : (row?.token ?? 0) + 1;
    const expiresAt = now + ttlMs;
    this.stmt(
      '',
      'INSERT INTO leases (name, holder, token, expires_at) VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, token = excluded.token, expires_at = excluded.expires_at',
    ).run(name, holder, token, expiresAt);
    return { name, holder, token, expiresAt };
  }

  /** Runs inside the commit's transaction, under the write lock a takeover also needs. */
  private checkFence(fence: Fence): void {
    const row = this.stmt('', SELECT_LEASE).get(fence.lease) as LeaseRow | undefined;
    if (!fenceHolds(row, fence, Date.now())) throw new LeaseLostError(fence);
  }

  private commitOnce(projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence: Fence | undefined): void {
    const created: string[] = [];
    try {
      // IMMEDIATE: the commit reads documents before writing them, so it takes the write lock first
      // rather than fail to upgrade a read lock while another connection writes.
      this.commitTransaction.immediate(projection, checkpoint, writes, created, fence);
    } catch (error) {
      // The rollback undid the CREATE TABLEs too.
      created.forEach((table) => this.forget(table));
      throw error;
    }
  }

  /** Runs inside the transaction: any throw rolls back every write and the checkpoint. */
  private apply(projection: string, checkpoint: Position, writes: readonly ReadWrite[], created: string[]): void {
    const pending = this.fold(
      writes,
      (table, id) => this.docStatements(table).select.get(id) as StoredRow,
      (table) => {
        if (this.tables.has(table)) return;
        this.db.exec(createTableSql(table));
        this.tables.add(table);
        created.push(table);
      },
    );
    for (const [table, docs] of pending) {
      const upsert = this.docStatements(table).upsert;
      for (const [id, entry] of docs) if (entry.dirty) upsert.run(id, entry.pos, JSON.stringify(entry.doc));
    }
    this.stmt(
      '',
      'INSERT INTO checkpoints (projection, commit_pos, prepare_pos) VALUES (?, ?, ?) ON CONFLICT (projection) DO UPDATE SET commit_pos = excluded.commit_pos, prepare_pos = excluded.prepare_pos',
    ).run(projection, checkpoint.commit, checkpoint.prepare);
    const wrote = this.stmt('', 'INSERT OR IGNORE INTO checkpoint_collections (collection, projection) VALUES (?, ?)');
    for (const collection of new Set(writes.map((w) => w.collection))) wrote.run(collection, projection);
  }

  /**
   * The documents the writes make, each read (`load`) and parsed at most once and changed in
   * place. `onTable` is told of each table before its first document is loaded.
   */
  private fold(writes: readonly ReadWrite[], load: (table: string, id: string) => StoredRow, onTable?: (table: string) => void): Map<string, Map<string, Pending>> {
    const pending = new Map<string, Map<string, Pending>>();
    // The writes of one event share its position: its key is made once.
    let keyOf: Position | undefined;
    let key = '';
    for (const write of writes) {
      const table = tableName(write.collection);
      let docs = pending.get(table);
      if (!docs) {
        onTable?.(table);
        pending.set(table, (docs = new Map()));
      }
      let entry = docs.get(write.id);
      if (!entry) {
        const row = load(table, write.id);
        entry = { pos: row?.pos ?? null, text: row?.doc ?? null, doc: undefined, dirty: false };
        docs.set(write.id, entry);
      }
      if (write.position !== keyOf) key = positionKey((keyOf = write.position));
      if (entry.pos !== null && key <= entry.pos) continue;
      // A put replaces the document, so the stored one need not be parsed.
      const current = write.op === 'put' ? undefined : (entry.doc ?? (entry.text === null ? undefined : (JSON.parse(entry.text) as Doc)));
      entry.doc = applyWrite(current, write);
      entry.text = null;
      entry.pos = key;
      entry.dirty = true;
    }
    return pending;
  }

  /**
   * A commit through the commit thread. The documents are folded and stringified here, before
   * anything is sent, so that a write that cannot be applied fails alone and changes nothing. A
   * document sent but not yet stored is read from what was sent, never from the table.
   */
  private commitInThread(thread: CommitThreadClient, projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence: Fence | undefined): Promise<void> {
    // Whatever fails below, nothing was sent and the thread goes on; but this projection's next
    // commit would skip these events, so it too waits until the checkpoint is read again.
    const refuse = (error: unknown) => {
      this.refused.add(projection);
      return Promise.reject(error);
    };
    try {
      if (this.closed) throw new ReadModelUnavailableError('the read-model store is closed');
      checkCommit(projection, checkpoint, writes);
      if (fence) checkLease(fence.lease, fence.holder);
    } catch (error) {
      return refuse(error);
    }
    if (this.refused.has(projection)) return refuse(unavailable(`an earlier commit of ${projection} failed: read its checkpoint and commit again from there`));
    if (this.threadFailure !== undefined) {
      // The commits sent after a failed one fail too, and their documents are still among those
      // sent: a commit folded from them now would store what never was. Once all are answered,
      // documents are read from the table again.
      if (thread.inFlight > 0) return refuse(this.threadError(this.threadFailure, fence));
      this.threadFailure = undefined;
      this.sent.clear();
      thread.reset();
    }
    // All of it synchronously, before the caller can make the next commit: that one must find
    // this one's documents among those sent.
    const rows: string[] = [];
    try {
      // One read transaction for the documents the fold reads, not one per document.
      const pending = this.snapshot(() => this.fold(writes, (table, id) => this.sent.get(table)?.get(id) ?? this.storedRowIfWritten(table, id)));
      for (const [table, docs] of pending) {
        for (const [id, entry] of docs) if (entry.dirty) rows.push(table, id, entry.pos!, JSON.stringify(entry.doc));
      }
    } catch (error) {
      return refuse(storageError(error));
    }
    const batch = thread.nextBatch();
    for (let i = 0; i < rows.length; i += 4) {
      this.written.add(rows[i]!, rows[i + 1]!);
      let sent = this.sent.get(rows[i]!);
      if (!sent) this.sent.set(rows[i]!, (sent = new Map()));
      sent.set(rows[i + 1]!, { pos: rows[i + 2]!, doc: rows[i + 3]!, batch });
    }
    const collections = [...new Set(writes.map((w) => w.collection))];
    // Stored, or the store has failed for good: either way the table (or nothing) has the answer.
    const forgetSent = () => {
      for (let i = 0; i < rows.length; i += 4) {
        const sent = this.sent.get(rows[i]!);
        if (sent?.get(rows[i + 1]!)?.batch === batch) sent.delete(rows[i + 1]!);
      }
    };
    const sentFence = fence ? { lease: fence.lease, holder: fence.holder, token: fence.token } : undefined;
    return thread
      .send({ batch, projection, commit: checkpoint.commit, prepare: checkpoint.prepare, rows, collections, ...(sentFence ? { fence: sentFence } : {}) })
      .catch((error: unknown) => {
        this.threadFailure ??= error;
        throw this.threadError(error, fence);
      })
      .finally(forgetSent);
  }

  /** A commit thread's failure as this commit's caller must see it: a lease lost is LeaseLostError. */
  private threadError(error: unknown, fence: Fence | undefined): unknown {
    if ((error as { code?: unknown }).code !== LEASE_LOST) return error;
    return fence ? new LeaseLostError(fence) : unavailable('an earlier commit lost its lease', error);
  }

  /**
   * A document as stored, when it may be: in a table that was empty when this store first
   * committed to it, only what this store wrote is there (it is the only writer, see commitThread).
   */
  private storedRowIfWritten(table: string, id: string): StoredRow {
    if (this.othersMayWrite) return this.storedRow(table, id);
    let empty = this.startedEmpty.get(table);
    if (empty === undefined) {
      empty = this.read(table, true, () => this.stmt(table, `SELECT 1 FROM "${table}" LIMIT 1`).get() === undefined);
      this.startedEmpty.set(table, empty);
    }
    return empty && !this.written.mightHave(table, id) ? undefined : this.storedRow(table, id);
  }

  /** A document as stored, read outside any write transaction. */
  private storedRow(table: string, id: string): StoredRow {
    return this.read(table, undefined, () => this.docStatements(table).select.get(id) as StoredRow);
  }

  private forgetCheckpoint(projection: string): void {
    this.stmt('', 'DELETE FROM checkpoints WHERE projection = ?').run(projection);
    this.stmt('', 'DELETE FROM checkpoint_collections WHERE projection = ?').run(projection);
  }

  /** The names of the table's indexes (read each time: another connection may have added one). */
  private indexNames(table: string): string[] {
    return this.stmt('', INDEX_NAMES_SQL).pluck().all(table) as string[];
  }

  /** A read of a table that may not exist (yet, or any more): `empty` then, without creating it. */
  private read<T>(table: string, empty: T, query: () => T): T {
    if (!this.tables.has(table)) {
      const exists = this.stmt('', TABLE_EXISTS_SQL).get(table) !== undefined;
      if (!exists) return empty;
      this.tables.add(table);
    }
    try {
      return query();
    } catch (error) {
      if (!isNoSuchTable(error)) throw error;
      this.forget(table);
      return empty;
    }
  }

  /** The two statements a commit runs per document, without building their SQL text per write. */
  private docStatements(table: string): DocStatements {
    let statements = this.docStatementCache.get(table);
    if (!statements) {
      statements = {
        select: this.stmt(table, `SELECT pos, doc FROM "${table}" WHERE id = ?`),
        upsert: this.stmt(table, `INSERT INTO "${table}" (id, pos, doc) VALUES (?, ?, ?) ON CONFLICT (id) DO UPDATE SET pos = excluded.pos, doc = excluded.doc`),
      };
      this.docStatementCache.set(table, statements);
    }
    return statements;
  }

  /** Prepared statements of one table ('' for the fixed tables). */
  private stmt(table: string, sql: string): Database.Statement {
    let cache = this.statements.get(table);
    if (!cache) this.statements.set(table, (cache = new Map()));
    let statement = cache.get(sql);
    if (!statement) {
      if (cache.size >= MAX_STATEMENTS_PER_TABLE) cache.clear();
      statement = this.db.prepare(sql);
      cache.set(sql, statement);
    }
    return statement;
  }

  private forget(table: string): void {
    this.tables.delete(table);
    this.statements.delete(table);
    this.docStatementCache.delete(table);
  }

  private forgetAll(): void {
    this.tables.clear();
    this.statements.clear();
    this.docStatementCache.clear();
  }

  /**
   * better-sqlite3 is synchronous; this keeps the port's promises and maps storage failures. The
   * connection waits for no lock in place: an operation that finds another connection's lock (its
   * commit, for a few ms; another process's long transaction, an operator's shell, for longer) is
   * tried again between turns of the event loop, up to `budgetMs` in all (src/sqlite-busy.ts).
   */
  private async run<T>(body: () => T, budgetMs = this.busyTimeoutMs): Promise<T> {
    try {
      return await retryWhileBusy(() => {
        if (this.closed) throw new ReadModelUnavailableError('the read-model store is closed');
        return body();
      }, budgetMs);
    } catch (error) {
      throw storageError(error);
    }
  }
}

function checkCommit(projection: string, checkpoint: Position, writes: readonly ReadWrite[]): void {
  checkProjection(projection);
  checkPosition(checkpoint, 'checkpoint');
  writes.forEach(checkWrite);
}

const unavailable = (message: string, cause?: unknown) => new ReadModelUnavailableError(`the read-model store failed: ${message}`, { cause });

/** A failure one of the store's threads reports: one that means the store cannot serve now is ReadModelUnavailableError. */
const threadFailure = ({ message, code }: { readonly message: string; readonly code?: string }): Error =>
  code && UNAVAILABLE.test(code) ? unavailable(message) : Object.assign(new Error(message), code ? { code } : {});

/** A failure of SQLite that means the store cannot serve now becomes ReadModelUnavailableError. */
function storageError(error: unknown): unknown {
  return error instanceof Database.SqliteError && UNAVAILABLE.test(error.code) ? unavailable(error.message, error) : error;
}

function toReadDoc(id: string, text: string): ReadDoc {
  return { _id: id, ...(JSON.parse(text) as Doc) };
}

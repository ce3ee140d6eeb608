import Database from 'better-sqlite3';
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirectory } from '../make-directory.js';
import { LOCK_WAIT_MS, busyError, isBusy, openingWhileBusy, retryWhileBusy } from '../sqlite-busy.js';
import { type DataKeyStore, KeyIdTakenError, type RewrapCounts, type StoredKey, type WrappedEntry, checkKeyIds } from './key-store.js';

// The embedded key store: its own SQLite file, keys.db in the data dir, never the event store's.
// What makes a destroy real on disk: secure_delete overwrites a deleted row's bytes in the page
// with zeros; the page's earlier image stays in the WAL until a checkpoint copies the WAL back, so
// a destroy ends with a TRUNCATE checkpoint, which also empties the WAL file. synchronous=FULL: a
// key is on disk before the events that need it are written.
// The connection waits for no lock in place once open (src/sqlite-busy.ts): a serving process
// writes here from its main thread (a batch of keys for new leads, the keys an erasure destroys),
// and another process holding keys.db's lock must not stop its event loop meanwhile.

export const KEYS_FILE = 'keys.db';

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS data_keys (id TEXT PRIMARY KEY, wrapped BLOB NOT NULL, created_at INTEGER NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS destroyed_keys (id TEXT PRIMARY KEY, destroyed_at INTEGER NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS secrets (name TEXT PRIMARY KEY, value BLOB NOT NULL) WITHOUT ROWID;
`;

/** Rows of keys a statement stores. */
const INSERT_ROWS = 64;
/** Rows of keys read at a time while they are wrapped anew. */
const REWRAP_ROWS = 4096;

export class EmbeddedKeyStore implements DataKeyStore {
  private readonly inserts = new Map<number, Database.Statement>();
  private readonly destroyedBetween: Database.Statement<[string, string], { id: string }>;
  private readonly probeRead: Database.Statement;
  private readonly probeWrite: Database.Transaction<() => void>;

  private constructor(
    private readonly db: Database.Database,
    private readonly busyTimeoutMs: number,
  ) {
    this.destroyedBetween = db.prepare('SELECT id FROM destroyed_keys WHERE id BETWEEN ? AND ?');
    this.probeRead = db.prepare('SELECT 1 FROM secrets LIMIT 1');
    this.probeWrite = db.transaction(() => {});
  }

  /** `busyTimeoutMs`: how long an operation waits for another connection's lock before it fails (SQLITE_BUSY). */
  static open(dataDir: string, options: { readonly busyTimeoutMs?: number } = {}): EmbeddedKeyStore {
    const busyTimeoutMs = Math.max(0, options.busyTimeoutMs ?? LOCK_WAIT_MS);
    makeDirectory(dataDir);
    const file = join(dataDir, KEYS_FILE);
    // Made owner-only before SQLite first opens it: its -wal and -shm files take the same mode. A
    // file that exists is not opened here: closing any descriptor of a file drops every POSIX lock
    // the process holds on it, so a second open in one process (the background thread's) released
    // the first connection's locks, and another program's sqlite3 then deleted the WAL under it.
    try {
      closeSync(openSync(file, 'wx', 0o600));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const db = new Database(file);
    try {
      // Opened (its schema made) waiting in place, as nothing is served yet; from then on a lock is
      // waited for between turns of the event loop (see run).
      db.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
      db.pragma('secure_delete = ON');
      openingWhileBusy(() => {
        db.pragma('journal_mode = WAL');
        db.pragma('synchronous = FULL');
        db.exec(SCHEMA);
      }, busyTimeoutMs);
      db.pragma('busy_timeout = 0');
    } catch (error) {
      db.close();
      throw error;
    }
    return new EmbeddedKeyStore(db, busyTimeoutMs);
  }

  async create(keys: readonly StoredKey[]): Promise<void> {
    checkKeyIds(keys.map((k) => k.id));
    if (keys.length === 0) return;
    try {
      await this.run(() => this.db.transaction(() => {
        const now = Date.now();
        // Many rows a statement: one statement per row was most of a key's cost here.
        for (let at = 0; at < keys.length; at += INSERT_ROWS) {
          const rows = keys.slice(at, at + INSERT_ROWS);
          const values: unknown[] = [];
          for (const key of rows) values.push(key.id, key.wrapped, now);
          this.insertRows(rows.length).run(values);
        }
        // A destroyed id is never stored again. The pool's ids for a batch are neighbours, so the
        // tombstones between its first and last id are a page or two of their index, not a page per id.
        const ids = new Set(keys.map((k) => k.id));
        const sorted = [...ids].sort();
        const destroyed = this.destroyedBetween.all(sorted[0]!, sorted[sorted.length - 1]!).filter((row) => ids.has(row.id));
        if (destroyed.length > 0) throw new KeyIdTakenError(destroyed.map((row) => row.id));
      }).immediate());
    } catch (error) {
      if ((error as { code?: unknown }).code !== 'SQLITE_CONSTRAINT_PRIMARYKEY') throw error;
      // Rolled back: the ids already stored are the ones the batch clashed with.
      const held = this.db.prepare<[string], { id: string }>('SELECT id FROM data_keys WHERE id IN (SELECT value FROM json_each(?))');
      throw new KeyIdTakenError((await this.run(() => held.all(JSON.stringify(keys.map((k) => k.id))))).map((row) => row.id));
    }
  }

  private insertRows(count: number): Database.Statement {
    let statement = this.inserts.get(count);
    if (!statement) {
      statement = this.db.prepare(`INSERT INTO data_keys (id, wrapped, created_at) VALUES ${Array.from({ length: count }, () => '(?, ?, ?)').join(', ')}`);
      this.inserts.set(count, statement);
    }
    return statement;
  }

  async fetch(ids: readonly string[]): Promise<Map<string, Buffer | null>> {
    checkKeyIds(ids);
    const json = JSON.stringify(ids);
    const found = new Map<string, Buffer | null>();
    const read = this.db.transaction(() => {
      found.clear();
      for (const row of this.db.prepare<[string], { id: string; wrapped: Buffer }>('SELECT id, wrapped FROM data_keys WHERE id IN (SELECT value FROM json_each(?))').all(json)) {
        found.set(row.id, row.wrapped);
      }
      for (const row of this.db.prepare<[string], { id: string }>('SELECT id FROM destroyed_keys WHERE id IN (SELECT value FROM json_each(?))').all(json)) {
        found.set(row.id, null);
      }
    });
    await this.run(() => read.deferred());
    return found;
  }

  async destroy(ids: readonly string[]): Promise<void> {
    checkKeyIds(ids);
    const json = JSON.stringify(ids);
    await this.run(() =>
      this.db.transaction(() => {
        this.db.prepare('DELETE FROM data_keys WHERE id IN (SELECT value FROM json_each(?))').run(json);
        this.db.prepare('INSERT OR IGNORE INTO destroyed_keys (id, destroyed_at) SELECT value, ? FROM json_each(?)').run(Date.now(), json);
      }).immediate(),
    );
    // Copies the zeroed pages into keys.db and empties the WAL, where the keys' old pages were. It
    // waits for other connections' readers to finish and for the write lock, as long as a write
    // would; a reader that keeps it from finishing longer leaves it to the next destroy (or to
    // SQLite's own checkpoints). The keys are destroyed either way: the rows are gone.
    await this.run(() => {
      const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
      if (result?.busy) throw busyError('the checkpoint of keys.db waits for another connection');
    }).catch((error: unknown) => {
      if (!isBusy(error)) throw error;
    });
  }

  async secret(name: string, candidate: Buffer): Promise<Buffer> {
    // A secret, once made, never changes: read, it needs no write lock, which another process (a
    // running service making data keys, an operator's shell) may hold for a while.
    const made = await this.run(() => this.db.prepare<[string], { value: Buffer }>('SELECT value FROM secrets WHERE name = ?').get(name));
    if (made) return made.value;
    const row = await this.run(() =>
      this.db.transaction(() => {
        this.db.prepare('INSERT OR IGNORE INTO secrets (name, value) VALUES (?, ?)').run(name, candidate);
        return this.db.prepare<[string], { value: Buffer }>('SELECT value FROM secrets WHERE name = ?').get(name);
      }).immediate(),
    );
    if (!row) throw new Error(`the secret ${name} could not be stored`);
    return row.value;
  }

  async probe(write: boolean): Promise<void> {
    // An empty IMMEDIATE transaction takes the write lock and commits nothing: no byte is written.
    await this.run(() => (write ? this.probeWrite.immediate() : this.probeRead.get()));
  }

  async rewrap(rewrap: (entry: WrappedEntry) => Buffer | undefined): Promise<RewrapCounts> {
    const page = this.db.prepare<[string], { id: string; wrapped: Buffer }>('SELECT id, wrapped FROM data_keys WHERE id > ? ORDER BY id LIMIT ' + REWRAP_ROWS);
    const setKey = this.db.prepare('UPDATE data_keys SET wrapped = ? WHERE id = ?');
    const setSecret = this.db.prepare('UPDATE secrets SET value = ? WHERE name = ?');
    // One transaction: a run stopped part-way (killed, a key that opens with neither master key)
    // leaves every key as it was, under the old master key.
    const counts = await this.run(() =>
      this.db.transaction(() => {
        let dataKeys = 0;
        let secrets = 0;
        for (let after = ''; ; ) {
          const rows = page.all(after);
          for (const row of rows) {
            const wrapped = rewrap({ kind: 'data key', name: row.id, wrapped: row.wrapped });
            if (wrapped !== undefined) dataKeys += setKey.run(wrapped, row.id).changes;
          }
          if (rows.length < REWRAP_ROWS) break;
          after = rows[rows.length - 1]!.id;
        }
        for (const row of this.db.prepare<[], { name: string; value: Buffer }>('SELECT name, value FROM secrets ORDER BY name').all()) {
          const wrapped = rewrap({ kind: 'secret', name: row.name, wrapped: row.value });
          if (wrapped !== undefined) secrets += setSecret.run(wrapped, row.name).changes;
        }
        return { dataKeys, secrets };
      }).immediate(),
    );
    if (counts.dataKeys + counts.secrets === 0) return counts;
    // The old wrapping must leave the disk: secure_delete zeroes what the updates freed, the
    // checkpoint copies the new pages over the old ones and empties the WAL (which held older
    // images of those pages), and VACUUM writes the file afresh, without its free pages. Every
    // instance is stopped for a rotation, so a reader in the way is an error, not a reason to wait.
    const checkpoint = () =>
      this.run(() => {
        const [result] = this.db.pragma('wal_checkpoint(TRUNCATE)') as Array<{ busy: number }>;
        if (result?.busy) throw busyError('the checkpoint of keys.db waits for another connection');
      });
    await checkpoint();
    await this.run(() => this.db.exec('VACUUM'));
    await checkpoint();
    return counts;
  }

  async close(): Promise<void> {
    if (this.db.open) this.db.close();
  }

  /**
   * Runs a statement or transaction of this connection, which waits for no lock in place: one that
   * finds another connection's lock is tried again between turns of the event loop, for up to the
   * store's busy timeout; then its SQLITE_BUSY is thrown, and the post or erasure that needed it
   * answers 503 (see data-keys.ts).
   */
  private run<T>(body: () => T): Promise<T> {
    return retryWhileBusy(body, this.busyTimeoutMs);
  }
}

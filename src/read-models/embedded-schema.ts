import Database from 'better-sqlite3';
import { openingWhileBusy } from '../sqlite-busy.js';
import { checkCollection } from './validate.js';

// The read models live in their own SQLite file beside the events: one table per collection, made
// on first use, plus each projection's checkpoint. `checkpoint_collections` records which
// collections a projection has written, so that dropping a collection also forgets the checkpoints
// of the projections that filled it, and a rebuild starts from the first event. `leases` says which
// process does what only one may do at a time (see ReadModelStore.acquireLease); `expires_at` is
// milliseconds on the clock of the machine whose processes share the file.
const DDL = `
CREATE TABLE IF NOT EXISTS checkpoints (
  projection  TEXT PRIMARY KEY,
  commit_pos  INTEGER NOT NULL,
  prepare_pos INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS checkpoint_collections (
  collection TEXT NOT NULL,
  projection TEXT NOT NULL,
  PRIMARY KEY (collection, projection)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leases (
  name       TEXT PRIMARY KEY,
  holder     TEXT NOT NULL,
  token      INTEGER NOT NULL,
  expires_at INTEGER NOT NULL
);
`;

export const READ_MODELS_FILE = 'readmodels.db';

/** The code of a fenced commit refused on the commit thread: its lease has another holder, or ran out. */
export const LEASE_LOST = 'LEASE_LOST';

/** A lease's row, as `SELECT_LEASE` reads it. */
export interface LeaseRow {
  holder: string;
  token: number;
  expires_at: number;
}

export const SELECT_LEASE = 'SELECT holder, token, expires_at FROM leases WHERE name = ?';

/**
 * Whether a fenced commit may be made: its holder still holds the lease with its token, unexpired.
 * Checked inside the commit's own transaction, on whichever connection makes it.
 */
export function fenceHolds(row: LeaseRow | undefined, fence: { readonly holder: string; readonly token: number }, now: number): boolean {
  return row !== undefined && row.holder === fence.holder && row.token === fence.token && row.expires_at > now;
}

const TABLES = new Map<string, string>();
/** The table of a collection; the name is checked, since it is spliced into SQL. Remembered: a rebuild asks for a few names at every write. */
export function tableName(collection: string): string {
  let table = TABLES.get(collection);
  if (table === undefined) {
    table = `rm_${checkCollection(collection)}`;
    if (TABLES.size < 10_000) TABLES.set(collection, table);
  }
  return table;
}

/** `pos` is the positionKey of the last event applied to the document. */
export const createTableSql = (table: string): string =>
  `CREATE TABLE IF NOT EXISTS "${table}" (id TEXT PRIMARY KEY, pos TEXT NOT NULL, doc TEXT NOT NULL)`;

/**
 * WAL lets readers run beside the writer. synchronous=NORMAL may lose the last commits on a power
 * cut (never on a process crash) but never corrupts the file; that is fine here because read
 * models are derived: a lost commit leaves the checkpoint behind with it, and the projection
 * replays those events. busy_timeout makes writers from several connections queue.
 */
export function openReadModelsDatabase(file: string, busyTimeoutMs: number, cacheMiB?: number): Database.Database {
  const db = new Database(file);
  try {
    db.pragma(`busy_timeout = ${Math.max(0, Math.trunc(busyTimeoutMs))}`);
    if (cacheMiB !== undefined) db.pragma(`cache_size = ${-Math.max(1, Math.trunc(cacheMiB)) * 1024}`);
    openingWhileBusy(() => {
      db.pragma('journal_mode = WAL');
      db.pragma('synchronous = NORMAL');
      db.exec(DDL);
    }, busyTimeoutMs);
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

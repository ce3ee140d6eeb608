import Database from 'better-sqlite3';

// One SQLite file holds every stream. Each append is one row of `commits` holding its events as a
// JSON array, so an append costs one row and one index entry whatever its size, and its events are
// atomic by construction. `streams` keeps each stream's last revision so that an expected-revision
// check is one indexed lookup. `commits.position` (the rowid, never reused: rows are never deleted)
// is the `$all` order; an event's position is {commit: its row, prepare: its index in the row}.
const DDL = `
CREATE TABLE IF NOT EXISTS streams (
  id       INTEGER PRIMARY KEY,
  name     TEXT NOT NULL UNIQUE,
  revision INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS commits (
  position       INTEGER PRIMARY KEY,
  stream_id      INTEGER NOT NULL REFERENCES streams(id),
  first_revision INTEGER NOT NULL,
  last_revision  INTEGER NOT NULL,
  events         TEXT NOT NULL,
  created        INTEGER NOT NULL,
  -- Revision ranges never overlap, so the last revision is as unique as the first, and it is what
  -- a read from revision r seeks: the first commit whose last revision is at least r.
  UNIQUE (stream_id, last_revision)
);
`;

export const EVENTS_FILE = 'events.db';

/**
 * Opens the events database with the settings every connection needs. WAL lets readers (this
 * process or the CLI) run beside the writer; synchronous=FULL makes a commit durable before it
 * returns; busy_timeout makes writers from several processes queue instead of failing.
 */
export function openEventsDatabase(file: string, options: { readonly?: boolean } = {}): Database.Database {
  const db = new Database(file, { fileMustExist: options.readonly === true });
  db.pragma('busy_timeout = 10000');
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  // 8 MiB per connection: reads are of the newest commits and of single streams by index, and the OS
  // caches the file anyway. 64 MiB on the reader and the writer made the service's RSS grow with the store.
  db.pragma('cache_size = -8192');
  db.pragma('temp_store = MEMORY');
  if (!options.readonly) db.exec(DDL);
  return db;
}

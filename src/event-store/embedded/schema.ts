import Database from 'better-sqlite3';
import { openingWhileBusy } from '../../sqlite-busy.js';

// One SQLite file holds every stream. Each append is one row of `commits` holding its events as a
// JSON array, so its events are atomic by construction. `commits.position` (the rowid, never
// reused: rows are never deleted) is the `$all` order; an event's position is {commit: its row,
// prepare: its index in the row}.
//
// Layout 2 keeps an append to two B-trees: the commit row, and its stream's row (keyed by name,
// WITHOUT ROWID, so there is no separate name index). A stream's commits are linked newest to
// oldest through `previous`, which replaces layout 1's (stream_id, last_revision) index: streams
// are read backwards from their newest commit only as far as the revision asked for. Layout 1 had
// four B-trees per new stream (stream rowid, name index, commit rowid, commit index); removing two
// cuts the WAL pages each commit writes.
const LAYOUT = 2;

const CREATE_STREAMS = (table: string) => `
CREATE TABLE ${table} (
  name        TEXT PRIMARY KEY,
  revision    INTEGER NOT NULL,
  last_commit INTEGER NOT NULL
) WITHOUT ROWID`;

const CREATE_COMMITS = (table: string) => `
CREATE TABLE ${table} (
  position       INTEGER PRIMARY KEY,
  stream         TEXT NOT NULL,
  first_revision INTEGER NOT NULL,
  last_revision  INTEGER NOT NULL,
  previous       INTEGER,
  events         TEXT NOT NULL,
  created        INTEGER NOT NULL
)`;

export const EVENTS_FILE = 'events.db';

/**
 * Opens the events database with the settings every connection needs, creating or upgrading the
 * schema. WAL lets readers (this process or the CLI) run beside the writer; synchronous=FULL makes
 * a commit durable before it returns; busy_timeout makes writers from several processes queue
 * instead of failing. It never holds up a serving event loop: the writer thread waits on it, off
 * the main thread; the main thread's own connection waits on it only while opening (the schema,
 * before anything is served) and afterwards only reads, which in WAL mode wait for no writer and
 * no checkpoint (only for another connection rebuilding the WAL index after a crash); the
 * rewrites of rewrite.ts run with every instance stopped.
 */
export function openEventsDatabase(file: string): Database.Database {
  const db = new Database(file);
  try {
    db.pragma('busy_timeout = 10000');
    openingWhileBusy(() => db.pragma('journal_mode = WAL'));
    db.pragma('synchronous = FULL');
    // 8 MiB per connection: reads are of the newest commits and of single streams by key, and the OS
    // caches the file anyway. 64 MiB on the reader and the writer made the service's RSS grow with the store.
    db.pragma('cache_size = -8192');
    db.pragma('temp_store = MEMORY');
    if (db.pragma('user_version', { simple: true }) !== LAYOUT) openingWhileBusy(() => prepareLayout(db));
    return db;
  } catch (error) {
    db.close();
    throw error;
  }
}

/** Creates the tables, or rewrites a layout-1 file (from before 2026-11-22) into layout 2, once. */
function prepareLayout(db: Database.Database): void {
  db.transaction(() => {
    // Checked again under the write lock: another process may have just done it.
    const version = db.pragma('user_version', { simple: true });
    if (version === LAYOUT) return;
    if (version !== 0) throw new Error(`events.db has layout ${String(version)}, newer than this leadpost (${LAYOUT}): upgrade leadpost`);
    const tables = db.prepare<[], string>("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('streams', 'commits')").pluck().all();
    if (tables.length === 0) {
      db.exec(`${CREATE_STREAMS('streams')}; ${CREATE_COMMITS('commits')};`);
    } else {
      migrateFromLayout1(db);
    }
    db.pragma(`user_version = ${LAYOUT}`);
  }).immediate();
}

/**
 * Layout 1: streams(id, name UNIQUE, revision) and commits(position, stream_id, first_revision,
 * last_revision, events, created, UNIQUE(stream_id, last_revision)). Positions, revisions and
 * event texts are kept as they were, so checkpoints of read models stay valid.
 */
function migrateFromLayout1(db: Database.Database): void {
  db.exec(`
    ${CREATE_STREAMS('streams_v2')};
    ${CREATE_COMMITS('commits_v2')};
    INSERT INTO commits_v2 (position, stream, first_revision, last_revision, previous, events, created)
      SELECT c.position, s.name, c.first_revision, c.last_revision,
             LAG(c.position) OVER (PARTITION BY c.stream_id ORDER BY c.position), c.events, c.created
      FROM commits c JOIN streams s ON s.id = c.stream_id ORDER BY c.position;
    INSERT INTO streams_v2 (name, revision, last_commit)
      SELECT s.name, s.revision, last.position
      FROM streams s JOIN (SELECT stream_id, max(position) AS position FROM commits GROUP BY stream_id) last ON last.stream_id = s.id;
    DROP TABLE commits;
    DROP TABLE streams;
    ALTER TABLE commits_v2 RENAME TO commits;
    ALTER TABLE streams_v2 RENAME TO streams;
  `);
}

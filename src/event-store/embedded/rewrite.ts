import { openEventsDatabase } from './schema.js';
import type { StoredEvent } from './protocol.js';

// Rewriting stored events in place, which nothing in the service does: events are facts and are
// only ever appended. The one use is sealing the personal data that releases before encryption
// wrote in clear (src/personal-data/clear-leads.ts): the events stay the same facts, read the same
// through the codec, at the same positions and revisions, with the same ids and times (so every
// checkpoint stays valid), but no longer hold a consumer's fields in clear.

/** A commit as a rewrite sees it. */
export interface StoredCommit {
  readonly position: number;
  readonly stream: string;
  readonly firstRevision: number;
  readonly events: StoredEvent[];
}

export interface CommitSelection {
  /** The streams, as an SQLite GLOB of their names (`lead-[0-9]*`). */
  readonly streams: string;
  /** Only commits whose stored JSON holds this text (a type in quotes: `"LeadReceived"`). */
  readonly holding: string;
}

/**
 * Gives each batch of selected commits, in position order, to `rewrite`, and stores the events it
 * returns for a commit in its place, the batch in one transaction once `rewrite` has answered for
 * all of it (so whatever it made durable first, such as data keys, is on disk before the events
 * that need it). Afterwards the file is rebuilt (VACUUM) and its WAL emptied, so that no byte of
 * an old form is left anywhere in it: not in the space the rewritten rows freed, nor in pages
 * freed long ago (the rewrite of layout 1 dropped whole tables).
 * Returns the number of commits rewritten.
 */
export async function rewriteCommits(
  file: string,
  selection: CommitSelection,
  rewrite: (commits: readonly StoredCommit[]) => Promise<ReadonlyMap<number, StoredEvent[]>>,
  batchSize = 500,
): Promise<number> {
  const db = openEventsDatabase(file);
  try {
    const select = db
      .prepare<[number, string, string, number], { position: number; stream: string; first_revision: number; events: string }>(
        'SELECT position, stream, first_revision, events FROM commits WHERE position > ? AND stream GLOB ? AND instr(events, ?) > 0 ORDER BY position LIMIT ?',
      );
    const update = db.prepare<[string, number]>('UPDATE commits SET events = ? WHERE position = ?');
    let after = -1;
    let rewritten = 0;
    for (;;) {
      const rows = select.all(after, selection.streams, selection.holding, batchSize);
      if (rows.length === 0) break;
      after = rows[rows.length - 1]!.position;
      const commits = rows.map((row) => ({ position: row.position, stream: row.stream, firstRevision: row.first_revision, events: JSON.parse(row.events) as StoredEvent[] }));
      const replaced = await rewrite(commits);
      db.transaction(() => {
        for (const [position, events] of replaced) update.run(JSON.stringify(events), position);
      }).immediate();
      rewritten += replaced.size;
    }
    // VACUUM copies the database into a temporary one: on disk, not in memory (this connection keeps temp_store = MEMORY for its reads).
    db.pragma('temp_store = FILE');
    db.exec('VACUUM');
    db.pragma('wal_checkpoint(TRUNCATE)');
    return rewritten;
  } finally {
    db.close();
  }
}

/**
 * The streams named by `streams` (an SQLite GLOB) whose every commit is older than `before` (a
 * commit position): those an older release wrote under names this one no longer writes to.
 */
export function streamsOlderThan(file: string, streams: string, before: number): string[] {
  const db = openEventsDatabase(file);
  try {
    return db.prepare<[string, number], string>('SELECT name FROM streams WHERE name GLOB ? AND last_commit < ? ORDER BY name').pluck().all(streams, before);
  } finally {
    db.close();
  }
}

/**
 * Gives streams new names: their row in `streams` and each of their commits, found newest first
 * through `previous` as a read finds them. Positions, revisions and events stay. A stream whose
 * new name is taken, or that is gone, is left as it is. A batch of renames is one transaction.
 * Returns how many were renamed. (The caller vacuums the file after: see rewriteCommits.)
 */
export function renameStreams(file: string, renames: ReadonlyArray<readonly [from: string, to: string]>, batchSize = 1000): number {
  const db = openEventsDatabase(file);
  try {
    const lastCommit = db.prepare<[string], number>('SELECT last_commit FROM streams WHERE name = ?').pluck();
    const previous = db.prepare<[number], number | null>('SELECT previous FROM commits WHERE position = ?').pluck();
    const renameStream = db.prepare<[string, string]>('UPDATE streams SET name = ? WHERE name = ?');
    const renameCommit = db.prepare<[string, number]>('UPDATE commits SET stream = ? WHERE position = ?');
    let renamed = 0;
    for (let at = 0; at < renames.length; at += batchSize) {
      db.transaction(() => {
        for (const [from, to] of renames.slice(at, at + batchSize)) {
          const last = lastCommit.get(from);
          if (last === undefined || lastCommit.get(to) !== undefined) continue;
          for (let position: number | null | undefined = last; position !== null && position !== undefined; position = previous.get(position)) renameCommit.run(to, position);
          renameStream.run(to, from);
          renamed++;
        }
      }).immediate();
    }
    return renamed;
  } finally {
    db.close();
  }
}


import Database from 'better-sqlite3';
import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { expectedRevisionMatches } from '../port.js';
import { type AppendOutcome, type AppendRequest, type WriteBatch, type WriterOptions, decodeBatch, encodeAnswer } from './protocol.js';
import { openEventsDatabase } from './schema.js';

// The writer runs on its own thread so that a commit's fsync never blocks the event loop that
// serves HTTP. Every batch the main thread sends is committed as one transaction (group commit):
// one fsync for all the appends that arrived while the previous batch was being written.

const options = workerData as WriterOptions;
const db = openEventsDatabase(options.file);
const selectStream = db.prepare<[string], { revision: number; last_commit: number }>('SELECT revision, last_commit FROM streams WHERE name = ?');
const selectRevision = db.prepare<[string], number>('SELECT revision FROM streams WHERE name = ?').pluck();
const insertNewStream = db.prepare<[string, number, number]>('INSERT INTO streams (name, revision, last_commit) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING');
const updateStream = db.prepare<[number, number, string]>('UPDATE streams SET revision = ?, last_commit = ? WHERE name = ?');
const insertCommit = db.prepare<[number, string, number, number, number | null, string, number]>(
  'INSERT INTO commits (position, stream, first_revision, last_revision, previous, events, created) VALUES (?, ?, ?, ?, ?, ?, ?)',
);
const selectHead = db.prepare<[], number | null>('SELECT max(position) FROM commits').pluck();

/**
 * The position the next commit of this transaction takes. Positions are given explicitly so that a
 * new stream's row can name its commit before the commit row exists; under the write lock nobody
 * else inserts, and rows are never deleted, so this is the rowid SQLite itself would have chosen.
 */
let nextPosition = 0;

/** An append to a stream that may exist; the group sends those that start a stream to appendNewStreams. */
function appendOne(request: AppendRequest): AppendOutcome {
  const stream = selectStream.get(request.stream);
  const actual = stream ? stream.revision : 'no_stream';
  if (!expectedRevisionMatches(request.expected, actual)) {
    return { ok: false, kind: 'wrong_expected_revision', actual };
  }
  const first = stream ? stream.revision + 1 : 0;
  const last = first + request.count - 1;
  if (request.count === 0) return { ok: true, revision: last, commit: -1 };
  const position = nextPosition++;
  if (stream) updateStream.run(last, position, request.stream);
  else insertNewStream.run(request.stream, last, position);
  insertCommit.run(position, request.stream, first, last, stream ? stream.last_commit : null, request.events, request.created);
  return { ok: true, revision: last, commit: position };
}

/**
 * Most appends start a stream (a lead, a contact claim, an idempotency key): inserting the name
 * straight away checks and claims it in one key search instead of a lookup and then an insert.
 */
function appendNewStream(request: AppendRequest): AppendOutcome {
  const last = request.count - 1;
  const inserted = insertNewStream.run(request.stream, last, nextPosition);
  if (inserted.changes === 0) return { ok: false, kind: 'wrong_expected_revision', actual: selectRevision.get(request.stream)! };
  const position = nextPosition++;
  insertCommit.run(position, request.stream, 0, last, null, request.events, request.created);
  return { ok: true, revision: last, commit: position };
}

const startsStream = (request: AppendRequest) => request.expected === 'no_stream' && request.count > 0;

// New streams of a group are written a run at a time, with one multi-row INSERT for their stream
// rows and one for their commits: per row, the calls into SQLite cost more than the inserts
// themselves, and a group's new streams are most of its appends (each post starts several).
const MAX_RUN = 32;
const runStatements = new Map<number, { streams: Database.Statement; commits: Database.Statement }>();

function runStatementsFor(size: number) {
  let statements = runStatements.get(size);
  if (!statements) {
    statements = {
      // No ON CONFLICT: a name that exists fails the whole statement, which SQLite backs out alone.
      streams: db.prepare(`INSERT INTO streams (name, revision, last_commit) VALUES ${Array(size).fill('(?, ?, ?)').join(', ')}`),
      commits: db.prepare(
        `INSERT INTO commits (position, stream, first_revision, last_revision, previous, events, created) VALUES ${Array(size).fill('(?, ?, ?, ?, NULL, ?, ?)').join(', ')}`,
      ),
    };
    runStatements.set(size, statements);
  }
  return statements;
}

/** Appends[from, to), each starting a new stream, into outcomes. */
function appendNewStreams(appends: readonly AppendRequest[], from: number, to: number, outcomes: AppendOutcome[]): void {
  if (to - from === 1) {
    outcomes[from] = appendNewStream(appends[from]!);
    return;
  }
  const first = nextPosition;
  const streamValues: unknown[] = [];
  const commitValues: unknown[] = [];
  for (let i = from; i < to; i++) {
    const request = appends[i]!;
    const position = first + i - from;
    streamValues.push(request.stream, request.count - 1, position);
    commitValues.push(position, request.stream, 0, request.count - 1, request.events, request.created);
  }
  const statements = runStatementsFor(to - from);
  try {
    statements.streams.run(streamValues);
  } catch (error) {
    if (!(error instanceof Database.SqliteError && error.code.startsWith('SQLITE_CONSTRAINT'))) throw error;
    // A stream of the run exists (or is named twice): one at a time, so that only those fail.
    for (let i = from; i < to; i++) outcomes[i] = appendNewStream(appends[i]!);
    return;
  }
  statements.commits.run(commitValues);
  nextPosition = first + (to - from);
  for (let i = from; i < to; i++) outcomes[i] = { ok: true, revision: appends[i]!.count - 1, commit: first + i - from };
}

const appendGroup = db.transaction((appends: readonly AppendRequest[]) => {
  nextPosition = (selectHead.get() ?? 0) + 1;
  const outcomes = new Array<AppendOutcome>(appends.length);
  let run = -1;
  for (let i = 0; i < appends.length; i++) {
    if (startsStream(appends[i]!)) {
      if (run < 0) run = i;
      if (i + 1 - run === MAX_RUN) {
        appendNewStreams(appends, run, i + 1, outcomes);
        run = -1;
      }
      continue;
    }
    // A run is written before the append after it, which may be to one of its streams.
    if (run >= 0) appendNewStreams(appends, run, i, outcomes);
    run = -1;
    outcomes[i] = appendOne(appends[i]!);
  }
  if (run >= 0) appendNewStreams(appends, run, appends.length, outcomes);
  return outcomes;
});

function unavailable(error: unknown): AppendOutcome {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : String(error);
  return typeof code === 'string' ? { ok: false, kind: 'unavailable', message, code } : { ok: false, kind: 'unavailable', message };
}

function write(appends: readonly AppendRequest[]): AppendOutcome[] {
  if (options.groupCommit) {
    try {
      return appendGroup.immediate(appends);
    } catch (error) {
      return appends.map(() => unavailable(error));
    }
  }
  return appends.map((append) => {
    try {
      return appendGroup.immediate([append])[0]!;
    } catch (error) {
      return unavailable(error);
    }
  });
}

const port = parentPort!;

/** Takes every batch already queued for this thread, so that they share one commit. */
function gatherGroup(first: WriteBatch): WriteBatch[] {
  const batches = [first];
  for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
    if (next.message === 'close') {
      closing = true;
      break;
    }
    batches.push(decodeBatch(next.message as unknown[]));
  }
  return batches;
}

let closing = false;

function close(): void {
  db.close();
  // Closing the port lets the thread end: nothing else keeps it alive.
  port.close();
}

port.on('message', (message: unknown[] | 'close') => {
  if (message === 'close') return close();
  const batches = gatherGroup(decodeBatch(message));
  const outcomes = write(batches.flatMap((batch) => batch.appends));
  // One answer for the whole group: a message per batch cost both threads a message each.
  port.postMessage(encodeAnswer(batches, outcomes));
  if (closing) close();
});
port.postMessage('ready');

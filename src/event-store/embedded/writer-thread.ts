import { parentPort, receiveMessageOnPort, workerData } from 'node:worker_threads';
import { expectedRevisionMatches } from '../port.js';
import type { AppendOutcome, AppendRequest, WriteBatch, WriteBatchResult, WriterOptions } from './protocol.js';
import { openEventsDatabase } from './schema.js';

// The writer runs on its own thread so that a commit's fsync never blocks the event loop that
// serves HTTP. Every batch the main thread sends is committed as one transaction (group commit):
// one fsync for all the appends that arrived while the previous batch was being written.

const options = workerData as WriterOptions;
const db = openEventsDatabase(options.file);
const selectStream = db.prepare<[string], { id: number; revision: number }>('SELECT id, revision FROM streams WHERE name = ?');
const insertStream = db.prepare<[string, number]>('INSERT INTO streams (name, revision) VALUES (?, ?)');
// Not RETURNING id: measured here, an INSERT … RETURNING through better-sqlite3 took twice as long
// per append as a plain insert that reports its changes and rowid.
const insertNewStream = db.prepare<[string, number]>('INSERT INTO streams (name, revision) VALUES (?, ?) ON CONFLICT (name) DO NOTHING');
const updateStream = db.prepare<[number, number]>('UPDATE streams SET revision = ? WHERE id = ?');
const insertCommit = db.prepare<[number, number, number, string, number]>(
  'INSERT INTO commits (stream_id, first_revision, last_revision, events, created) VALUES (?, ?, ?, ?, ?)',
);

function appendOne(request: AppendRequest): AppendOutcome {
  if (request.expected === 'no_stream' && request.count > 0) return appendNewStream(request);
  const stream = selectStream.get(request.stream);
  const actual = stream ? stream.revision : 'no_stream';
  if (!expectedRevisionMatches(request.expected, actual)) {
    return { ok: false, kind: 'wrong_expected_revision', actual };
  }
  const first = stream ? stream.revision + 1 : 0;
  const last = first + request.count - 1;
  if (request.count === 0) return { ok: true, revision: last, commit: -1 };
  let streamId: number;
  if (stream) {
    streamId = stream.id;
    updateStream.run(last, streamId);
  } else {
    streamId = Number(insertStream.run(request.stream, last).lastInsertRowid);
  }
  return { ok: true, revision: last, commit: insertEvents(streamId, first, request) };
}

/**
 * Most appends start a stream (a lead, a contact claim, an idempotency key): inserting the name
 * straight away checks and claims it in one index search instead of a lookup and then an insert.
 */
function appendNewStream(request: AppendRequest): AppendOutcome {
  const inserted = insertNewStream.run(request.stream, request.count - 1);
  if (inserted.changes === 0) return { ok: false, kind: 'wrong_expected_revision', actual: selectStream.get(request.stream)!.revision };
  return { ok: true, revision: request.count - 1, commit: insertEvents(Number(inserted.lastInsertRowid), 0, request) };
}

function insertEvents(streamId: number, first: number, request: AppendRequest): number {
  return Number(insertCommit.run(streamId, first, first + request.count - 1, request.events, request.created).lastInsertRowid);
}

const appendGroup = db.transaction((appends: readonly AppendRequest[]) => appends.map(appendOne));

function unavailable(error: unknown): AppendOutcome {
  return { ok: false, kind: 'unavailable', message: error instanceof Error ? error.message : String(error) };
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
function drain(first: WriteBatch): WriteBatch[] {
  const batches = [first];
  for (let next = receiveMessageOnPort(port); next; next = receiveMessageOnPort(port)) {
    if (next.message === 'close') {
      closing = true;
      break;
    }
    batches.push(next.message as WriteBatch);
  }
  return batches;
}

let closing = false;

function close(): void {
  db.close();
  // Closing the port lets the thread end: nothing else keeps it alive.
  port.close();
}

port.on('message', (message: WriteBatch | 'close') => {
  if (message === 'close') return close();
  const batches = drain(message);
  const outcomes = write(batches.flatMap((batch) => batch.appends));
  let index = 0;
  for (const batch of batches) {
    const result: WriteBatchResult = { batch: batch.batch, outcomes: outcomes.slice(index, index + batch.appends.length) };
    index += batch.appends.length;
    port.postMessage(result);
  }
  if (closing) close();
});
port.postMessage('ready');

import type Database from 'better-sqlite3';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import { makeDirectory } from '../../make-directory.js';
import { TwoGenerationCache } from '../../two-generation-cache.js';
import { newEventId } from '../event-id.js';
import { hasNoJsonForm, notJsonError } from '../event-json.js';
import {
  type AllSubscription,
  type AppendOptions,
  type AppendResult,
  type EventData,
  type EventStore,
  EventStoreUnavailableError,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  START,
  type SubscribeOptions,
  comparePositions,
  WrongExpectedRevisionError,
} from '../port.js';
import { type AppendRequest, type GroupAnswer, OUTCOME, type StoredEvent, type WriterOptions, encodeBatch } from './protocol.js';
import { EVENTS_FILE, openEventsDatabase } from './schema.js';
import { type CommitSelection, type StoredCommit, renameStreams, rewriteCommits, streamsOlderThan } from './rewrite.js';
import { PollingSubscription } from './subscription.js';

export interface EmbeddedEventStoreOptions {
  /** Default true. false commits every append on its own, for the benchmark's comparison. */
  readonly groupCommit?: boolean;
  /** How often live subscriptions look for events written by another process. Default 100 ms. */
  readonly pollIntervalMs?: number;
}

interface PendingAppend {
  readonly request: AppendRequest;
  resolve(result: AppendResult): void;
  reject(error: Error): void;
}

/** A commit row as an array (better-sqlite3's raw mode, which skips building an object per row). */
type CommitRow = [position: number, name: string, firstRevision: number, events: string, created: number, count?: number];
/** A commit row read for `$all`, with its number of events. */
type CountedRow = [position: number, name: string, firstRevision: number, events: string, created: number, count: number];
const POSITION = 0;

/** A commit this process wrote, as a read would return it, with its number of events. */
interface RecentCommit {
  readonly row: CommitRow;
  readonly count: number;
}

const NO_LIMIT = -1;
/** Commits kept per generation of `recent`: at least this many of the newest are kept. */
const RECENT_COMMITS = 1024;
/** How many of the newest events read are kept decoded for the next reader. */
const TAIL_EVENTS = 4096;

/** Index of the first event strictly after `from` in a run sorted by position. */
function firstAfter(run: readonly RecordedEvent[], from: Position): number {
  let low = 0;
  let high = run.length;
  while (low < high) {
    const middle = (low + high) >>> 1;
    if (comparePositions(run[middle]!.position, from) <= 0) low = middle + 1;
    else high = middle;
  }
  return low;
}
/** The error for an append JSON.stringify refused, naming the event that it refused (the slow path). */
function whichIsNotJson(streamId: string, events: readonly EventData[], error: unknown): TypeError {
  for (const event of events) {
    try {
      JSON.stringify([event.data, event.metadata]);
    } catch (cause) {
      return notJsonError(streamId, event.type, cause);
    }
  }
  return notJsonError(streamId, events[0]?.type ?? 'an event', error);
}

// Appends per message to the writer thread. Smaller messages let the writer start on the first
// appends of a burst while the rest are still being posted, so the two threads overlap, rather
// than wait idle for one message holding the whole burst.
const MESSAGE_APPENDS = 25;
const SELECT_COMMIT = 'SELECT position, stream, first_revision, events, created';

/**
 * The events of commit rows, in order: from `skip` events into the first row, at most `maxCount`
 * (negative: no limit). Decoding is most of the cost of reading (a rebuild decodes every event),
 * so this stays a plain indexed loop.
 */
function expand(rows: readonly CommitRow[], firstSkip: number, maxCount: number): RecordedEvent[] {
  const out: RecordedEvent[] = [];
  for (let r = 0; r < rows.length; r++) {
    const [position, streamId, firstRevision, text, created] = rows[r]!;
    const stored = JSON.parse(text) as StoredEvent[];
    for (let index = r === 0 ? firstSkip : 0; index < stored.length; index++) {
      if (out.length === maxCount) return out;
      const event = stored[index]!;
      out.push({
        id: event[0],
        streamId,
        revision: firstRevision + index,
        position: { commit: position, prepare: index },
        type: event[1],
        data: event[2],
        metadata: event[3],
        created,
      });
    }
  }
  return out;
}

/**
 * The default event store: one SQLite file under the data dir. Appends go to a writer thread that
 * commits them in groups (durable: an append resolves after its commit is fsynced); reads run here
 * on a second connection, which WAL lets proceed beside the writer and beside other processes.
 */
export class EmbeddedEventStore implements EventStore {
  private worker: Worker | undefined;
  private starting: Promise<Worker> | undefined;
  private pending: PendingAppend[] = [];
  private inFlight = new Map<number, PendingAppend[]>();
  private nextBatch = 0;
  private closed = false;
  private readonly subscriptions = new Set<PollingSubscription>();
  private tail: RecordedEvent[] = [];
  // The commits this process wrote lately, by position, so that its own subscribers read what was
  // just appended without a query: under load that query ran once per subscriber per group commit
  // and was the largest single cost of a post.
  // Without a subscriber, only each commit's number of events (see rememberCommit).
  private readonly recent = new TwoGenerationCache<number, RecentCommit | number>(RECENT_COMMITS);
  /** The newest commit position this process wrote (-1: none yet). */
  private localHead = -1;
  /** Events per commit in the last `$all` read from disk: how many commits a page of events needs. */
  private eventsPerCommit = 1;
  private readonly selectLastCommit;
  private readonly selectCommit;
  private readonly selectAll;
  private readonly selectRest;
  private readonly selectHead;

  private constructor(
    private readonly file: string,
    private readonly reader: Database.Database,
    private readonly options: Required<EmbeddedEventStoreOptions>,
  ) {
    this.selectLastCommit = reader.prepare<[string], number>('SELECT last_commit FROM streams WHERE name = ?').pluck();
    this.selectCommit = reader
      .prepare<[number], [...CommitRow, previous: number | null]>(`SELECT position, stream, first_revision, events, created, previous FROM commits WHERE position = ?`)
      .raw(true);
    this.selectAll = reader
      .prepare<[number, number], CountedRow>(
        `${SELECT_COMMIT}, last_revision - first_revision + 1 FROM commits WHERE position > ? ORDER BY position LIMIT ?`,
      )
      .raw(true);
    // The commit a reader stopped inside, only when it holds events after that point: a reader
    // that has finished a commit (the usual case) does not fetch it again.
    this.selectRest = reader
      .prepare<[number, number], CountedRow>(`${SELECT_COMMIT}, last_revision - first_revision + 1 FROM commits WHERE position = ? AND last_revision - first_revision > ?`)
      .raw(true);
    this.selectHead = reader.prepare<[], { position: number; last: number }>(
      'SELECT position, last_revision - first_revision AS last FROM commits ORDER BY position DESC LIMIT 1',
    );
  }

  static async open(dataDir: string, options: EmbeddedEventStoreOptions = {}): Promise<EmbeddedEventStore> {
    const file = join(dataDir, EVENTS_FILE);
    try {
      makeDirectory(dataDir);
      // The first connection creates the schema, so the writer thread and readers find it ready.
      const reader = openEventsDatabase(file);
      const store = new EmbeddedEventStore(file, reader, {
        groupCommit: options.groupCommit ?? true,
        pollIntervalMs: options.pollIntervalMs ?? 100,
      });
      await store.writer();
      return store;
    } catch (error) {
      throw new EventStoreUnavailableError(`cannot open the event store at ${file}: ${(error as Error).message}`, { cause: error });
    }
  }

  append(streamId: string, events: readonly EventData[], options: AppendOptions = {}): Promise<AppendResult> {
    if (this.closed) return Promise.reject(new EventStoreUnavailableError('the event store is closed'));
    let request: AppendRequest;
    try {
      const stored = events.map((event): StoredEvent => {
        // Inside the array below these would quietly become null; on their own they have no JSON at all.
        if (hasNoJsonForm(event.data) || (event.metadata !== undefined && hasNoJsonForm(event.metadata))) throw notJsonError(streamId, event.type);
        return [event.id ?? newEventId(), event.type, event.data, event.metadata ?? {}];
      });
      let text: string;
      try {
        text = JSON.stringify(stored);
      } catch (error) {
        throw whichIsNotJson(streamId, events, error);
      }
      request = {
        stream: streamId,
        expected: options.expectedRevision ?? 'any',
        created: Date.now(),
        events: text,
        count: stored.length,
      };
    } catch (error) {
      return Promise.reject(error);
    }
    return new Promise<AppendResult>((resolve, reject) => {
      this.pending.push({ request, resolve, reject });
      if (this.pending.length > 1) return;
      // An idle writer gets the append at once. A busy one would only queue it behind its commit:
      // the appends of every request handled meanwhile go in one message, sent when the writer
      // answers or this turn of the event loop ends, whichever is first (not one message each).
      if (this.inFlight.size === 0) queueMicrotask(() => this.flush());
      else setImmediate(() => this.flush());
    });
  }

  /**
   * Rewrites stored events in place (rewrite.ts): for sealing what older releases wrote in clear,
   * never for the service's own writes. What this process remembers of recent commits is
   * forgotten, so that no read serves a commit's old form.
   */
  async rewriteCommits(selection: CommitSelection, rewrite: (commits: readonly StoredCommit[]) => Promise<ReadonlyMap<number, StoredEvent[]>>): Promise<number> {
    try {
      return await rewriteCommits(this.file, selection, rewrite);
    } finally {
      this.forgetRecentCommits();
    }
  }

  /** See rewrite.ts: the streams under `streams` (a GLOB) none of whose commits is at or after `before`. */
  streamsOlderThan(streams: string, before: number): string[] {
    return streamsOlderThan(this.file, streams, before);
  }

  /** See rewrite.ts: for the same one-time step as rewriteCommits. Forgets what this process cached. */
  renameStreams(renames: ReadonlyArray<readonly [from: string, to: string]>): number {
    try {
      return renameStreams(this.file, renames);
    } finally {
      this.forgetRecentCommits();
    }
  }

  /** After a rewrite: no read may serve a commit's old form from memory. */
  private forgetRecentCommits(): void {
    this.recent.clear();
    this.tail = [];
  }

  async readStream(streamId: string, options: ReadStreamOptions = {}): Promise<RecordedEvent[]> {
    return this.reading(() => {
      const from = options.fromRevision ?? 0;
      const maxCount = options.maxCount ?? NO_LIMIT;
      const rows: CommitRow[] = [];
      // Newest commit first, back through `previous` to the one holding revision `from`.
      for (let position = this.selectLastCommit.get(streamId) ?? null; position !== null; ) {
        const row = this.selectCommit.get(position);
        if (row === undefined) throw new EventStoreUnavailableError(`the event store is damaged: commit ${position} of ${streamId} is missing`);
        const previous = row.pop() as number | null;
        rows.push(row as unknown as CommitRow);
        position = row[2] > from ? previous : null;
      }
      rows.reverse();
      return expand(rows, rows[0] ? Math.max(0, from - rows[0][2]) : 0, maxCount);
    });
  }

  async readAll(options: ReadAllOptions = {}): Promise<RecordedEvent[]> {
    return this.reading(() => this.readAllSync(options.fromPosition ?? START, options.maxCount ?? NO_LIMIT));
  }

  subscribeToAll(options: SubscribeOptions = {}): AllSubscription {
    const subscription = new PollingSubscription(
      options.fromPosition ?? START,
      (from, max, recentOnly) => this.reading(() => this.readAllSync(from, max, recentOnly)),
      this.options.pollIntervalMs,
      () => this.subscriptions.delete(subscription),
    );
    this.subscriptions.add(subscription);
    return subscription;
  }

  async headPosition(): Promise<Position> {
    return this.reading(() => this.headSync());
  }

  /**
   * Runs a read; a failure of SQLite or of the disk under it (our statements are fixed, so any
   * SQLite error is one) is EventStoreUnavailableError, which the HTTP shell answers with 503.
   */
  private reading<T>(read: () => T): T {
    if (this.closed) throw new EventStoreUnavailableError('the event store is closed');
    try {
      return read();
    } catch (error) {
      const code = (error as { code?: unknown }).code;
      if (typeof code === 'string' && code.startsWith('SQLITE_')) {
        throw new EventStoreUnavailableError(`the event store could not read: ${(error as Error).message}`, { cause: error });
      }
      throw error;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const subscription of [...this.subscriptions]) await subscription.unsubscribe();
    // Let appends already accepted reach the disk before the writer goes.
    while (this.inFlight.size > 0 || this.pending.length > 0) {
      await new Promise<void>((resolve) => setTimeout(resolve, 1));
    }
    const worker = this.worker;
    this.worker = undefined;
    if (worker) {
      await new Promise<void>((resolve) => {
        worker.once('exit', () => resolve());
        worker.postMessage('close');
      });
    }
    this.reader.close();
  }

  /**
   * Every projection of a service reads the same new events; the newest ones read are kept
   * (decoded, immutable) so that only the first reader pays for the query and the JSON parse.
   * The tail is one contiguous run of `$all`: it grows by a read that starts at its end, and is
   * replaced by a read that ends beyond it.
   */
  private readAllSync(from: Position, maxCount: number, recentOnly = false): RecordedEvent[] {
    const tail = this.tail;
    const last = tail.at(-1);
    let served: RecordedEvent[] = [];
    if (last && tail[0] && comparePositions(from, tail[0].position) >= 0) {
      const start = firstAfter(tail, from);
      served = tail.slice(start, maxCount < 0 ? undefined : start + maxCount);
      if (maxCount >= 0 && served.length === maxCount) return served;
      from = comparePositions(from, last.position) > 0 ? from : last.position;
    }
    const wanted = maxCount < 0 ? maxCount : maxCount - served.length;
    const fresh = (recentOnly ? this.readRecent(from, wanted) : undefined) ?? this.readAllFromDisk(from, wanted);
    if (fresh.length > 0) {
      if (last !== undefined && comparePositions(from, last.position) === 0) {
        for (const event of fresh) tail.push(event);
        if (tail.length > TAIL_EVENTS) tail.splice(0, tail.length - TAIL_EVENTS);
      } else if (last === undefined || comparePositions(fresh.at(-1)!.position, last.position) > 0) {
        // A read that does not join the tail but goes beyond it starts a new tail: readers follow the head.
        this.tail = fresh.slice(-TAIL_EVENTS);
      }
    }
    return served.length === 0 ? fresh : served.concat(fresh);
  }

  /**
   * The events after `from` up to the newest commit this process wrote, from memory; undefined
   * when some commit in between is not there (another process wrote it, or it was forgotten). It
   * cannot see commits of other processes after that, so only subscribers use it, and they still
   * read the disk at every poll interval.
   */
  private readRecent(from: Position, maxCount: number): RecordedEvent[] | undefined {
    if (from.commit < 0) return undefined;
    // A reader can be ahead of what this thread knows it wrote: a disk read may see a commit before
    // the writer thread's answer for it arrives. Nothing newer is known here yet.
    if (from.commit > this.localHead) return [];
    const rows: CommitRow[] = [];
    let firstSkip = 0;
    let events = 0;
    const current = this.recent.get(from.commit);
    if (current === undefined) return undefined;
    // A reader that stopped at the end of a commit (the usual case) needs only its count.
    const count = typeof current === 'number' ? current : current.count;
    if (from.prepare + 1 < count) {
      if (typeof current === 'number') return undefined;
      rows.push(current.row);
      firstSkip = from.prepare + 1;
      events = count - firstSkip;
    }
    for (let next = from.commit + 1; next <= this.localHead && (maxCount < 0 || events < maxCount); next++) {
      const commit = this.recent.get(next);
      if (commit === undefined || typeof commit === 'number') return undefined;
      rows.push(commit.row);
      events += commit.count;
    }
    return expand(rows, firstSkip, maxCount);
  }

  /**
   * Keeps a commit this process wrote for its own subscribers. A process without any (one that
   * serves the API while another projects) keeps only its number of events, which tells a
   * subscriber that comes later whether it has read all of it: held for the next thousand
   * commits, every commit's row and text outlived V8's young generation, so they were copied
   * there twice, moved to the old one and collected from it by full collections, for nobody. A
   * subscriber reads from disk what was not kept, as it does a commit of another process.
   */
  private rememberCommit(position: number, request: AppendRequest, revision: number): void {
    if (position > this.localHead) this.localHead = position;
    if (this.subscriptions.size === 0) {
      this.recent.set(position, request.count);
      return;
    }
    const row: CommitRow = [position, request.stream, revision - request.count + 1, request.events, request.created];
    this.recent.set(position, { row, count: request.count });
  }

  private readAllFromDisk(from: Position, maxCount: number): RecordedEvent[] {
    const rest = from.commit >= 0 ? this.selectRest.get(from.commit, from.prepare) : undefined;
    const rows: CommitRow[] = rest ? [rest] : [];
    const skip = rest ? from.prepare + 1 : 0;
    if (maxCount < 0) {
      for (const row of this.selectAll.all(from.commit, NO_LIMIT)) rows.push(row);
      return expand(rows, skip, maxCount);
    }
    // Commits hold several events each: asking for maxCount commits read (and made strings of)
    // about three times the rows a page of events needs. Ask for as many as the commits read so
    // far suggest, and for more only when they fall short.
    let events = rest ? rest[5] - skip : 0;
    let after = from.commit;
    let read = 0;
    let readEvents = 0;
    while (events < maxCount) {
      const limit = Math.ceil((maxCount - events) / this.eventsPerCommit) + 1;
      const page = this.selectAll.all(after, limit);
      for (const row of page) {
        rows.push(row);
        events += row[5];
        readEvents += row[5];
      }
      read += page.length;
      if (page.length < limit) break;
      after = page[page.length - 1]![POSITION];
    }
    if (read > 0) this.eventsPerCommit = Math.max(1, readEvents / read);
    return expand(rows, skip, maxCount);
  }

  private headSync(): Position {
    const head = this.selectHead.get();
    return head ? { commit: head.position, prepare: head.last } : START;
  }

  private writer(): Promise<Worker> {
    if (this.worker) return Promise.resolve(this.worker);
    this.starting ??= new Promise<Worker>((resolve, reject) => {
      const workerOptions: WriterOptions = { file: this.file, groupCommit: this.options.groupCommit };
      const worker = new Worker(new URL('./writer-thread.js', import.meta.url), { workerData: workerOptions });
      worker.once('error', (error) => {
        this.starting = undefined;
        reject(error);
        this.writerLost(worker, error);
      });
      worker.once('exit', (code) => this.writerLost(worker, new Error(`writer thread exited with code ${code}`)));
      worker.on('message', (message: GroupAnswer | 'ready') => {
        if (message === 'ready') {
          this.worker = worker;
          this.starting = undefined;
          resolve(worker);
        } else {
          this.settle(message);
        }
      });
    });
    return this.starting;
  }

  /** The writer thread died: its batches' fate is unknown to the caller, who must retry. */
  private writerLost(worker: Worker, error: Error): void {
    if (this.worker !== worker && this.worker !== undefined) return;
    this.worker = undefined;
    for (const batch of this.inFlight.values()) {
      for (const append of batch) append.reject(new EventStoreUnavailableError(error.message, { cause: error }));
    }
    this.inFlight.clear();
  }

  /**
   * Sends what arrived since the last flush without waiting for earlier batches: the writer thread
   * commits everything queued for it in one transaction, so while it fsyncs one group this thread
   * is already preparing the next.
   */
  private flush(): void {
    if (this.pending.length === 0) return;
    const appends = this.pending.splice(0, MESSAGE_APPENDS);
    if (this.pending.length > 0) queueMicrotask(() => this.flush());
    const batch = this.nextBatch++;
    this.inFlight.set(batch, appends);
    if (this.worker) {
      this.worker.postMessage(encodeBatch(batch, appends.map((append) => append.request)));
      return;
    }
    this.writer().then(
      (worker) => worker.postMessage(encodeBatch(batch, appends.map((append) => append.request))),
      (error: Error) => {
        this.inFlight.delete(batch);
        for (const append of appends) append.reject(new EventStoreUnavailableError(error.message, { cause: error }));
      },
    );
  }

  /** The answers of one group commit: every batch it held. */
  private settle({ numbers, messages }: GroupAnswer): void {
    for (let at = 0; at < numbers.length; ) {
      const batch = numbers[at]!;
      const count = numbers[at + 1]!;
      at += 2;
      const appends = this.inFlight.get(batch);
      this.inFlight.delete(batch);
      for (let index = 0; index < count; index++, at += 3) {
        const append = appends?.[index];
        if (append) this.answer(append, numbers[at]!, numbers[at + 1]!, numbers[at + 2]!, messages);
      }
    }
    // The writer is free: what gathered while it committed goes now.
    this.flush();
    for (const subscription of this.subscriptions) subscription.notify();
  }

  /** One append's outcome, as three numbers of the writer's answer (OUTCOME). */
  private answer(append: PendingAppend, outcome: number, first: number, second: number, messages: readonly string[]): void {
    if (outcome === OUTCOME.ok) {
      const [revision, commit] = [first, second];
      const request = append.request;
      if (commit >= 0) this.rememberCommit(commit, request, revision);
      // An empty append wrote nothing; its position is the head, read here (and a failed read fails
      // only this append: the rest of the batch is still answered).
      if (commit >= 0) append.resolve({ nextExpectedRevision: revision, position: { commit, prepare: request.count - 1 } });
      else {
        try {
          append.resolve({ nextExpectedRevision: revision, position: this.reading(() => this.headSync()) });
        } catch (error) {
          append.reject(error as Error);
        }
      }
    } else if (outcome === OUTCOME.wrongExpectedRevision) {
      append.reject(new WrongExpectedRevisionError(append.request.stream, append.request.expected, first < 0 ? 'no_stream' : first));
    } else {
      // The code crosses the thread apart from the text: readiness names the cause from it (disk full, read-only).
      const text = `the event store could not write: ${messages[first]}`;
      const cause = second >= 0 ? Object.assign(new Error(messages[first]), { code: messages[second] }) : undefined;
      append.reject(new EventStoreUnavailableError(text, cause ? { cause } : undefined));
    }
  }
}

// The event-store port. Its semantics follow EventStoreDB so that every invariant built on it
// (idempotency keys, duplicates, caps, id blocks) holds the same way on the embedded store and on
// EventStoreDB with several service instances: 0-based stream revisions, optimistic concurrency by
// expected revision, atomic multi-event appends to one stream, and a global `$all` order.

/** `no_stream`: the stream must not exist; `stream_exists`: it must; `any`: no check; n: its last revision is n. */
export type ExpectedRevision = 'no_stream' | 'stream_exists' | 'any' | number;

/**
 * A place in `$all`. Both parts are kept because EventStoreDB needs both to resume; in the embedded
 * store they are equal. Numbers, not bigints: a log would need 9 PB before they lose precision.
 */
export interface Position {
  readonly commit: number;
  readonly prepare: number;
}

export const START: Position = Object.freeze({ commit: -1, prepare: -1 });

export type EventMetadata = Record<string, unknown>;

export interface EventData<Type extends string = string, Data = unknown> {
  /** A uuid; generated (v7, time-ordered) when omitted. */
  readonly id?: string;
  readonly type: Type;
  readonly data: Data;
  readonly metadata?: EventMetadata;
}

export interface RecordedEvent<Type extends string = string, Data = unknown> {
  readonly id: string;
  readonly streamId: string;
  /** 0-based position of the event within its stream. */
  readonly revision: number;
  readonly position: Position;
  readonly type: Type;
  readonly data: Data;
  readonly metadata: EventMetadata;
  /** When the store recorded it, epoch milliseconds. */
  readonly created: number;
}

export interface AppendOptions {
  /** Defaults to `any`. */
  readonly expectedRevision?: ExpectedRevision;
}

export interface AppendResult {
  /** The stream's last revision after the append: pass it as the next expected revision. */
  readonly nextExpectedRevision: number;
  /** Position of the append's last event in `$all`. */
  readonly position: Position;
}

export interface ReadStreamOptions {
  /** First revision to read, inclusive. Defaults to 0. */
  readonly fromRevision?: number;
  readonly maxCount?: number;
}

export interface ReadAllOptions {
  /** Events strictly after this position. Defaults to the start of `$all`. */
  readonly fromPosition?: Position;
  readonly maxCount?: number;
  /**
   * The events as the adapter stores them, not brought to their current layout by the codec
   * (events/codec): for a reader of positions and times only, which must not fail on an event
   * that cannot be read (a projection's lag, measured on the very event that stopped it).
   */
  readonly asStored?: boolean;
}

export interface SubscribeOptions {
  /** Deliver events strictly after this position: catch up from there, then go live. */
  readonly fromPosition?: Position;
}

/** Consumed with `for await`; `unsubscribe()` ends the iteration. */
export interface AllSubscription extends AsyncIterable<RecordedEvent> {
  unsubscribe(): Promise<void>;
}

export interface EventStore {
  /** Appends all events or none. Rejects with WrongExpectedRevisionError on a failed check. */
  append(streamId: string, events: readonly EventData[], options?: AppendOptions): Promise<AppendResult>;
  /** Events of one stream in revision order; an empty array when the stream does not exist. */
  readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]>;
  /** Events of `$all` in commit order, strictly after `fromPosition`; system events excluded. */
  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]>;
  subscribeToAll(options?: SubscribeOptions): AllSubscription;
  /** Position of the last event in `$all`, or START when it is empty: the mark lag is measured against. */
  headPosition(): Promise<Position>;
  close(): Promise<void>;
}

/** The stream's actual state did not match the expected revision; nothing was written. */
export class WrongExpectedRevisionError extends Error {
  override readonly name = 'WrongExpectedRevisionError';
  constructor(
    readonly streamId: string,
    readonly expected: ExpectedRevision,
    readonly actual: number | 'no_stream',
  ) {
    super(`Append to stream '${streamId}' expected revision ${expected} but the stream is at ${actual}`);
  }
}

/** The store could not be reached or could not write (disk full, read-only, server down). Retryable. */
export class EventStoreUnavailableError extends Error {
  override readonly name = 'EventStoreUnavailableError';
  /**
   * An append that reached a server which never said whether it wrote it: it may still land,
   * later than any read made now can tell. False when nothing was written, or when a read of the
   * stream now tells whether it was (a writer thread that died has committed all it ever will).
   */
  readonly mayLandLater: boolean;
  constructor(message: string, options?: { cause?: unknown; mayLandLater?: boolean }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.mayLandLater = options?.mayLandLater ?? false;
  }
}

/** Whether `error` is an append's failure that may still land (see EventStoreUnavailableError). */
export const mayLandLater = (error: unknown): boolean => error instanceof EventStoreUnavailableError && error.mayLandLater;

export function comparePositions(a: Position, b: Position): number {
  return a.commit - b.commit || a.prepare - b.prepare;
}

export function expectedRevisionMatches(expected: ExpectedRevision, actual: number | 'no_stream'): boolean {
  switch (expected) {
    case 'any':
      return true;
    case 'no_stream':
      return actual === 'no_stream';
    case 'stream_exists':
      return actual !== 'no_stream';
    default:
      return actual === expected;
  }
}

import type { Position } from '../event-store/port.js';

// The read-model store port: narrow enough that the embedded (SQLite) and MongoDB adapters stay
// small. Documents live in named collections; projections write them only through `commit`, which
// moves the projection's checkpoint with them, and every write carries the position of the event
// that caused it, so a write at or below what a document has already seen changes nothing:
// replaying events twice, or after a crash between writes and checkpoint, leaves the same state.

export type ReadDoc = Record<string, unknown> & { readonly _id: string };

/** Equality on a field, or a range / set condition. Field names may be dotted (`delivery.status`). */
export type FieldCondition =
  | string
  | number
  | boolean
  | null
  | { readonly $gte?: string | number; readonly $lt?: string | number; readonly $lte?: string | number; readonly $in?: ReadonlyArray<string | number | boolean | null> };

export type Filter = Readonly<Record<string, FieldCondition>>;

/**
 * An index: a list of fields, compound in that order; or such a list with `whereSet`, a field a
 * document must hold a value in (not missing, not null) to be in the index. A document left out of
 * a partial index costs nothing to write there, and every index is written at every change of a
 * document; such an index serves the queries that hold `whereSet` equal to a value or within a
 * range. A store without partial indexes makes a full one.
 */
export type IndexSpec = readonly string[] | { readonly fields: readonly string[]; readonly whereSet: string };

/** The fields of an index, in order. */
export const indexFields = (spec: IndexSpec): readonly string[] => ('fields' in spec ? spec.fields : spec);

export interface FindOptions {
  readonly filter?: Filter;
  /** Sorted by this field, ties by `_id` in the same direction. */
  readonly sort: { readonly field: string; readonly direction: 'asc' | 'desc' };
  /** Keyset cursor: documents strictly after this (sort value, _id) in the sort order. */
  readonly after?: { readonly value: string | number; readonly id: string };
  readonly limit: number;
}

/** A value of a group key: the stores group on fields that hold strings (missing counts as null). */
export type GroupValue = string | null;

/** One part of a group key. */
export interface GroupKeyPart {
  /** The field whose value the part is. */
  readonly field: string;
  /**
   * Labels by range instead of the value itself: a value takes the label of the last step whose
   * `from` is at or below it, and null below the first step. Steps are ascending by `from`; their
   * labels need not be. This folds UTC hours into the days of a time zone without the store having
   * to know time zones.
   */
  readonly steps?: ReadonlyArray<{ readonly from: string; readonly label: string }>;
}

export interface AggregateOptions {
  readonly filter?: Filter;
  /**
   * The group key, in order (may be empty: one group of every matching document). Groups come
   * ordered by it, part by part, null before any string and strings in code-point order. When the
   * first part is a plain field the store walks that field in order, so an index on it (alone or
   * after equality-filtered fields) keeps each page's work bounded by the page, not the collection.
   */
  readonly key: readonly GroupKeyPart[];
  /** Numeric fields summed per group; a missing field counts as 0. */
  readonly sum: readonly string[];
  /** Keyset cursor: groups strictly after this key in the order above. */
  readonly after?: readonly GroupValue[];
  readonly limit: number;
}

export interface Group {
  readonly key: GroupValue[];
  /** Per field of `sum`, in any order of keys. */
  readonly sums: Record<string, number>;
}

/** A write caused by the event at `position`; ignored by a document that has seen that position. */
export type ReadWrite =
  /** Replaces the document (keeps nothing of the old one). */
  | { readonly op: 'put'; readonly collection: string; readonly id: string; readonly position: Position; readonly doc: Record<string, unknown> }
  /** Sets top-level fields, creating the document when missing. */
  | { readonly op: 'set'; readonly collection: string; readonly id: string; readonly position: Position; readonly set: Record<string, unknown> }
  /** Adds to numeric top-level fields (missing fields count as 0), creating the document with `setOnInsert` when missing. */
  | {
      readonly op: 'inc';
      readonly collection: string;
      readonly id: string;
      readonly position: Position;
      readonly inc: Record<string, number>;
      readonly setOnInsert?: Record<string, unknown>;
    }
  /** Appends to an array field, creating the document when missing. */
  | { readonly op: 'push'; readonly collection: string; readonly id: string; readonly position: Position; readonly field: string; readonly value: unknown };

export interface ReadModelStore {
  /**
   * True when commits are applied in the order they are made and, once one has failed, every later
   * one fails too: a caller may then make the next commit before the last has resolved, and lose
   * nothing. A rebuild uses it to fold one batch while the store writes the one before. After a
   * failed commit, the projection's commits keep failing until its checkpoint is read again (what
   * a runner does to start over from it), so no later batch can move the checkpoint past it.
   */
  readonly pipelinedCommits?: boolean;
  /**
   * Applies the writes and moves the projection's checkpoint to `checkpoint`, atomically where the
   * store can (embedded: one transaction; MongoDB: a transaction on a replica set). Writes are
   * applied in order; each is guarded by its position. With a `fence`, the commit happens only
   * while its holder still holds that lease with that token, checked in the same transaction
   * (MongoDB without a replica set: just before), else it fails with LeaseLostError and changes
   * nothing.
   */
  commit(projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence?: Fence): Promise<void>;
  /** The last position the projection committed, or null before its first commit. */
  checkpoint(projection: string): Promise<Position | null>;
  get(collection: string, id: string): Promise<ReadDoc | null>;
  find(collection: string, options: FindOptions): Promise<ReadDoc[]>;
  /**
   * Groups of the matching documents with their sums, computed in the store and read a page at a
   * time: the caller's memory is bounded by `limit`, whatever the number of documents.
   */
  aggregate(collection: string, options: AggregateOptions): Promise<Group[]>;
  /** Creates the indexes `find` needs (see IndexSpec). */
  ensureIndexes(collection: string, indexes: ReadonlyArray<IndexSpec>): Promise<void>;
  /**
   * The collections that exist (made by a commit or `ensureIndexes`, not yet dropped), in no
   * particular order: how `leadpost replay` finds the old builds it removes.
   */
  collections(): Promise<string[]>;
  /** Removes a collection and any projection checkpoint stored for it (a rebuild starts clean). */
  drop(collection: string): Promise<void>;
  /** Removes a projection's checkpoint. */
  resetCheckpoint(projection: string): Promise<void>;
  /**
   * Takes the lease `name` for `holder` for `ttlMs`, or renews it: a compare-and-set that succeeds
   * only when nobody holds it, its holder is `holder`, or its time has run out, so two holders
   * never hold it at once. Returns the lease as it stands afterwards: taken when its holder is
   * `holder`. The token grows by one each time the lease passes to a holder (or back to one whose
   * time ran out), so a write fenced with an older token is refused.
   */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<Lease>;
  /** Gives the lease up if `holder` holds it, so that another may take it at once. */
  releaseLease(name: string, holder: string): Promise<void>;
  /** The lease as it stands (held while `expiresAt` is in the future), or null if never taken. */
  lease(name: string): Promise<Lease | null>;
  /** Every lease whose name begins with `prefix` (a running instance's, `instance-…`), as each stands, held or not. */
  leasesNamed(prefix: string): Promise<Lease[]>;
  /**
   * Removes the leases whose names begin with `prefix` and that ran out before `ranOutBefore`
   * (ms since the epoch; one held then is kept); resolves with how many. Only for leases whose
   * token fences nothing, each named after its one holder (an instance's): a role lease's row
   * must stay, as its token is where the next holder's count goes on from.
   */
  removeLeasesNamed(prefix: string, ranOutBefore: number): Promise<number>;
  close(): Promise<void>;
}

/**
 * A lease in the read-model store: which process does a job only one may do at a time (run the
 * projections, run the delivery worker). Its time is the store's clock: the embedded store's
 * processes share one machine, and MongoDB's server judges for every instance.
 */
export interface Lease {
  readonly name: string;
  readonly holder: string;
  readonly token: number;
  /** Milliseconds since the epoch. */
  readonly expiresAt: number;
}

/** What a fenced commit must still hold: the lease, by this holder, with this token, not run out. */
export interface Fence {
  readonly lease: string;
  readonly holder: string;
  readonly token: number;
}

/** A fenced commit found its lease taken over or run out: the writer must stop. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
  constructor(fence: Fence) {
    super(`the ${fence.lease} lease (token ${fence.token}) is no longer held by ${fence.holder}`);
  }
}

const ZEROS = '00000000000000000000';
/** A part of a position, 20 digits wide (padStart made several strings a call; a rebuild makes a key per event). */
const digits20 = (n: number): string => {
  const text = String(n);
  return text.length >= 20 ? text : ZEROS.slice(text.length) + text;
};

/** A position as a string that sorts like the position, for storing beside documents. */
export function positionKey(position: Position): string {
  return `${digits20(position.commit)}:${digits20(position.prepare)}`;
}

export class ReadModelUnavailableError extends Error {
  override readonly name = 'ReadModelUnavailableError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

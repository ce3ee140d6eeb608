import {
  type Document,
  MongoBulkWriteError,
  MongoError,
  MongoErrorLabel,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerClosedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
  MongoWriteConcernError,
} from 'mongodb';
import type { AggregateOptions, FindOptions, GroupKeyPart, GroupValue, ReadWrite } from './port.js';
import { POSITION_FIELD, checkFindOptions, checkQueryField, predicates, withoutId } from './validate.js';

// The pure half of the MongoDB adapter: how the port's filters, cursors and writes read as MongoDB
// queries and updates, and which driver errors mean what. Kept apart so it is tested without a server.

/** The port's filter, which is already MongoDB's query language restricted to a few operators. */
export function toMongoFilter(filter: FindOptions['filter']): Document {
  const query: Record<string, Record<string, unknown>> = {};
  for (const p of predicates(filter)) (query[p.field] ??= {})[`$${p.op}`] = p.value;
  return query;
}

/**
 * Documents strictly after (value, id) in the sort order, as alternatives that each read a bounded
 * range of an index on (filter fields…, sort field, _id): beyond the value; at the value and beyond
 * the id; and, descending, without the field (those sort last and match no range). Each carries
 * the filter, so the query is one `$or` at its top: MongoDB plans every branch as an index range
 * of its own and merges them in sort order, and a deep page reads about a page of index entries
 * instead of every one ahead of the cursor. Null when there is no cursor.
 */
export function keysetBranches(options: Pick<FindOptions, 'sort' | 'after'>): Document[] | null {
  const { after, sort } = options;
  if (!after) return null;
  const beyond = sort.direction === 'asc' ? '$gt' : '$lt';
  if (sort.field === '_id') return [{ _id: { [beyond]: after.id } }];
  const branches: Document[] = [{ [sort.field]: { [beyond]: after.value } }, { [sort.field]: after.value, _id: { [beyond]: after.id } }];
  if (sort.direction === 'desc') branches.push({ [sort.field]: null });
  return branches;
}

export interface MongoFind {
  readonly query: Document;
  readonly sort: Record<string, 1 | -1>;
  readonly limit: number;
}

export function findQuery(options: FindOptions): MongoFind {
  checkFindOptions(options);
  const filter = toMongoFilter(options.filter);
  // $and rather than a merge: the filter may constrain the sort field too.
  const within = (branch: Document) => (Object.keys(filter).length ? { $and: [filter, branch] } : branch);
  const branches = keysetBranches(options)?.map(within);
  const query = !branches ? filter : branches.length === 1 ? branches[0]! : { $or: branches };
  const dir = options.sort.direction === 'asc' ? 1 : -1;
  const sort: Record<string, 1 | -1> = options.sort.field === '_id' ? { _id: dir } : { [options.sort.field]: dir, _id: dir };
  return { query, sort, limit: options.limit };
}

/** The range of the first key field a page reads: from the cursor's value to the last value it needs. */
export interface LeadingWindow {
  readonly from?: GroupValue;
  readonly to?: GroupValue;
}

/** Documents whose `field` lies in the window; null sorts first, as in the key order. */
function windowQuery(field: string, window: LeadingWindow): Document | null {
  const { from, to } = window;
  if (to === null) return { [field]: null };
  const range: Document = {};
  if (typeof from === 'string') range.$gte = from;
  if (typeof to === 'string') range.$lte = to;
  if (Object.keys(range).length === 0) return null;
  // Below a string lower bound nulls are in the window too: MongoDB's ranges never match them.
  return typeof from === 'string' ? { [field]: range } : { $or: [{ [field]: null }, { [field]: range }] };
}

const and = (...parts: Array<Document | null>): Document => {
  const present = parts.filter((p): p is Document => p !== null && Object.keys(p).length > 0);
  return present.length === 0 ? {} : present.length === 1 ? present[0]! : { $and: present };
};

/** Finds the values of the first key field from the cursor's on, in that field's order (the caller reads distinct ones). */
export function leadingQuery(options: AggregateOptions): MongoFind & { readonly field: string } {
  const field = options.key[0]!.field;
  const from = options.after?.[0];
  const query = and(toMongoFilter(options.filter), windowQuery(field, from === undefined ? {} : { from }));
  return { query, sort: { [field]: 1 }, limit: 0, field };
}

/** A key part as an aggregation expression; steps as a balanced tree of $cond, as in SQL. */
export function keyPartExpression(part: GroupKeyPart): unknown {
  const path = `$${checkQueryField(part.field)}`;
  const steps = part.steps;
  // A missing field groups with null, as it does in the embedded store.
  if (!steps) return { $ifNull: [path, null] };
  const within = (lo: number, hi: number): unknown => {
    if (hi - lo === 1) return { $literal: steps[lo]!.label };
    const mid = (lo + hi) >> 1;
    return { $cond: [{ $gte: [path, { $literal: steps[mid]!.from }] }, within(mid, hi), within(lo, mid)] };
  };
  return { $cond: [{ $gte: [path, { $literal: steps[0]!.from }] }, within(0, steps.length), null] };
}

/** Groups strictly after the cursor, on the grouped documents' `_id.k0…`. */
export function groupKeysetQuery(after: readonly GroupValue[]): Document {
  const or: Document[] = [];
  for (let i = 0; i < after.length; i++) {
    const clause: Document = {};
    for (let j = 0; j < i; j++) clause[`_id.k${j}`] = after[j] ?? null;
    const c = after[i] ?? null;
    clause[`_id.k${i}`] = c === null ? { $ne: null } : { $gt: c };
    or.push(clause);
  }
  // An empty key has one group, and nothing is after it.
  return or.length === 0 ? { _id: { $exists: false } } : { $or: or };
}

/** One page of groups as an aggregation: `_id.k0…` the key parts, `s0…` the sums. */
export function aggregatePipeline(options: AggregateOptions, window?: LeadingWindow): Document[] {
  const match = and(toMongoFilter(options.filter), window ? windowQuery(options.key[0]!.field, window) : null);
  const group: Document = { _id: Object.fromEntries(options.key.map((part, i) => [`k${i}`, keyPartExpression(part)])) };
  options.sum.forEach((field, i) => (group[`s${i}`] = { $sum: `$${checkQueryField(field)}` }));
  const pipeline: Document[] = [{ $match: match }, { $group: group }];
  if (options.after) pipeline.push({ $match: groupKeysetQuery(options.after) });
  if (options.key.length > 0) pipeline.push({ $sort: Object.fromEntries(options.key.map((_, i) => [`_id.k${i}`, 1])) });
  pipeline.push({ $limit: options.limit });
  return pipeline;
}

/** Matches the document only when it has not seen `key`; on a miss the upsert collides on `_id`. */
export function guardFilter(id: string, key: string): Document {
  return { _id: id, $or: [{ [POSITION_FIELD]: { $lt: key } }, { [POSITION_FIELD]: { $exists: false } }] };
}

export type MongoWrite = { readonly replacement: Document } | { readonly update: Document };

/** The write as a replacement (put) or an update; every form records the position it applied. */
export function toMongoWrite(write: ReadWrite, key: string): MongoWrite {
  const pos = { [POSITION_FIELD]: key };
  switch (write.op) {
    case 'put':
      return { replacement: { ...withoutId(write.doc), ...pos } };
    case 'set':
      return { update: { $set: { ...write.set, ...pos } } };
    case 'inc': {
      const update: Document = { $inc: write.inc, $set: pos };
      // Empty operator documents are refused by servers before 5.0.
      if (write.setOnInsert && Object.keys(write.setOnInsert).length > 0) update.$setOnInsert = write.setOnInsert;
      if (Object.keys(write.inc).length === 0) delete update.$inc;
      return { update };
    }
    case 'push':
      return { update: { $push: { [write.field]: write.value }, $set: pos } };
  }
}

const DUPLICATE_KEY_CODES = new Set([11000, 11001]);

/**
 * A guarded upsert that found the document already past its position tries to insert it again and
 * collides on `_id`: the write was already applied. A collision on another index is a real error.
 */
export function isDuplicateKeyError(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  const { code, keyPattern, errmsg } = error as { code?: unknown; keyPattern?: unknown; errmsg?: unknown };
  if (typeof code !== 'number' || !DUPLICATE_KEY_CODES.has(code)) return false;
  if (typeof keyPattern === 'object' && keyPattern !== null) return Object.keys(keyPattern).join() === '_id';
  // A bulk write's errors keep the server's message but not its key pattern: the message names the index.
  return typeof errmsg !== 'string' || !/ index: /.test(errmsg) || / index: _id_ /.test(errmsg);
}

/**
 * Server codes of a failover, a shutdown or an unreachable member, as the driver itself retries
 * reads on them (it exports no list of them), and of a write concern not met in time.
 */
const UNAVAILABLE_CODES = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  64, // WriteConcernTimeout
  89, // NetworkTimeout
  91, // ShutdownInProgress
  134, // ReadConcernMajorityNotAvailableYet
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10058, // LegacyNotPrimary
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

/** Labels the driver or server put on an error worth retrying later: the same call may succeed then. */
const UNAVAILABLE_LABELS = [MongoErrorLabel.RetryableWriteError, MongoErrorLabel.TransientTransactionError, MongoErrorLabel.UnknownTransactionCommitResult];

/**
 * The server cannot be reached, is between primaries or shutting down, or did not replicate a
 * write as asked: the caller should retry later. Reads carry no labels, and a bulk write wraps the
 * server's error in its own class (keeping its code and labels), so codes are read as well as labels.
 */
export function isUnavailable(error: unknown): boolean {
  if (
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    error instanceof MongoTopologyClosedError ||
    error instanceof MongoNotConnectedError ||
    error instanceof MongoServerClosedError ||
    error instanceof MongoWriteConcernError
  ) {
    return true;
  }
  if (!(error instanceof MongoError)) return false;
  // A bulk write wraps whatever its operation threw, a network or server-selection error too,
  // which carries neither code nor label: the wrapped error is kept as its `errorResponse`.
  if (error instanceof MongoBulkWriteError && error.errorResponse instanceof Error && error.errorResponse !== error && isUnavailable(error.errorResponse)) return true;
  if (UNAVAILABLE_LABELS.some((label) => error.hasErrorLabel(label))) return true;
  if (typeof error.code === 'number' && UNAVAILABLE_CODES.has(error.code)) return true;
  // A bulk write applied on the primary but not replicated as its write concern asks.
  return error instanceof MongoBulkWriteError && (error.err !== undefined || hasWriteConcernError(error.result));
}

function hasWriteConcernError(result: unknown): boolean {
  const read = (result as { getWriteConcernError?: unknown } | undefined)?.getWriteConcernError;
  return typeof read === 'function' && read.call(result) !== undefined;
}

/**
 * The hosts of a connection string, for messages: never its credentials (cut at the last `@`, so
 * that a password holding a `/` cannot leak either), path or options.
 */
export function hostsOfUrl(url: string): string {
  const rest = url.replace(/^mongodb(\+srv)?:\/\//, '');
  return rest.slice(rest.lastIndexOf('@') + 1).split(/[/?]/)[0] || 'localhost';
}

/**
 * The database named in a connection string's path, if any. The driver's own default is `test`,
 * which cannot be told apart from an explicit `/test`, hence parsing it here.
 */
export function databaseNameFromUrl(url: string): string | undefined {
  const rest = url.replace(/^mongodb(\+srv)?:\/\//, '');
  const slash = rest.indexOf('/');
  if (slash < 0) return undefined;
  const path = rest.slice(slash + 1).split('?')[0] ?? '';
  return path ? decodeURIComponent(path) : undefined;
}

import {
  type Document,
  MongoError,
  MongoNetworkError,
  MongoNotConnectedError,
  MongoServerSelectionError,
  MongoTopologyClosedError,
} from 'mongodb';
import type { FindOptions, ReadWrite } from './port.js';
import { POSITION_FIELD, checkFindOptions, predicates, withoutId } from './validate.js';

// The pure half of the MongoDB adapter: how the port's filters, cursors and writes read as MongoDB
// queries and updates, and which driver errors mean what. Kept apart so it is tested without a server.

/** The port's filter, which is already MongoDB's query language restricted to a few operators. */
export function toMongoFilter(filter: FindOptions['filter']): Document {
  const query: Record<string, Record<string, unknown>> = {};
  for (const p of predicates(filter)) (query[p.field] ??= {})[`$${p.op}`] = p.value;
  return query;
}

/**
 * Documents strictly after (value, id) in the sort order. Descending, documents without the field
 * sort last and match no range, so they are asked for explicitly (the embedded store does the same).
 */
export function keysetQuery(options: Pick<FindOptions, 'sort' | 'after'>): Document | null {
  const { after, sort } = options;
  if (!after) return null;
  const beyond = sort.direction === 'asc' ? '$gt' : '$lt';
  if (sort.field === '_id') return { _id: { [beyond]: after.id } };
  const or: Document[] = [{ [sort.field]: { [beyond]: after.value } }];
  if (sort.direction === 'desc') or.push({ [sort.field]: null });
  or.push({ [sort.field]: after.value, _id: { [beyond]: after.id } });
  return { $or: or };
}

export interface MongoFind {
  readonly query: Document;
  readonly sort: Record<string, 1 | -1>;
  readonly limit: number;
}

export function findQuery(options: FindOptions): MongoFind {
  checkFindOptions(options);
  const filter = toMongoFilter(options.filter);
  const keyset = keysetQuery(options);
  // $and rather than a merge: the filter may constrain the sort field too.
  const query = keyset ? (Object.keys(filter).length ? { $and: [filter, keyset] } : keyset) : filter;
  const dir = options.sort.direction === 'asc' ? 1 : -1;
  const sort: Record<string, 1 | -1> = options.sort.field === '_id' ? { _id: dir } : { [options.sort.field]: dir, _id: dir };
  return { query, sort, limit: options.limit };
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
  const { code, keyPattern } = error as { code?: unknown; keyPattern?: unknown };
  if (typeof code !== 'number' || !DUPLICATE_KEY_CODES.has(code)) return false;
  return typeof keyPattern !== 'object' || keyPattern === null || Object.keys(keyPattern).join() === '_id';
}

/** The server cannot be reached or is between primaries: the caller should retry later. */
export function isUnavailable(error: unknown): boolean {
  if (
    error instanceof MongoNetworkError ||
    error instanceof MongoServerSelectionError ||
    error instanceof MongoTopologyClosedError ||
    error instanceof MongoNotConnectedError
  ) {
    return true;
  }
  // Left on an error after the driver's own retry: a step-down, a shutdown, a write conflict storm.
  return error instanceof MongoError && (error.hasErrorLabel('RetryableWriteError') || error.hasErrorLabel('TransientTransactionError'));
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

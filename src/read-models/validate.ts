import type { Position } from '../event-store/port.js';
import { type AggregateOptions, type FieldCondition, type Filter, type FindOptions, type IndexSpec, type ReadWrite, indexFields } from './port.js';

// Checks shared by both adapters, so that a name, field or write one of them accepts the other
// accepts too: names end up inside SQL text and Mongo query keys, so they are checked, never
// escaped, and a write the embedded store would reject must not silently succeed on MongoDB.

const COLLECTION = /^[a-z][a-z0-9_]{0,62}$/;
/** Dotted paths of identifier-like segments: they map to `$.a.b` in SQLite and `a.b` in MongoDB alike. */
const FIELD_PATH = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;
/** MongoDB keeps its checkpoints in `rm_checkpoints` and leases in `rm_leases`, where collections of these names would land. */
const RESERVED_COLLECTIONS = new Set(['checkpoints', 'leases']);
/** Where each adapter keeps the position a document has seen. */
export const POSITION_FIELD = '_pos';

export type Scalar = string | number | boolean | null;

export interface Predicate {
  readonly field: string;
  readonly op: 'eq' | 'gte' | 'lt' | 'lte' | 'in';
  readonly value: Scalar | readonly Scalar[];
}

/** Names already checked: a rebuild checks the same few names for every write. */
const CHECKED_COLLECTIONS = new Set<string>();

export function checkCollection(name: string): string {
  if (CHECKED_COLLECTIONS.has(name)) return name;
  if (typeof name !== 'string' || !COLLECTION.test(name) || RESERVED_COLLECTIONS.has(name)) {
    throw new TypeError(`invalid read-model collection name ${JSON.stringify(name)}`);
  }
  if (CHECKED_COLLECTIONS.size < 10_000) CHECKED_COLLECTIONS.add(name);
  return name;
}

export function checkProjection(name: string): string {
  if (typeof name !== 'string' || name.length === 0 || name.length > 200) throw new TypeError(`invalid projection name ${JSON.stringify(name)}`);
  return name;
}

/** A lease's name and holder are short printable names; its time to live is from 1 ms to a day. */
export function checkLease(name: string, holder: string, ttlMs?: number): void {
  const ok = (text: unknown) => typeof text === 'string' && /^[\x21-\x7e]{1,200}$/.test(text);
  if (!ok(name)) throw new TypeError(`invalid lease name ${JSON.stringify(name)}`);
  if (!ok(holder)) throw new TypeError(`invalid lease holder ${JSON.stringify(holder)}`);
  if (ttlMs !== undefined && !(Number.isSafeInteger(ttlMs) && ttlMs >= 1 && ttlMs <= 86_400_000)) throw new TypeError(`invalid lease time to live ${JSON.stringify(ttlMs)}`);
}

/**
 * What removeLeasesNamed takes: a prefix as a lease name is (never empty, which would name every
 * lease, the role leases too), and a time not after now (a later one would take held leases).
 */
export function checkLeaseRemoval(prefix: string, ranOutBefore: number): void {
  if (typeof prefix !== 'string' || !/^[\x21-\x7e]{1,200}$/.test(prefix)) throw new TypeError(`invalid lease name prefix ${JSON.stringify(prefix)}`);
  if (!Number.isSafeInteger(ranOutBefore) || ranOutBefore < 0 || ranOutBefore > Date.now()) throw new TypeError(`invalid time a lease ran out before ${JSON.stringify(ranOutBefore)}`);
}

/** A field a query filters, sorts or indexes on; `_id` is the document id. */
export function checkQueryField(field: string): string {
  if (typeof field !== 'string' || !FIELD_PATH.test(field) || field.split('.')[0] === POSITION_FIELD) {
    throw new TypeError(`invalid read-model field ${JSON.stringify(field)}`);
  }
  return field;
}

export function checkPosition(position: Position, what = 'position'): Position {
  const ok = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= -1;
  if (typeof position !== 'object' || position === null || !ok(position.commit) || !ok(position.prepare)) {
    throw new TypeError(`invalid ${what} ${JSON.stringify(position)}`);
  }
  return position;
}

/** A top-level field a write names: MongoDB would read a dot as a path and a `$` as an operator. */
function checkWriteField(field: string): void {
  if (field.length === 0 || field.includes('.') || field.startsWith('$') || field === '_id' || field === POSITION_FIELD) {
    throw new TypeError(`invalid read-model write field ${JSON.stringify(field)}`);
  }
}

function checkWriteFields(fields: Record<string, unknown>, what: string): void {
  if (typeof fields !== 'object' || fields === null || Array.isArray(fields)) throw new TypeError(`${what} must be an object`);
  for (const field of Object.keys(fields)) checkWriteField(field);
}

/** Throws for a write no adapter can apply; says nothing about whether it applies to the stored document. */
export function checkWrite(write: ReadWrite): void {
  checkCollection(write.collection);
  if (typeof write.id !== 'string' || write.id.length === 0) throw new TypeError(`invalid read-model document id ${JSON.stringify(write.id)}`);
  const { commit, prepare } = checkPosition(write.position);
  // positionKey only sorts like the position for non-negative parts.
  if (commit < 0 || prepare < 0) throw new TypeError(`invalid write position ${JSON.stringify(write.position)}`);
  switch (write.op) {
    case 'put': {
      // A document read back and put again still carries its `_id`; any other `_id` is a mistake.
      const doc = write.doc;
      if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) throw new TypeError('put doc must be an object');
      if (doc._id !== undefined && doc._id !== write.id) throw new TypeError(`put of ${write.id} carries _id ${JSON.stringify(doc._id)}`);
      for (const field of Object.keys(doc)) if (field !== '_id') checkWriteField(field);
      return;
    }
    case 'set':
      checkWriteFields(write.set, 'set');
      return;
    case 'inc':
      checkWriteFields(write.inc, 'inc');
      for (const [field, by] of Object.entries(write.inc)) {
        if (typeof by !== 'number' || !Number.isFinite(by)) throw new TypeError(`inc of ${field} by ${String(by)} is not a finite number`);
        // MongoDB rejects an update touching one path from two operators; refuse it everywhere.
        if (write.setOnInsert && Object.hasOwn(write.setOnInsert, field)) throw new TypeError(`inc and setOnInsert both name ${field}`);
      }
      if (write.setOnInsert !== undefined) checkWriteFields(write.setOnInsert, 'setOnInsert');
      return;
    case 'push':
      checkWriteField(write.field);
      return;
    default:
      throw new TypeError(`unknown read-model write op ${JSON.stringify((write as { op: unknown }).op)}`);
  }
}

/** `put` stores the document without its `_id`: the id is kept apart by both adapters. */
export function withoutId(doc: Record<string, unknown>): Record<string, unknown> {
  const { _id, ...rest } = doc;
  return rest;
}

function checkScalar(value: unknown, field: string): Scalar {
  if (value === null || typeof value === 'string' || typeof value === 'boolean') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  throw new TypeError(`filter on ${field}: ${JSON.stringify(value)} is not a string, finite number, boolean or null`);
}

function checkBound(value: unknown, field: string): string | number {
  const scalar = checkScalar(value, field);
  if (typeof scalar !== 'string' && typeof scalar !== 'number') throw new TypeError(`filter on ${field}: range bound must be a string or number`);
  return scalar;
}

const OPERATORS = new Set(['$gte', '$lt', '$lte', '$in']);

/**
 * The filter as a flat list of checks. An `undefined` condition or operator is absent, as MongoDB
 * with `ignoreUndefined` would treat it, so optional bounds can be passed straight through.
 */
export function predicates(filter: Filter | undefined): Predicate[] {
  const out: Predicate[] = [];
  for (const [field, condition] of Object.entries(filter ?? {}) as Array<[string, FieldCondition | undefined]>) {
    checkQueryField(field);
    if (condition === undefined) continue;
    if (typeof condition !== 'object' || condition === null) {
      out.push({ field, op: 'eq', value: checkScalar(condition, field) });
      continue;
    }
    for (const [op, value] of Object.entries(condition) as Array<[string, unknown]>) {
      if (!OPERATORS.has(op)) throw new TypeError(`filter on ${field}: unsupported operator ${JSON.stringify(op)}`);
      if (value === undefined) continue;
      if (op === '$in') {
        if (!Array.isArray(value)) throw new TypeError(`filter on ${field}: $in needs an array`);
        out.push({ field, op: 'in', value: value.map((v: unknown) => checkScalar(v, field)) });
      } else {
        out.push({ field, op: op.slice(1) as Predicate['op'], value: checkBound(value, field) });
      }
    }
  }
  return out;
}

export function checkFindOptions(options: FindOptions): void {
  checkQueryField(options.sort.field);
  if (options.sort.direction !== 'asc' && options.sort.direction !== 'desc') throw new TypeError(`invalid sort direction ${JSON.stringify(options.sort.direction)}`);
  if (!Number.isSafeInteger(options.limit) || options.limit < 0) throw new TypeError(`invalid limit ${String(options.limit)}`);
  if (options.after) {
    checkBound(options.after.value, options.sort.field);
    if (typeof options.after.id !== 'string') throw new TypeError('keyset cursor id must be a string');
  }
}

export function checkAggregateOptions(options: AggregateOptions): void {
  if (!Array.isArray(options.key)) throw new TypeError('aggregate key must be an array');
  for (const part of options.key) {
    checkQueryField(part.field);
    const steps: unknown = part.steps;
    if (steps === undefined) continue;
    if (!Array.isArray(steps) || steps.length === 0) throw new TypeError(`steps of ${part.field} must be a non-empty array`);
    let previous: string | undefined;
    for (const step of steps as Array<{ from?: unknown; label?: unknown } | null>) {
      if (typeof step?.from !== 'string' || typeof step.label !== 'string') throw new TypeError(`every step of ${part.field} needs a string from and label`);
      if (previous !== undefined && !(previous < step.from)) throw new TypeError(`steps of ${part.field} must be strictly ascending by from`);
      previous = step.from;
    }
  }
  if (!Array.isArray(options.sum)) throw new TypeError('aggregate sum must be an array');
  options.sum.forEach(checkQueryField);
  if (!Number.isSafeInteger(options.limit) || options.limit < 0) throw new TypeError(`invalid limit ${String(options.limit)}`);
  if (options.after !== undefined) {
    if (!Array.isArray(options.after) || options.after.length !== options.key.length) throw new TypeError('aggregate cursor must have one value per key part');
    for (const value of options.after) if (value !== null && typeof value !== 'string') throw new TypeError('aggregate cursor values are strings or null');
  }
}

export function checkIndexes(indexes: ReadonlyArray<IndexSpec>): void {
  for (const spec of indexes) {
    const fields = indexFields(spec);
    if (!Array.isArray(fields) || fields.length === 0) throw new TypeError('an index needs at least one field');
    fields.forEach(checkQueryField);
    if ('whereSet' in spec) {
      checkQueryField(spec.whereSet);
      if (spec.whereSet === '_id') throw new TypeError('every document has an _id: an index on the documents where it is set is a full one');
    }
  }
}

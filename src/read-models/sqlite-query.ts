import type { FindOptions } from './port.js';
import { type Predicate, type Scalar, checkFindOptions, checkQueryField, predicates } from './validate.js';

// Filters and sorts as SQL over the JSON documents. Field paths are inlined as string literals (they
// are validated, never escaped): SQLite uses an expression index only when the query repeats its
// expression exactly, and a bound path would not. Values are always bound parameters.
//
// MongoDB compares only values of the same type (5 never equals '5', $lt 'z' never matches a
// number, true never equals 1); json_extract would blur those, so every comparison also checks
// json_type. The index still narrows on the json_extract part.

export type Param = string | number | null;

export interface SqlPart {
  readonly sql: string;
  readonly params: Param[];
}

/** The SQL expression for a field: the `id` column for `_id`, else the JSON value at its path. */
export function fieldExpr(field: string): string {
  checkQueryField(field);
  return field === '_id' ? 'id' : `json_extract(doc, '$.${field}')`;
}

function typeGuard(field: string, value: string | number | boolean): string {
  if (field === '_id') return typeof value === 'string' ? '' : ' AND 0';
  const types = typeof value === 'string' ? `'text'` : typeof value === 'number' ? `'integer', 'real'` : `'${String(value)}'`;
  return ` AND json_type(doc, '$.${field}') IN (${types})`;
}

function equals(field: string, value: Scalar, params: Param[]): string {
  const expr = fieldExpr(field);
  if (value === null) return `${expr} IS NULL`;
  // JSON true/false come out of json_extract as 1/0; their type alone decides.
  if (typeof value === 'boolean') return field === '_id' ? '0' : `json_type(doc, '$.${field}') = '${String(value)}'`;
  params.push(value);
  return `(${expr} = ?${typeGuard(field, value)})`;
}

const COMPARATORS = { gte: '>=', lt: '<', lte: '<=' } as const;

function predicateSql(p: Predicate, params: Param[]): string {
  if (p.op === 'eq') return equals(p.field, p.value as Scalar, params);
  if (p.op === 'in') {
    const values = p.value as readonly Scalar[];
    if (values.length === 0) return '0';
    return `(${values.map((v) => equals(p.field, v, params)).join(' OR ')})`;
  }
  const bound = p.value as string | number;
  params.push(bound);
  return `(${fieldExpr(p.field)} ${COMPARATORS[p.op]} ?${typeGuard(p.field, bound)})`;
}

/**
 * Documents strictly after the cursor in the sort order. Descending, documents without the field
 * sort last (as in MongoDB) and are below any cursor value, so they are included explicitly.
 */
function keysetSql(options: FindOptions, params: Param[]): string | null {
  const { after, sort } = options;
  if (!after) return null;
  const beyond = sort.direction === 'asc' ? '>' : '<';
  if (sort.field === '_id') {
    params.push(after.id);
    return `id ${beyond} ?`;
  }
  const expr = fieldExpr(sort.field);
  params.push(after.value, after.value, after.id);
  const nulls = sort.direction === 'desc' ? ` OR ${expr} IS NULL` : '';
  return `(${expr} ${beyond} ?${nulls} OR (${expr} = ? AND id ${beyond} ?))`;
}

export function findSql(table: string, options: FindOptions): SqlPart {
  checkFindOptions(options);
  const params: Param[] = [];
  const where = predicates(options.filter).map((p) => predicateSql(p, params));
  const keyset = keysetSql(options, params);
  if (keyset) where.push(keyset);
  const dir = options.sort.direction === 'asc' ? 'ASC' : 'DESC';
  const order = options.sort.field === '_id' ? `id ${dir}` : `${fieldExpr(options.sort.field)} ${dir}, id ${dir}`;
  params.push(options.limit);
  const sql = `SELECT id, doc FROM "${table}"${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ${order} LIMIT ?`;
  return { sql, params };
}

/** An index over the fields in order, then `id`, so that ties in a sort are read in index order too. */
export function indexSql(table: string, fields: readonly string[]): string {
  const columns = fields.filter((f) => f !== '_id').map(fieldExpr);
  // Commas cannot occur in a field, so two different field lists never share a name.
  const name = `ix_${table}(${fields.join(',')})`;
  return `CREATE INDEX IF NOT EXISTS "${name}" ON "${table}" (${[...columns, 'id'].join(', ')})`;
}

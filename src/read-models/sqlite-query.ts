import { type AggregateOptions, type FindOptions, type GroupKeyPart, type GroupValue, type IndexSpec, indexFields } from './port.js';
import { type Predicate, type Scalar, checkFindOptions, checkQueryField, predicates } from './validate.js';

// Filters and sorts as SQL over the JSON documents. Field paths are inlined as string literals (they
// are validated, never escaped): SQLite uses an expression index only when the query repeats its
// expression exactly, and a bound path would not. Values are always bound parameters.
//
// MongoDB compares only values of the same type (5 never equals '5', $lt 'z' never matches a
// number, true never equals 1); json_extract would blur those, so every comparison also checks
// json_type. The index still narrows on the json_extract part.

type Param = string | number | null;

export interface SqlPart {
  readonly sql: string;
  readonly params: Param[];
}

/** The SQL expression for a field: the `id` column for `_id`, else the JSON value at its path. */
function fieldExpr(field: string): string {
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

/**
 * A filter condition. `walking`: the statement reads a key field in order along its index, and a
 * range on another field must not lead SQLite to read that field's index instead (then sort every
 * row in the range): the range is checked on each row read (`+` makes the expression one no index
 * matches). Equalities still narrow the walk, along an index on them then the key field.
 */
function predicateSql(p: Predicate, params: Param[], walking?: string): string {
  if (p.op === 'eq') return equals(p.field, p.value as Scalar, params);
  if (p.op === 'in') {
    const values = p.value as readonly Scalar[];
    if (values.length === 0) return '0';
    return `(${values.map((v) => equals(p.field, v, params)).join(' OR ')})`;
  }
  const bound = p.value as string | number;
  params.push(bound);
  const expr = walking !== undefined && walking !== p.field ? `+${fieldExpr(p.field)}` : fieldExpr(p.field);
  return `(${expr} ${COMPARATORS[p.op]} ?${typeGuard(p.field, bound)})`;
}

/**
 * Documents strictly after the cursor, as the conditions of the statements that read them in
 * order: `field > x OR (field = x AND id > y)` (ascending; `<` descending) is written as the range
 * `field >= x` with the tie broken inside it, which SQLite reads as a bounded range of an index on
 * (filter fields…, field, id), so a deep page reads about a page of entries rather than every one
 * ahead of the cursor. Descending, documents without the field sort last and are below any value:
 * a second statement reads them, along the same index, once the range is exhausted.
 */
function keysetArms(options: FindOptions): Array<{ where: string; params: Param[]; order?: string }> {
  const { after, sort } = options;
  if (!after) return [{ where: '', params: [] }];
  const beyond = sort.direction === 'asc' ? '>' : '<';
  if (sort.field === '_id') return [{ where: `id ${beyond} ?`, params: [after.id] }];
  const expr = fieldExpr(sort.field);
  const arms: Array<{ where: string; params: Param[]; order?: string }> = [
    { where: `${expr} ${beyond}= ? AND (${expr} ${beyond} ? OR id ${beyond} ?)`, params: [after.value, after.value, after.id] },
  ];
  // Ordered by id alone: the field is null throughout, and SQLite would sort rather than see it.
  if (sort.direction === 'desc') arms.push({ where: `${expr} IS NULL`, params: [], order: 'id DESC' });
  return arms;
}

/**
 * The statements that read one page, in order: the caller runs each in turn until it has `limit`
 * documents. Each ends in `LIMIT ?`, which the caller binds to what is left of the page.
 */
export function findSql(table: string, options: FindOptions): SqlPart[] {
  checkFindOptions(options);
  const dir = options.sort.direction === 'asc' ? 'ASC' : 'DESC';
  const order = options.sort.field === '_id' ? `id ${dir}` : `${fieldExpr(options.sort.field)} ${dir}, id ${dir}`;
  return keysetArms(options).map((arm) => {
    const params: Param[] = [];
    const where = predicates(options.filter).map((p) => predicateSql(p, params));
    if (arm.where) where.push(arm.where);
    params.push(...arm.params);
    const sql = `SELECT id, doc FROM "${table}"${where.length ? ` WHERE ${where.join(' AND ')}` : ''} ORDER BY ${arm.order ?? order} LIMIT ?`;
    return { sql, params };
  });
}

/** The name of the index over these fields: commas cannot occur in a field, so two lists never share one. */
const indexName = (table: string, fields: readonly string[]) => `ix_${table}(${fields.join(',')})`;

/** The fields of each index of the table, from their names (see indexName). */
export function indexedFields(table: string, names: readonly string[]): string[][] {
  const prefix = `ix_${table}(`;
  return names.filter((name) => name.startsWith(prefix) && name.endsWith(')')).map((name) => name.slice(prefix.length, -1).split(','));
}

/**
 * Whether a page of groups can walk the first key field along an index: one on that field, alone
 * or after fields the filter holds equal. Without one, a range in the filter is better read along
 * its own index.
 */
export function walksLeadingField(options: AggregateOptions, indexes: readonly string[][]): boolean {
  const field = options.key[0]?.field;
  if (field === undefined || options.key[0]!.steps) return false;
  const equal = new Set(predicates(options.filter).filter((p) => p.op === 'eq').map((p) => p.field));
  return indexes.some((fields) => {
    let i = 0;
    while (i < fields.length && fields[i] !== field && equal.has(fields[i]!)) i++;
    return fields[i] === field;
  });
}

/**
 * The statements that make an index over the fields in order, then `id`, so that ties in a sort are
 * read in index order too. A partial index is named apart (so indexedFields leaves it out: it
 * cannot serve a walk over every value of its first field) and replaces the full index over the
 * same fields that an earlier release made.
 */
export function indexSql(table: string, spec: IndexSpec): string[] {
  const fields = indexFields(spec);
  const columns = fields.filter((f) => f !== '_id').map(fieldExpr);
  const full = indexName(table, fields);
  if (!('whereSet' in spec)) return [`CREATE INDEX IF NOT EXISTS "${full}" ON "${table}" (${[...columns, 'id'].join(', ')})`];
  // SQLite uses it for a query whose WHERE implies this one: `x = ?`, `x < ?`… do, for the same x.
  const partial = `${full} where ${spec.whereSet} set`;
  return [
    `DROP INDEX IF EXISTS "${full}"`,
    `CREATE INDEX IF NOT EXISTS "${partial}" ON "${table}" (${[...columns, 'id'].join(', ')}) WHERE ${fieldExpr(spec.whereSet)} IS NOT NULL`,
  ];
}

// Grouping. A key part is a field's value or the label of the step the value falls in; steps are
// searched as a balanced tree of CASEs, so a year of days costs about nine comparisons a row.

function keyPartSql(part: GroupKeyPart, params: Param[]): string {
  const expr = fieldExpr(part.field);
  const steps = part.steps;
  if (!steps) return expr;
  // The value is at or above steps[lo].from and below steps[hi].from.
  const within = (lo: number, hi: number): string => {
    if (hi - lo === 1) {
      params.push(steps[lo]!.label);
      return '?';
    }
    const mid = (lo + hi) >> 1;
    params.push(steps[mid]!.from);
    const at = `${expr} >= ?`;
    const upper = within(mid, hi);
    return `CASE WHEN ${at} THEN ${upper} ELSE ${within(lo, mid)} END`;
  };
  params.push(steps[0]!.from);
  const at = `${expr} >= ?`;
  return `CASE WHEN ${at} THEN ${within(0, steps.length)} END`;
}

/** x after c in key order: null first, then strings. */
function afterSql(expr: string, c: GroupValue, params: Param[]): string {
  if (c === null) return `${expr} IS NOT NULL`;
  params.push(c);
  return `${expr} > ?`;
}

function sameSql(expr: string, c: GroupValue, params: Param[]): string {
  if (c === null) return `${expr} IS NULL`;
  params.push(c);
  return `${expr} = ?`;
}

/** Groups strictly after the cursor: (k0 > c0) OR (k0 = c0 AND (k1 > c1 OR …)). */
function groupKeysetSql(columns: readonly string[], after: readonly GroupValue[], params: Param[]): string {
  if (columns.length === 0) return '0';
  const [first, ...rest] = columns;
  const beyond = afterSql(first!, after[0]!, params);
  if (rest.length === 0) return beyond;
  const same = sameSql(first!, after[0]!, params);
  return `(${beyond} OR (${same} AND ${groupKeysetSql(rest, after.slice(1), params)}))`;
}

/** The range of the first key field a page reads: from the cursor's value to the last value it needs. */
export interface LeadingWindow {
  readonly from?: GroupValue;
  readonly to?: GroupValue;
}

/**
 * The window as alternatives, each read along an index on the field: SQLite cannot seek
 * `x IS NULL OR x <= ?` as one range, so nulls and strings up to the bound are read apart.
 */
function windowArms(field: string, window: LeadingWindow): Array<(params: Param[]) => string[]> {
  const expr = fieldExpr(field);
  const { from, to } = window;
  // Null sorts first: a lower bound of null bounds nothing, an upper bound of null leaves only null.
  if (to === null) return [() => [`${expr} IS NULL`]];
  if (typeof from === 'string') {
    return [
      (params) => {
        params.push(from);
        if (typeof to !== 'string') return [`${expr} >= ?`];
        params.push(to);
        return [`${expr} >= ?`, `${expr} <= ?`];
      },
    ];
  }
  if (typeof to !== 'string') return [() => []];
  return [
    () => [`${expr} IS NULL`],
    (params) => {
      params.push(to);
      return [`${expr} <= ?`];
    },
  ];
}

/**
 * The distinct values of the first key field from the cursor's on, in order, at most `limit`:
 * read along an index on that field, they tell how far a page of groups reaches. `walking`: the
 * table has such an index (alone or after equality-filtered fields), and it is to be read.
 */
export function leadingValuesSql(table: string, options: AggregateOptions, limit: number, walking = false): SqlPart {
  const field = options.key[0]!.field;
  const params: Param[] = [];
  const where = predicates(options.filter).map((p) => predicateSql(p, params, walking ? field : undefined));
  const from = options.after?.[0];
  if (typeof from === 'string') {
    params.push(from);
    where.push(`${fieldExpr(field)} >= ?`);
  }
  params.push(limit);
  const expr = fieldExpr(field);
  const sql = `SELECT ${expr} AS v FROM "${table}"${where.length ? ` WHERE ${where.join(' AND ')}` : ''} GROUP BY ${expr} ORDER BY ${expr} LIMIT ?`;
  return { sql, params };
}

/**
 * One page of groups: `k0…` the key parts, `s0…` the sums, in key order after the cursor. With a
 * `window`, only documents whose first key field lies in it are read; `walking` as for
 * leadingValuesSql.
 */
export function aggregateSql(table: string, options: AggregateOptions, window?: LeadingWindow, walking = false): SqlPart {
  const params: Param[] = [];
  const columns = options.key.map((_, i) => `k${i}`);
  // Only numbers are summed, as MongoDB's $sum does.
  const sums = options.sum.map((field, i) => {
    checkQueryField(field);
    return `COALESCE(SUM(CASE WHEN json_type(doc, '$.${field}') IN ('integer', 'real') THEN json_extract(doc, '$.${field}') END), 0) AS s${i}`;
  });
  // Each arm groups documents of its own values of the first field, so no group spans two arms.
  const arms = window ? windowArms(options.key[0]!.field, window) : [() => []];
  const inner = arms.map((arm) => {
    const keys = options.key.map((part, i) => `${keyPartSql(part, params)} AS k${i}`);
    const where = predicates(options.filter).map((p) => predicateSql(p, params, window && walking ? options.key[0]!.field : undefined));
    where.push(...arm(params));
    return (
      `SELECT ${[...keys, ...sums, 'COUNT(*) AS n'].join(', ')} FROM "${table}"` +
      `${where.length ? ` WHERE ${where.join(' AND ')}` : ''}${columns.length ? ` GROUP BY ${columns.join(', ')}` : ''}`
    );
  });
  const outer = ['n > 0'];
  if (options.after) outer.push(groupKeysetSql(columns, options.after, params));
  params.push(options.limit);
  const sql = `SELECT * FROM (${inner.join(' UNION ALL ')}) WHERE ${outer.join(' AND ')}${columns.length ? ` ORDER BY ${columns.join(', ')}` : ''} LIMIT ?`;
  return { sql, params };
}

import type Database from 'better-sqlite3';
import type { AggregateOptions, Group, GroupValue } from './port.js';
import { type LeadingWindow, aggregateSql, indexedFields, leadingValuesSql, walksLeadingField } from './sqlite-query.js';

/**
 * One page of an aggregate of `table`, on whichever connection `prepare` belongs to (the store's
 * own, or its reader thread's), inside one read transaction the caller holds so that both
 * statements see one state of the file. `indexNames`: the table's indexes, which decide whether
 * the page walks the index of its first grouped field.
 */
export function aggregatePage(prepare: (sql: string) => Database.Statement, table: string, indexNames: readonly string[], options: AggregateOptions): Group[] {
  let window: LeadingWindow | undefined;
  const walking = walksLeadingField(options, indexedFields(table, indexNames));
  if (options.key[0] && !options.key[0].steps) {
    // The groups of a page lie within the next `limit + 1` values of the first field: each
    // value past the cursor's is at least one group (see AggregateOptions).
    const leading = leadingValuesSql(table, options, options.limit + 1, walking);
    const values = (prepare(leading.sql).all(...leading.params) as Array<{ v: GroupValue }>).map((r) => r.v);
    const from = options.after?.[0];
    window = { ...(from !== undefined ? { from } : {}), ...(values.length > options.limit ? { to: values.at(-1)! } : {}) };
  }
  const { sql, params } = aggregateSql(table, options, window, walking);
  const rows = prepare(sql).all(...params) as Array<Record<string, GroupValue | number>>;
  return rows.map((row) => ({
    key: options.key.map((_, i) => row[`k${i}`] as GroupValue),
    sums: Object.fromEntries(options.sum.map((field, i) => [field, row[`s${i}`] as number])),
  }));
}

export const INDEX_NAMES_SQL = `SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = ?`;
export const TABLE_EXISTS_SQL = `SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?`;

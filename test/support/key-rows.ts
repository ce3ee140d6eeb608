import Database from 'better-sqlite3';
import { join } from 'node:path';
import { KEYS_FILE } from '../../src/personal-data/embedded-key-store.js';

/** Every wrapped value keys.db holds, by id or secret name, read straight from the file. */
export function storedKeyRows(dataDir: string): Map<string, Buffer> {
  const db = new Database(join(dataDir, KEYS_FILE), { readonly: true });
  try {
    const rows = new Map<string, Buffer>();
    for (const row of db.prepare<[], { id: string; wrapped: Buffer }>('SELECT id, wrapped FROM data_keys').all()) rows.set(row.id, row.wrapped);
    for (const row of db.prepare<[], { name: string; value: Buffer }>('SELECT name, value FROM secrets').all()) rows.set(`secret ${row.name}`, row.value);
    return rows;
  } finally {
    db.close();
  }
}

// `leadpost backup --to DIR`: a consistent copy of the embedded stores while the service runs.
// Copying the files by hand is not one: a store in WAL mode keeps recent commits in its -wal file,
// and a copy taken while a commit lands can be torn. Each file is written with VACUUM INTO, which
// reads one snapshot (a read transaction: writers go on beside it, and it never restarts as the
// online backup API does when another process writes) into a new, compact file.
//
// The order makes the three snapshots fit together: the read models first (so their checkpoints
// are never ahead of the events restored beside them: the projections catch up on start), then the
// events, then the data keys (so every lead in the copy has its key, made before its append).
//
// The key store also holds keys no lead has yet: the pool's, stored a batch at a time ahead of
// use. Copied, they would be the keys of leads posted after the backup, so the copy (and the master
// key) would open a consumer who first posted after it and was erased since, in any later events.db.
// The copy keeps only the keys its own events name.
//
// Lead ids: the live service goes on reserving blocks of them after the copy is taken, and a store
// restored from the copy knows nothing of those; it would hand the same ids out again, to other
// consumers, under the same `Idempotency-Key: lead-<id>` a buyer drops repeats by. So the copy's
// events end with one more reservation, of the next RESTORE_ID_GAP ids, in the copy only: a
// restored store's first id is past any the live one can have given out since.

import Database from 'better-sqlite3';
import { chmodSync, closeSync, copyFileSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { LEAD_ID_BLOCKS_STREAM, leadIdBlocksDecider } from '../commands/lead-ids.js';
import { handleCommand } from '../commands/handler.js';
import { loadConfig } from '../config.js';
import { EmbeddedEventStore } from '../event-store/embedded/embedded-event-store.js';
import { EVENTS_FILE } from '../event-store/embedded/schema.js';
import { KEYS_FILE } from '../personal-data/embedded-key-store.js';
import { masterKeyOpens } from '../personal-data/data-keys.js';
import { MASTER_KEY_FILE, MasterKeyError, loadMasterKey } from '../personal-data/master-key.js';
import { READ_MODELS_FILE } from '../read-models/embedded-schema.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs } from './usage.js';

const USAGE = `usage: leadpost backup --to DIR [--with-master-key] [--json]

Copies the embedded stores of LEADPOST_DATA_DIR into DIR (a new or empty directory), each file a
consistent snapshot taken while the service runs: readmodels.db, then events.db, then keys.db
(the data keys of the leads in the copy only, not the unused ones of the pool), each checked
after it is written. Stores on a server (EVENTSTORE_URL, MONGODB_URL) are named and
left to that server's own backup. The master key is copied only with --with-master-key: keep it
apart from the data it protects (a secret store), as the service's own is meant to be.
--json: what was copied, as one JSON object.`;

interface Copied {
  readonly file: string;
  readonly bytes: number;
}

export async function runBackupCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let values;
  try {
    ({ values } = readArgs(args, { to: { type: 'string' }, 'with-master-key': { type: 'boolean' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }));
    if (!values.help && (typeof values.to !== 'string' || values.to === '')) throw new UsageError('--to DIR is required');
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost backup: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  const config = loadConfig(env);
  const target = resolve(String(values.to));
  const onServers = [...(config.mongoUrl ? ['read models and data keys (MONGODB_URL)'] : []), ...(config.eventStoreUrl ? ['events (EVENTSTORE_URL)'] : [])];
  const files = [...(config.mongoUrl ? [] : [READ_MODELS_FILE]), ...(config.eventStoreUrl ? [] : [EVENTS_FILE]), ...(config.mongoUrl ? [] : [KEYS_FILE])];
  if (files.length === 0) {
    io.err.write(`leadpost backup: nothing here is embedded: the ${onServers.join(' and the ')} are on servers; back them up with their own tools\n`);
    return 1;
  }
  const missing = files.find((file) => !isFile(join(config.dataDir, file)));
  if (missing) {
    io.err.write(`leadpost backup: ${join(config.dataDir, missing)} does not exist: is LEADPOST_DATA_DIR the service's data dir?\n`);
    return 1;
  }
  const problem = unusableTarget(target);
  if (problem) {
    io.err.write(`leadpost backup: ${target} ${problem}\n`);
    return 1;
  }
  // The master key is read before anything is copied: one that is missing or malformed is said at
  // once, in words, rather than after every store was copied.
  let masterKey: Buffer | null = null;
  if (values['with-master-key'] === true) {
    try {
      masterKey = await loadMasterKey(config.masterKeyFile);
    } catch (error) {
      if (!(error instanceof MasterKeyError)) throw error;
      io.err.write(`leadpost backup: ${error.message}\n`);
      return 1;
    }
  }

  // Each file is written under a name of its own (.partial) and given its real name only once every
  // one is written and checked: a backup killed or failed half-way leaves no set of store files
  // that looks whole. Restored, such a set (events.db without its keys.db) started a service with
  // a new, empty key store: every lead unreadable, and new contact hashes under a new secret, which
  // match none of the old leads' for duplicates and erasures.
  const copied: Copied[] = [];
  let eventsHead: number | null = null;
  let keysLeftOut: number | null = null;
  let leadIdsFrom: number | null = null;
  for (const file of files) {
    let bytes = snapshot(join(config.dataDir, file), partial(target, file));
    if (file === EVENTS_FILE) {
      leadIdsFrom = await reserveLeadIdsPastTheCopy(target);
      bytes = statSync(partial(target, file)).size;
      eventsHead = head(partial(target, file));
    }
    if (file === KEYS_FILE && files.includes(EVENTS_FILE)) {
      keysLeftOut = keepKeysOfLeads(partial(target, KEYS_FILE), partial(target, EVENTS_FILE));
      bytes = statSync(partial(target, KEYS_FILE)).size;
    }
    // A key copied beside a keys.db it does not open is no backup: after a rotation, an environment
    // still naming the old key file wrote "backup written" sets that could never be restored.
    if (file === KEYS_FILE && masterKey && !opensKeysCopy(masterKey, partial(target, KEYS_FILE))) {
      io.err.write(
        `leadpost backup: the master key in ${config.masterKeyFile} (LEADPOST_MASTER_KEY_FILE) does not open the keys.db it copied: it is not the key they were stored with ` +
          '(after `leadpost master-key rotate`, point LEADPOST_MASTER_KEY_FILE at the new key file); this is no backup: only .partial files were written\n',
      );
      return 1;
    }
    copied.push({ file, bytes });
  }
  if (values['with-master-key'] === true) {
    copyFileSync(config.masterKeyFile, partial(target, MASTER_KEY_FILE));
    chmodSync(partial(target, MASTER_KEY_FILE), 0o600);
    syncFile(partial(target, MASTER_KEY_FILE));
    copied.push({ file: MASTER_KEY_FILE, bytes: statSync(partial(target, MASTER_KEY_FILE)).size });
  }
  syncFile(target);
  for (const { file } of copied) renameSync(partial(target, file), join(target, file));
  syncFile(target);

  if (values.json === true) {
    io.out.write(
      `${JSON.stringify({ to: target, files: copied, events_head_commit: eventsHead, unused_keys_left_out: keysLeftOut, restored_lead_ids_from: leadIdsFrom, on_servers: onServers, master_key: values['with-master-key'] === true })}\n`,
    );
    return 0;
  }
  for (const { file, bytes } of copied) io.out.write(`${file}  ${bytes} bytes\n`);
  if (eventsHead !== null) io.out.write(`events up to commit ${eventsHead}\n`);
  if (keysLeftOut !== null) io.out.write(`data keys no lead in the copy uses, left out: ${keysLeftOut}\n`);
  if (leadIdsFrom !== null) io.out.write(`a service restored from this copy gives lead ids from ${leadIdsFrom}\n`);
  for (const part of onServers) io.out.write(`not copied: the ${part}, on a server: use its own backup\n`);
  if (values['with-master-key'] !== true) io.out.write(`not copied: the master key (${config.masterKeyFile}): restore it from where you keep it\n`);
  io.out.write(`backup written to ${target}\n`);
  return 0;
}

/** Writes one snapshot of `source` to `destination`, checks it and makes it durable; its size. */
function snapshot(source: string, destination: string): number {
  // Owner-only from its first byte (VACUUM INTO takes an empty file): made by SQLite, it would be
  // readable by others, in a directory that may let them in, until the chmod below.
  closeSync(openSync(destination, 'wx', 0o600));
  const db = new Database(source, { readonly: true, fileMustExist: true });
  try {
    // A checkpoint or another process's write lock may hold the snapshot's start for a moment.
    db.pragma('busy_timeout = 10000');
    db.prepare('VACUUM INTO ?').run(destination);
  } catch (error) {
    // "database or disk is full" alone does not say which disk: the copy's, most likely.
    throw new Error(`the copy of ${source} to ${destination} failed: ${error instanceof Error ? error.message : String(error)}`, { cause: error });
  } finally {
    db.close();
  }
  const copy = new Database(destination, { readonly: true, fileMustExist: true });
  try {
    const result = copy.pragma('integrity_check', { simple: true });
    if (result !== 'ok') throw new Error(`the copy of ${source} failed its integrity check: ${String(result)}`);
  } finally {
    copy.close();
  }
  // Sealed leads, wrapped keys: the copy is as private as the original.
  chmodSync(destination, 0o600);
  syncFile(destination);
  return statSync(destination).size;
}

/** Where `file` is written until the whole backup is: a name no store or restore takes for a store file. */
const partial = (target: string, file: string) => join(target, `${file}.partial`);

/** The newest commit position in an events file (-1: none). */
function head(file: string): number {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return (db.prepare('SELECT max(position) FROM commits').pluck().get() as number | null) ?? -1;
  } finally {
    db.close();
  }
}

/** Why the backup cannot go to `target`, or undefined (made here, empty, owner-only). */
function unusableTarget(target: string): string | undefined {
  try {
    if (readdirSync(target).length > 0) return 'is not empty: give a new or empty directory, so that no earlier backup is mixed with this one';
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOTDIR') return 'is not a directory';
    if (code !== 'ENOENT') return `cannot be read (${code ?? 'unknown error'})`;
  }
  try {
    // Not recursive: the parent is the operator's to choose, and a typo should not make a tree.
    mkdirSync(target, { mode: 0o700 });
    return undefined;
  } catch (error) {
    return `cannot be created (${(error as NodeJS.ErrnoException).code ?? 'unknown error'}): its parent must exist and be writable`;
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** Whether `masterKey` opens the entries of the keys copy it is to go with (one secret and one data key, those it has). */
function opensKeysCopy(masterKey: Buffer, keysCopy: string): boolean {
  const db = new Database(keysCopy, { readonly: true, fileMustExist: true });
  try {
    const secret = db.prepare('SELECT name, value FROM secrets LIMIT 1').get() as { name: string; value: Buffer } | undefined;
    const dataKey = db.prepare('SELECT id, wrapped FROM data_keys LIMIT 1').get() as { id: string; wrapped: Buffer } | undefined;
    return (!secret || masterKeyOpens(masterKey, { secret: secret.name }, secret.value)) && (!dataKey || masterKeyOpens(masterKey, { dataKey: dataKey.id }, dataKey.wrapped));
  } finally {
    db.close();
  }
}

/**
 * Deletes from the keys copy every data key that no LeadReceived of the events copy names (the
 * pool's keys, for leads not posted yet), with secure_delete and then a VACUUM, so that no byte of
 * them is left in the file; how many went. Secrets (the contact hashes' key) and the record of
 * destroyed keys stay.
 */
function keepKeysOfLeads(keysCopy: string, eventsCopy: string): number {
  const db = new Database(keysCopy, { fileMustExist: true });
  try {
    db.pragma('secure_delete = ON');
    db.prepare('ATTACH DATABASE ? AS copied_events').run(eventsCopy);
    // A lead's first commit holds its LeadReceived first, sealed with its key's id in lead.pii.key.
    db.exec(`CREATE TEMP TABLE used_keys (id TEXT PRIMARY KEY) WITHOUT ROWID;
      INSERT OR IGNORE INTO used_keys
        SELECT json_extract(events, '$[0][2].lead.pii.key') FROM copied_events.commits
        WHERE first_revision = 0 AND stream GLOB 'lead-*' AND json_extract(events, '$[0][1]') = 'LeadReceived'
          AND json_extract(events, '$[0][2].lead.pii.key') IS NOT NULL`);
    const removed = db.prepare('DELETE FROM data_keys WHERE id NOT IN (SELECT id FROM used_keys)').run().changes;
    db.exec('DETACH DATABASE copied_events');
    db.exec('VACUUM');
    return removed;
  } finally {
    db.close();
  }
}

/**
 * Far more ids than a service gives out between a backup and its restore (a million leads a day
 * for over 27 years), far fewer than a lead id may hold (16 digits): the gap a copy reserves.
 */
const RESTORE_ID_GAP = 10_000_000_000;

/**
 * Appends to the events copy the reservation of the next RESTORE_ID_GAP lead ids (see the top of
 * this file), through the embedded store itself, in a directory of its own under `target` (the
 * store opens `events.db` of a data dir); the first id a restored store gives out.
 */
async function reserveLeadIdsPastTheCopy(target: string): Promise<number> {
  const staging = join(target, '.lead-ids');
  mkdirSync(staging, { mode: 0o700 });
  let from: number;
  try {
    renameSync(partial(target, EVENTS_FILE), join(staging, EVENTS_FILE));
    const store = await EmbeddedEventStore.open(staging);
    try {
      const now = new Date().toISOString();
      const handled = await handleCommand(store, LEAD_ID_BLOCKS_STREAM, leadIdBlocksDecider, { blockSize: RESTORE_ID_GAP, instance: 'backup' }, {
        metadata: { occurred_at: now, causation_id: 'leadpost-backup', correlation_id: 'leadpost-backup' },
      });
      from = handled.events[0]!.data.to + 1;
    } finally {
      // Closing the last connection checkpoints the WAL into the file and removes it.
      await store.close();
    }
    renameSync(join(staging, EVENTS_FILE), partial(target, EVENTS_FILE));
  } finally {
    // A failure leaves no events.db under the target, whole or not: only .partial files.
    rmSync(staging, { recursive: true, force: true });
  }
  const copy = new Database(partial(target, EVENTS_FILE), { readonly: true, fileMustExist: true });
  try {
    const result = copy.pragma('quick_check', { simple: true });
    if (result !== 'ok') throw new Error(`the copy of the events failed its check after its lead-id reservation: ${String(result)}`);
  } finally {
    copy.close();
  }
  syncFile(partial(target, EVENTS_FILE));
  return from;
}

function syncFile(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

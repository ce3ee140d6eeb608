import { randomBytes } from 'node:crypto';
import { type Stats, existsSync, statSync } from 'node:fs';
import { link, open, readFile, stat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { makeDirectory } from '../make-directory.js';
import { KEY_BYTES } from './aes-gcm.js';

// The master key wraps every data key in the key store. It is a file of 32 random bytes, named by
// LEADPOST_MASTER_KEY_FILE (default: master.key in the data dir): made on the first start, as the
// self-signed TLS certificate is, so a fresh checkout runs with no setup; in production it is
// mounted from a secret store, away from the data it protects. Losing it makes every lead's
// personal data unreadable, so a file that is not exactly a key is refused, never replaced.

export const MASTER_KEY_FILE = 'master.key';

export class MasterKeyError extends Error {
  override readonly name = 'MasterKeyError';
}

/** What names a master key file: the variable of the key in use, or the option of a rotation's new one. */
type KeyFileSetting = 'LEADPOST_MASTER_KEY_FILE' | '--to';
const DEFAULT_SETTING: KeyFileSetting = 'LEADPOST_MASTER_KEY_FILE';

/**
 * The master key in `file`, made first when missing, unless `wrappedKeysFile` (the embedded key
 * store) is there: its keys were wrapped by a master key, which is then missing, not new. A restore
 * that left the key out, or a LEADPOST_MASTER_KEY_FILE pointed at a secret store the key was not
 * copied to, made a key of its own there, which opened none of them.
 */
export async function loadOrCreateMasterKey(file: string, wrappedKeysFile?: string): Promise<Buffer> {
  const found = await statIfExists(file);
  if (!found) {
    // Looked at again after the key store: another process starting on the same fresh data dir
    // makes the master key before its key store, so a key store found means its key is there now.
    if (wrappedKeysFile !== undefined && existsSync(wrappedKeysFile) && !existsSync(file)) {
      throw refused(file, `does not exist, while ${wrappedKeysFile} holds data keys wrapped by the master key they were stored with: put that key back (from a backup taken with --with-master-key, or the secret store you keep it in); a new one would open none of them, so none was made`);
    }
    await createKeyFile(file);
  }
  return readKeyFile(file);
}

async function statIfExists(file: string, setting: KeyFileSetting = DEFAULT_SETTING) {
  try {
    return await stat(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw refused(file, `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'unknown error'})`, error, setting);
  }
}

/**
 * The master key in `file`, which must be there: for a command that must not make one (a rotation).
 * `setting` is what named the file, said in a refusal: the operator fixes that one (a rotation's
 * `--to`, not the LEADPOST_MASTER_KEY_FILE of the key in use).
 */
export function loadMasterKey(file: string, setting: KeyFileSetting = DEFAULT_SETTING): Promise<Buffer> {
  return readKeyFile(file, setting);
}

/**
 * A new master key in `file`, which must not exist (else a MasterKeyError naming it): written and
 * synced, its directory too, before it is returned, so nothing is ever wrapped under a key that a
 * crash could lose.
 */
export async function createMasterKey(file: string, setting: KeyFileSetting = DEFAULT_SETTING): Promise<Buffer> {
  await createKeyFile(file, true, setting);
  const directory = await open(dirname(file), 'r');
  try {
    await directory.sync();
  } finally {
    await directory.close();
  }
  return readKeyFile(file, setting);
}

// Written aside with mode 0600 from the start, then linked into place: a link fails when the name
// exists, so two processes starting at once never overwrite each other's key (the loser reads
// the winner's), and a crash never leaves a half-written key under the name.
async function createKeyFile(file: string, refuseExisting = false, setting: KeyFileSetting = DEFAULT_SETTING): Promise<void> {
  makeDirectory(dirname(file), 0o700);
  const temporary = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  const handle = await open(temporary, 'wx', 0o600);
  try {
    await handle.writeFile(randomBytes(KEY_BYTES));
    await handle.sync();
  } finally {
    await handle.close();
  }
  try {
    await link(temporary, file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EEXIST' && refuseExisting) throw new MasterKeyError(`${file} exists already: a new master key is never written over a file`);
    if (code !== 'EEXIST') throw refused(file, `cannot be created (${code ?? 'unknown error'})`, error, setting);
  } finally {
    await unlink(temporary).catch(() => {});
  }
}

/** What is wrong with the file as it is, if anything. */
function problemOf(info: Stats): string | undefined {
  if (!info.isFile()) return 'is not a file';
  if ((info.mode & 0o077) !== 0) return `may be read or written by others than its owner (mode ${(info.mode & 0o777).toString(8).padStart(4, '0')}): make it 0600 or 0400`;
  if (info.size !== KEY_BYTES) return `must hold exactly ${KEY_BYTES} bytes, not ${info.size}`;
  return undefined;
}

/**
 * Why the master key file cannot be used, checked with the other settings before anything
 * starts; undefined when it is fine or does not exist yet (the first start makes it).
 */
export function masterKeyFileProblem(file: string): string | undefined {
  let info: Stats;
  try {
    info = statSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' ? undefined : refused(file, `cannot be read (${code ?? 'unknown error'})`).message;
  }
  const problem = problemOf(info);
  return problem === undefined ? undefined : refused(file, problem).message;
}

async function readKeyFile(file: string, setting: KeyFileSetting = DEFAULT_SETTING): Promise<Buffer> {
  const info = await statIfExists(file, setting);
  if (!info) throw refused(file, 'does not exist', undefined, setting);
  const problem = problemOf(info);
  if (problem !== undefined) throw refused(file, problem, undefined, setting);
  let key: Buffer;
  try {
    key = await readFile(file);
  } catch (error) {
    throw refused(file, `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'unknown error'})`, error, setting);
  }
  if (key.length !== KEY_BYTES) throw refused(file, `must hold exactly ${KEY_BYTES} bytes, not ${key.length}`, undefined, setting);
  return key;
}

const refused = (file: string, why: string, cause?: unknown, setting: KeyFileSetting = DEFAULT_SETTING) =>
  new MasterKeyError(`the master key file ${file} (${setting}) ${why}`, cause === undefined ? undefined : { cause });

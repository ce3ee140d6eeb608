// TLS material: the operator's files when given, else a self-signed certificate for localhost kept
// in the data dir, so a fresh checkout serves HTTPS with no setup and keeps one identity afterwards.

import { createPrivateKey, X509Certificate, type KeyObject } from 'node:crypto';
import { chmod, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { generate } from 'selfsigned';
import { makeDirectory } from '../make-directory.js';

export interface TlsOptions {
  readonly dataDir: string;
  readonly certFile?: string;
  readonly keyFile?: string;
}

export interface TlsMaterial {
  readonly cert: string;
  readonly key: string;
  readonly selfSigned: boolean;
}

const VALID_DAYS = 365;
// Renew a little before the end so a long-running process started on the last day still serves.
const RENEW_BEFORE_MS = 7 * 24 * 3600 * 1000;
/** How often a start waiting for another to make the self-signed pair looks again. */
const LOCK_POLL_MS = 20;
/** Far longer than making and writing a pair takes (a few milliseconds): a lock this old is a dead process's. */
const STALE_LOCK_MS = 10_000;

export async function loadOrCreateTls(options: TlsOptions): Promise<TlsMaterial> {
  const { certFile, keyFile } = options;
  if (certFile || keyFile) {
    if (!certFile || !keyFile) {
      throw new Error('TLS needs both a certificate and a key file (TLS_CERT_FILE and TLS_KEY_FILE); only one was given');
    }
    return { ...(await readPair(certFile, keyFile)), selfSigned: false };
  }
  return { ...(await selfSignedPair(join(options.dataDir, 'tls'))), selfSigned: true };
}

async function readPair(certFile: string, keyFile: string): Promise<{ cert: string; key: string }> {
  const cert = await readText(certFile, 'certificate');
  const key = await readText(keyFile, 'private key');
  checkPair(cert, key, certFile, keyFile);
  return { cert, key };
}

function checkPair(cert: string, key: string, certFile: string, keyFile: string): X509Certificate {
  const x509 = parseCert(cert, certFile);
  if (!x509.checkPrivateKey(parseKey(key, keyFile))) {
    throw new Error(`the TLS private key ${keyFile} does not belong to the certificate ${certFile}`);
  }
  return x509;
}

/**
 * The service's own pair, in the data dir: reused while it is whole and not expiring, else made
 * anew. Several processes starting on a new data dir at once each made a pair, and their writes
 * could interleave (one's key, another's certificate): every later start was refused. So one
 * process at a time makes it, holding a lock file, and the others wait and read what it made.
 */
async function selfSignedPair(dir: string): Promise<{ cert: string; key: string }> {
  const certFile = join(dir, 'cert.pem');
  const keyFile = join(dir, 'key.pem');
  const lockFile = join(dir, 'create.lock');
  makeDirectory(dir, 0o700);
  for (;;) {
    const found = await usablePair(certFile, keyFile);
    if (found) return found;
    if (await takeLock(lockFile)) {
      try {
        // Made meanwhile by the process that held the lock before.
        const made = await usablePair(certFile, keyFile);
        if (made) return made;
        const created = await createSelfSigned();
        await writeAtomically(keyFile, created.key, 0o600);
        await writeAtomically(certFile, created.cert, 0o644);
        return created;
      } finally {
        await rm(lockFile, { force: true });
      }
    }
    await new Promise((resolve) => setTimeout(resolve, LOCK_POLL_MS));
  }
}

/**
 * Both files, when they are there, belong together and are not about to expire; else undefined,
 * and they are made again. One missing means a start died between the two writes, and a pair
 * that does not belong together is what two starts racing before the lock left: the service's
 * own pair is then useless, and made again rather than refused (an operator's is refused).
 */
async function usablePair(certFile: string, keyFile: string): Promise<{ cert: string; key: string } | undefined> {
  const [cert, key] = await Promise.all([readIfExists(certFile), readIfExists(keyFile)]);
  if (cert === undefined || key === undefined) return undefined;
  let x509: X509Certificate;
  try {
    x509 = checkPair(cert, key, certFile, keyFile);
  } catch {
    return undefined;
  }
  return Date.parse(x509.validTo) - Date.now() > RENEW_BEFORE_MS ? { cert, key } : undefined;
}

/**
 * Takes the lock for making the pair: true when this process made the lock file, which names its
 * host and process id. A lock is a dead process's, and is removed to be taken anew, when the
 * process it names on this host is gone (a start killed while making the pair: the next start
 * then goes on at once rather than waiting with nothing said), or when it is older than
 * STALE_LOCK_MS (a lock that names no process, or one on another host sharing the directory).
 */
async function takeLock(lockFile: string): Promise<boolean> {
  try {
    const handle = await open(lockFile, 'wx', 0o600);
    try {
      await handle.writeFile(`${hostname()} ${process.pid}\n`);
    } finally {
      await handle.close();
    }
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
  const [since, holder] = await Promise.all([
    stat(lockFile).then((found) => found.mtimeMs, () => Date.now()),
    readIfExists(lockFile),
  ]);
  if (Date.now() - since > STALE_LOCK_MS || (holder !== undefined && heldByDeadProcess(holder))) await rm(lockFile, { force: true });
  return false;
}

/** Whether a lock's text names a process of this host that no longer runs. */
function heldByDeadProcess(holder: string): boolean {
  const match = /^(\S+) (\d+)\n$/.exec(holder);
  if (!match || match[1] !== hostname()) return false;
  const pid = Number(match[2]);
  if (pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    // EPERM: it runs, as another user.
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

async function createSelfSigned(): Promise<{ cert: string; key: string }> {
  const notBefore = new Date();
  const notAfter = new Date(notBefore.getTime() + VALID_DAYS * 24 * 3600 * 1000);
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    notBeforeDate: notBefore,
    notAfterDate: notAfter,
    extensions: [
      { name: 'basicConstraints', cA: false, critical: true },
      { name: 'keyUsage', digitalSignature: true, critical: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  return { cert: pems.cert, key: pems.private };
}

// Written aside and renamed so a crash never leaves a half-written PEM behind; the mode is set at
// creation so the key is never readable by others, not even for a moment.
async function writeAtomically(file: string, text: string, mode: number): Promise<void> {
  const temporary = `${file}.${process.pid}.tmp`;
  await writeFile(temporary, text, { mode, flag: 'w' });
  await chmod(temporary, mode);
  await rename(temporary, file);
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    throw new Error(`cannot read the TLS ${what} file ${file} (${reason})`, { cause: error });
  }
}

async function readIfExists(file: string): Promise<string | undefined> {
  try {
    return await readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new Error(`cannot read the TLS file ${file} (${(error as NodeJS.ErrnoException).code ?? 'unknown error'})`, { cause: error });
  }
}

function parseCert(pem: string, file: string): X509Certificate {
  try {
    return new X509Certificate(pem);
  } catch (error) {
    throw new Error(`the TLS certificate file ${file} does not hold a PEM certificate`, { cause: error });
  }
}

function parseKey(pem: string, file: string): KeyObject {
  try {
    return createPrivateKey(pem);
  } catch (error) {
    throw new Error(`the TLS private key file ${file} does not hold an unencrypted PEM private key`, { cause: error });
  }
}

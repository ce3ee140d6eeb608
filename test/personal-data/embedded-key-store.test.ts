import { expect } from 'chai';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedKeyStore, KEYS_FILE } from '../../src/personal-data/embedded-key-store.js';
import { PersonalDataKeys } from '../../src/personal-data/index.js';
import { isStoreUnavailable } from '../../src/store-unavailable.js';
import { rejection } from '../support/rejection.js';
import { tempDir } from '../support/tmp.js';
import { keyStoreContract } from './key-store-contract.js';

const newKeys = (count: number) => Array.from({ length: count }, () => ({ id: randomBytes(16).toString('hex'), wrapped: randomBytes(60) }));

/** Whether `promise` has settled, looked at after a few turns of the event loop (timers included): the loop kept turning meanwhile. */
async function settledAfterTurns(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  for (let turn = 0; turn < 5; turn++) await new Promise((resolve) => setTimeout(resolve, 5));
  return settled;
}

describe('embedded key store (keys.db)', function () {
  const dir = tempDir('key-store');
  after(() => dir.remove());

  keyStoreContract('embedded SQLite', async () => EmbeddedKeyStore.open(dir.path));

  it('is its own file, owner-only, beside the event store', async function () {
    const own = tempDir('key-store-file');
    try {
      const store = EmbeddedKeyStore.open(own.path);
      await store.create([{ id: randomBytes(16).toString('hex'), wrapped: randomBytes(60) }]);
      await store.close();
      expect(statSync(join(own.path, KEYS_FILE)).mode & 0o777).to.equal(0o600);
    } finally {
      own.remove();
    }
  });

  it("a second open in one process (the background thread's) keeps the first connection's lock on keys.db, which tells another program's sqlite3 the WAL is in use", async function () {
    const own = tempDir('key-store-locks');
    try {
      const file = join(own.path, KEYS_FILE);
      // This process's POSIX locks on the file, as the kernel lists them (Linux).
      const locksHeld = () => {
        const inode = statSync(file).ino;
        return readFileSync('/proc/locks', 'utf8')
          .split('\n')
          .filter((line) => line.split(/\s+/)[4] === String(process.pid) && line.split(/\s+/)[5]?.endsWith(`:${inode}`)).length;
      };
      const first = EmbeddedKeyStore.open(own.path);
      await first.create(newKeys(3));
      expect(locksHeld(), 'the open connection holds its lock').to.be.above(0);
      // Closing any descriptor of a file drops all of a process's locks on it: without them, the
      // sqlite3 shell of an operator, closing, took itself for the last connection and deleted the
      // WAL this process went on writing keys to (and erasures undone at the next clean stop).
      const second = EmbeddedKeyStore.open(own.path);
      expect(locksHeld(), 'held after a second open').to.be.above(0);
      await second.close();
      await first.close();
    } finally {
      own.remove();
    }
  });

  it('a destroyed key leaves no byte of it in keys.db or its WAL', async function () {
    const own = tempDir('key-store-destroy');
    try {
      const store = EmbeddedKeyStore.open(own.path);
      const keys = Array.from({ length: 50 }, () => ({ id: randomBytes(16).toString('hex'), wrapped: randomBytes(60) }));
      await store.create(keys);
      const victim = keys[17]!;
      const onDisk = () => [KEYS_FILE, `${KEYS_FILE}-wal`].map((f) => join(own.path, f)).filter(existsSync).map((f) => readFileSync(f));
      expect(onDisk().some((bytes) => bytes.includes(victim.wrapped))).to.equal(true);
      await store.destroy([victim.id]);
      expect(onDisk().some((bytes) => bytes.includes(victim.wrapped))).to.equal(false);
      // The others are where they were.
      expect(onDisk().some((bytes) => bytes.includes(keys[18]!.wrapped))).to.equal(true);
      await store.close();
    } finally {
      own.remove();
    }
  });

  describe('while another connection holds keys.db locked (an operator\'s sqlite3 shell, `leadpost erase`, a second instance)', function () {
    let own: ReturnType<typeof tempDir>;
    let other: Database.Database;
    beforeEach(() => {
      own = tempDir('key-store-lock');
    });
    afterEach(() => {
      if (other?.open) other.close();
      own.remove();
    });
    const holdLock = (how: 'write' | 'read') => {
      other = new Database(join(own.path, KEYS_FILE));
      if (how === 'write') other.exec('BEGIN IMMEDIATE');
      else {
        other.exec('BEGIN');
        other.prepare('SELECT count(*) FROM data_keys').get();
      }
    };

    it('a batch of new keys waits for the write lock between turns of the event loop, and is stored once the lock is released', async function () {
      const store = EmbeddedKeyStore.open(own.path);
      try {
        const keys = newKeys(3);
        holdLock('write');
        const created = store.create(keys);
        expect(await settledAfterTurns(created)).to.equal(false);
        other.exec('ROLLBACK');
        await created;
        const found = await store.fetch(keys.map((k) => k.id));
        expect(found.get(keys[2]!.id)).to.deep.equal(keys[2]!.wrapped);
      } finally {
        await store.close();
      }
    });

    it('a destroy waits for a reader of another connection before it empties the WAL, the event loop turning meanwhile; then no byte of the key is left', async function () {
      const store = EmbeddedKeyStore.open(own.path);
      try {
        const keys = newKeys(20);
        await store.create(keys);
        const victim = keys[7]!;
        // A read left open: its snapshot holds the WAL, which a TRUNCATE checkpoint must wait for.
        holdLock('read');
        const destroyed = store.destroy([victim.id]);
        expect(await settledAfterTurns(destroyed)).to.equal(false);
        other.exec('COMMIT');
        await destroyed;
        const onDisk = [KEYS_FILE, `${KEYS_FILE}-wal`].map((f) => join(own.path, f)).filter(existsSync).map((f) => readFileSync(f));
        expect(onDisk.some((bytes) => bytes.includes(victim.wrapped))).to.equal(false);
        expect((await store.fetch([victim.id])).get(victim.id)).to.equal(null);
      } finally {
        await store.close();
      }
    });

    it('a secret made before is read without the write lock: a command started while another process writes keys does not wait for it', async function () {
      const store = EmbeddedKeyStore.open(own.path, { busyTimeoutMs: 50 });
      try {
        const made = await store.secret('contact-hashing', randomBytes(32));
        holdLock('write');
        expect(await store.secret('contact-hashing', randomBytes(32))).to.deep.equal(made);
        // A secret not made yet still needs the lock, and waits for it as any write does.
        expect(String(await rejection(store.secret('another', randomBytes(32))))).to.match(/locked|busy/i);
      } finally {
        await store.close();
      }
    });

    it('a write kept waiting past the busy timeout fails SQLITE_BUSY, which the data keys report as the store unavailable (a 503), and the store recovers', async function () {
      const store = EmbeddedKeyStore.open(own.path, { busyTimeoutMs: 50 });
      const keys = new PersonalDataKeys(store, randomBytes(32), { batchSize: 4 });
      try {
        const stored = newKeys(1);
        await store.create(stored);
        holdLock('write');
        const refused = await rejection(store.create(newKeys(1)));
        expect((refused as { code?: string }).code).to.match(/^SQLITE_BUSY/);
        // What a post and an erasure meet: the pool's next batch, the erasure's destroy.
        const taking = await rejection(Promise.resolve(keys.take()));
        expect(isStoreUnavailable(taking), String(taking)).to.equal(true);
        const erasing = await rejection(keys.destroy([stored[0]!.id]));
        expect(isStoreUnavailable(erasing), String(erasing)).to.equal(true);
        other.exec('ROLLBACK');
        await keys.destroy([stored[0]!.id]);
        expect((await store.fetch([stored[0]!.id])).get(stored[0]!.id)).to.equal(null);
        expect(await keys.take()).to.have.property('id');
      } finally {
        await store.close();
      }
    });

    it('a probe for writing waits for the write lock and fails SQLITE_BUSY past the busy timeout, without writing a byte; a probe for reading answers at once', async function () {
      const store = EmbeddedKeyStore.open(own.path, { busyTimeoutMs: 200 });
      try {
        await store.create(newKeys(1));
        const files = () => [KEYS_FILE, `${KEYS_FILE}-wal`].map((f) => join(own.path, f)).filter(existsSync).map((f) => readFileSync(f));
        const before = files();
        holdLock('write');
        const probing = store.probe(true);
        expect(await settledAfterTurns(probing)).to.equal(false);
        expect(((await rejection(probing)) as { code?: string }).code).to.match(/^SQLITE_BUSY/);
        await store.probe(false);
        other.exec('ROLLBACK');
        await store.probe(true);
        expect(files()).to.deep.equal(before);
      } finally {
        await store.close();
      }
    });
  });
});

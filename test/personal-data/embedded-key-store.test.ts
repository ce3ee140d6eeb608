import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedKeyStore, KEYS_FILE } from '../../src/personal-data/embedded-key-store.js';
import { tempDir } from '../support/tmp.js';
import { keyStoreContract } from './key-store-contract.js';

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
});

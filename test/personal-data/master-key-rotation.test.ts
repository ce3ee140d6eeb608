import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packSealed, seal } from '../../src/personal-data/aes-gcm.js';
import { wrapAad } from '../../src/personal-data/data-keys.js';
import { EmbeddedKeyStore, KEYS_FILE } from '../../src/personal-data/embedded-key-store.js';
import { PersonalDataKeys } from '../../src/personal-data/index.js';
import type { DataKeyStore } from '../../src/personal-data/key-store.js';
import { MasterKeyRotationError, rotateMasterKey, surveyKeyStore } from '../../src/personal-data/master-key-rotation.js';
import { rejection } from '../support/rejection.js';
import { storedKeyRows } from '../support/key-rows.js';
import { tempDir } from '../support/tmp.js';

// The re-wrap a master key rotation does, on the embedded key store: every key opens with the new
// master key and none with the old; a rotation stopped part-way is finished by the next run.

const onDisk = (dataDir: string) => [KEYS_FILE, `${KEYS_FILE}-wal`].map((f) => join(dataDir, f)).filter(existsSync).map((f) => readFileSync(f));

describe('master key rotation: the key store wrapped anew', function () {
  this.timeout(30_000);
  let dir: ReturnType<typeof tempDir>;
  const oldKey = randomBytes(32);
  const newKey = randomBytes(32);
  let taken: Array<{ id: string; key: Buffer }>;
  let legacy: { id: string; key: Buffer };
  let destroyed: string;
  let secret: Buffer;

  beforeEach(async function () {
    dir = tempDir('rotation');
    const keys = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), oldKey, { batchSize: 8 });
    // Two batches' worth: keys of more than one nonce.
    taken = [];
    for (let i = 0; i < 12; i++) {
      const key = await keys.take();
      taken.push({ id: key.id, key: Buffer.from(key.key) });
    }
    secret = await keys.secret('contact-hashes');
    destroyed = taken.pop()!.id;
    await keys.destroy([destroyed]);
    await keys.close();
    // A key an earlier release wrapped alone, with AES-256-GCM.
    legacy = { id: randomBytes(16).toString('hex'), key: randomBytes(32) };
    const store = EmbeddedKeyStore.open(dir.path);
    await store.create([{ id: legacy.id, wrapped: packSealed(seal(oldKey, legacy.key, wrapAad(legacy.id))) }]);
    await store.close();
  });
  afterEach(() => dir.remove());

  /** Reads every key and the secret through PersonalDataKeys with `masterKey`, as a started service does. */
  async function readAll(masterKey: Buffer): Promise<void> {
    const keys = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), masterKey);
    try {
      for (const { id, key } of [...taken, legacy]) expect((await keys.get(id))!.key.equals(key), id).to.equal(true);
      expect(await keys.get(destroyed), 'the destroyed key').to.equal(null);
      expect((await keys.secret('contact-hashes')).equals(secret)).to.equal(true);
    } finally {
      await keys.close();
    }
  }

  it('every key and the secret open with the new master key, the same keys; none with the old; no old wrapped value left in keys.db or its WAL', async function () {
    const before = storedKeyRows(dir.path);
    const store = EmbeddedKeyStore.open(dir.path);
    const counts = await rotateMasterKey(store, oldKey, newKey);
    // Looked at with the store still open: closing it checkpoints, which a killed process never does.
    const files = onDisk(dir.path);
    await store.close();
    // The pool stored more keys than were taken: every stored one counts.
    expect(counts).to.deep.equal({ dataKeys: before.size - 1, secrets: 1 });

    await readAll(newKey);
    const stale = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), oldKey);
    expect((await rejection(Promise.resolve(stale.get(taken[0]!.id)))).message).to.contain('does not open with the master key');
    expect((await rejection(stale.secret('contact-hashes'))).message).to.contain('the secret contact-hashes does not open with the master key');
    await stale.close();

    const after = storedKeyRows(dir.path);
    expect([...after.keys()].sort()).to.deep.equal([...before.keys()].sort());
    for (const [name, wrapped] of before) {
      expect(after.get(name)!.equals(wrapped), `${name} was wrapped anew`).to.equal(false);
      expect(files.some((bytes) => bytes.includes(wrapped)), `no byte of ${name}'s old wrapping on disk`).to.equal(false);
    }
  });

  it('a rotation stopped part-way (some entries rewritten, as a killed run on MongoDB leaves them) is finished by the next run, and again changes nothing it should not', async function () {
    const entries = storedKeyRows(dir.path).size;
    const inner = EmbeddedKeyStore.open(dir.path);
    // Writes only every other entry it is given, as if the run were stopped between its writes.
    let turn = 0;
    const halfway: DataKeyStore = Object.assign(Object.create(inner) as DataKeyStore, {
      rewrap: (rewrap: Parameters<DataKeyStore['rewrap']>[0]) => inner.rewrap((entry) => (turn++ % 2 === 0 ? rewrap(entry) : undefined)),
    });
    await rotateMasterKey(halfway, oldKey, newKey);
    const mixed = await surveyKeyStore(inner, oldKey, newKey);
    expect(mixed.underOld).to.be.greaterThan(0);
    expect(mixed.underNew).to.be.greaterThan(0);
    expect(mixed.neither).to.deep.equal([]);

    expect(await rotateMasterKey(inner, oldKey, newKey)).to.deep.equal({ dataKeys: entries - 1, secrets: 1 });
    expect(await surveyKeyStore(inner, oldKey, newKey)).to.deep.equal({ underOld: 0, underNew: entries, neither: [] });
    // Run once more after it finished: nothing to open with the old key, everything still opens.
    await rotateMasterKey(inner, oldKey, newKey);
    await inner.close();
    await readAll(newKey);
  });

  it('an entry that opens with neither key stops the rotation with nothing written, naming the entry and nothing it holds', async function () {
    const store = EmbeddedKeyStore.open(dir.path);
    const before = storedKeyRows(dir.path);
    const other = randomBytes(32);
    const error = await rejection(rotateMasterKey(store, other, newKey));
    expect(error).to.be.instanceOf(MasterKeyRotationError);
    expect(error.message).to.match(/^data key [0-9a-f]{32} opens with neither the old nor the new master key/);
    expect((await surveyKeyStore(store, other, newKey)).neither).to.have.length(before.size);
    await store.close();
    const after = storedKeyRows(dir.path);
    for (const [name, wrapped] of before) expect(after.get(name)!.equals(wrapped), name).to.equal(true);
    const again = EmbeddedKeyStore.open(dir.path);
    expect((await rejection(rotateMasterKey(again, oldKey, Buffer.from(oldKey)))).message).to.equal('the new master key is the one in use');
    await again.close();
  });
});

import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { PersonalDataKeys } from '../../src/personal-data/index.js';
import { EmbeddedKeyStore } from '../../src/personal-data/embedded-key-store.js';
import { packSealed, seal } from '../../src/personal-data/aes-gcm.js';
import { isBatchWrapped, unwrapFromBatch, wrapBatch } from '../../src/personal-data/key-wrap.js';
import { tempDir } from '../support/tmp.js';
import { rejection } from '../support/rejection.js';

describe('data keys wrapped a batch at a time', function () {
  const master = randomBytes(32);

  it('each key of a batch unwraps alone, under the id it was given; the ids are the nonce and the place', function () {
    const nonce = randomBytes(12);
    const keys = randomBytes(5 * 32);
    const { ids, wrapped } = wrapBatch(master, nonce, keys);
    expect(ids).to.deep.equal([0, 1, 2, 3, 4].map((i) => nonce.toString('hex') + i.toString(16).padStart(8, '0')));
    expect([...ids].sort()).to.deep.equal(ids);
    for (let i = 0; i < 5; i++) {
      expect(isBatchWrapped(wrapped[i]!)).to.equal(true);
      expect(wrapped[i]!.includes(keys.subarray(i * 32, i * 32 + 32)), 'a key in clear in its wrapped form').to.equal(false);
      expect(unwrapFromBatch(master, ids[i]!, wrapped[i]!).equals(keys.subarray(i * 32, i * 32 + 32))).to.equal(true);
    }
  });

  it('another master key, or a wrapped key moved to another id, does not unwrap: an error, not a wrong key', function () {
    const { ids, wrapped } = wrapBatch(master, randomBytes(12), randomBytes(3 * 32));
    expect(() => unwrapFromBatch(randomBytes(32), ids[0]!, wrapped[0]!)).to.throw('the check block is not zeros');
    expect(() => unwrapFromBatch(master, ids[1]!, wrapped[0]!)).to.throw('the check block is not zeros');
    const other = wrapBatch(master, randomBytes(12), randomBytes(32));
    expect(() => unwrapFromBatch(master, other.ids[0]!, wrapped[0]!)).to.throw('the check block is not zeros');
  });

  describe('in the key store', function () {
    let dir: ReturnType<typeof tempDir>;
    beforeEach(() => (dir = tempDir('key-wrap')));
    afterEach(() => dir.remove());

    it('the pool stores its keys so wrapped, and another process opens them; a wrong master key says so', async function () {
      const writer = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master, { batchSize: 16 });
      const taken = [await writer.take(), await writer.take()];
      const store = EmbeddedKeyStore.open(dir.path);
      const stored = await store.fetch(taken.map((k) => k.id));
      expect([...stored.values()].every((w) => w !== null && isBatchWrapped(w))).to.equal(true);
      await store.close();
      const reader = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
      for (const key of taken) expect((await reader.get(key.id))!.key.equals(key.key)).to.equal(true);
      const wrong = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), randomBytes(32));
      const error = await rejection(Promise.resolve(wrong.get(taken[0]!.id)));
      expect(error.message).to.equal(`data key ${taken[0]!.id} does not open with the master key (LEADPOST_MASTER_KEY_FILE is not the key it was stored with; after \`leadpost master-key rotate\` it must name the new key file that command wrote)`);
      await Promise.all([writer.close(), reader.close(), wrong.close()]);
    });

    it('keys an earlier release wrapped one at a time (AES-256-GCM) still open', async function () {
      const id = randomBytes(16).toString('hex');
      const key = randomBytes(32);
      const store = EmbeddedKeyStore.open(dir.path);
      await store.create([{ id, wrapped: packSealed(seal(master, key, Buffer.from(`leadpost data key ${id}`, 'utf8'))) }]);
      await store.close();
      const keys = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
      expect((await keys.get(id))!.key.equals(key)).to.equal(true);
      await keys.close();
    });
  });
});

import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { type DataKeyStore, KeyIdTakenError, type StoredKey, type WrappedEntry } from '../../src/personal-data/key-store.js';
import { rejection } from '../support/rejection.js';

// The behaviour every key-store adapter must have. Ids are random, so the suite also runs
// against a shared server.

const newKey = (): StoredKey => ({ id: randomBytes(16).toString('hex'), wrapped: randomBytes(60) });


export function keyStoreContract(name: string, open: () => Promise<DataKeyStore>): void {
  describe(`DataKeyStore contract: ${name}`, function () {
    let store: DataKeyStore;
    beforeEach(async () => (store = await open()));
    afterEach(async () => store.close());

    it('stores a batch of keys and fetches them by id; an id never stored is absent', async function () {
      const keys = [newKey(), newKey(), newKey()];
      await store.create(keys);
      const unknown = newKey().id;
      const found = await store.fetch([keys[0]!.id, keys[2]!.id, unknown]);
      expect([...found.keys()].sort()).to.deep.equal([keys[0]!.id, keys[2]!.id].sort());
      expect(found.get(keys[0]!.id)!.equals(keys[0]!.wrapped)).to.equal(true);
      expect(found.get(keys[2]!.id)!.equals(keys[2]!.wrapped)).to.equal(true);
      expect(found.has(unknown)).to.equal(false);
    });

    it('keys are there for the next connection: durable when create resolves', async function () {
      const key = newKey();
      await store.create([key]);
      const other = await open();
      try {
        expect((await other.fetch([key.id])).get(key.id)!.equals(key.wrapped)).to.equal(true);
      } finally {
        await other.close();
      }
    });

    it('destroys keys: they fetch as null (destroyed), twice is no error, the others stay', async function () {
      const [a, b, c] = [newKey(), newKey(), newKey()];
      await store.create([a, b, c]);
      await store.destroy([a.id, b.id]);
      await store.destroy([a.id]);
      const found = await store.fetch([a.id, b.id, c.id]);
      expect(found.get(a.id)).to.equal(null);
      expect(found.get(b.id)).to.equal(null);
      expect(found.get(c.id)!.equals(c.wrapped)).to.equal(true);
    });

    it('refuses to store an id it holds or destroyed, storing none of that batch', async function () {
      const [held, gone, fresh] = [newKey(), newKey(), newKey()];
      await store.create([held, gone]);
      await store.destroy([gone.id]);
      const again = await rejection(store.create([{ id: gone.id, wrapped: randomBytes(60) }]));
      expect(again).to.be.instanceOf(KeyIdTakenError);
      expect((await store.fetch([gone.id])).get(gone.id)).to.equal(null);
      const clash = await rejection(store.create([{ ...held, wrapped: randomBytes(60) }, fresh]));
      expect(clash).to.be.instanceOf(KeyIdTakenError);
      expect((await store.fetch([held.id])).get(held.id)!.equals(held.wrapped)).to.equal(true);
      const late = newKey();
      expect(await rejection(store.create([late, { ...held, wrapped: randomBytes(60) }]))).to.be.instanceOf(KeyIdTakenError);
      expect((await store.fetch([late.id, fresh.id])).size).to.equal(0);
    });

    it('a batch whose ids are neighbours is refused for a destroyed id among them, and not for one beside them', async function () {
      const prefix = randomBytes(12).toString('hex');
      const batch = (from: number, count: number): StoredKey[] =>
        Array.from({ length: count }, (_, i) => ({ id: prefix + (from + i).toString(16).padStart(8, '0'), wrapped: randomBytes(49) }));
      await store.destroy([batch(5, 1)[0]!.id]);
      const refused = await rejection(store.create(batch(0, 10)));
      expect(refused).to.be.instanceOf(KeyIdTakenError);
      expect((refused as KeyIdTakenError).ids).to.deep.equal([batch(5, 1)[0]!.id]);
      expect((await store.fetch(batch(0, 10).map((k) => k.id))).size).to.equal(1);
      const around = [...batch(0, 5), ...batch(6, 4)];
      await store.create(around);
      const found = await store.fetch(around.map((k) => k.id));
      expect(around.every((k) => found.get(k.id)!.equals(k.wrapped))).to.equal(true);
    });

    it('destroying an id it never stored remembers it as destroyed, so it is never stored later', async function () {
      const never = newKey();
      await store.destroy([never.id]);
      expect((await store.fetch([never.id])).get(never.id)).to.equal(null);
      expect(await rejection(store.create([never]))).to.be.instanceOf(KeyIdTakenError);
    });

    it('refuses an id that is not 32 hex digits', async function () {
      expect(await rejection(store.fetch(['../etc']))).to.be.instanceOf(TypeError);
      expect(await rejection(store.create([{ id: 'ABC', wrapped: randomBytes(60) }]))).to.be.instanceOf(TypeError);
    });

    it('answers a probe for reading and for writing, and the probe changes no key', async function () {
      const key = newKey();
      await store.create([key]);
      await store.probe(false);
      await store.probe(true);
      expect((await store.fetch([key.id])).get(key.id)!.equals(key.wrapped)).to.equal(true);
    });

    it('wraps every key and secret anew; a run stopped part-way is finished by the next, and a destroyed key stays destroyed', async function () {
      const keys = [newKey(), newKey(), newKey(), newKey(), newKey()];
      const gone = newKey();
      await store.create([...keys, gone]);
      await store.destroy([gone.id]);
      const name = `hmac-${randomBytes(4).toString('hex')}`;
      const secret = randomBytes(60);
      await store.secret(name, secret);
      // The entries of this test go from their old bytes to new ones; any other entry (the store may
      // be shared) is written back as it is.
      const next = new Map<string, Buffer>([...keys.map((k) => [k.wrapped.toString('hex'), randomBytes(49)] as const), [secret.toString('hex'), randomBytes(60)]]);
      const wrapped = new Set([...next.values()].map((b) => b.toString('hex')));
      const seen: string[] = [];
      const rewrap = (entry: WrappedEntry) => {
        seen.push(entry.name);
        expect(entry.name, 'a destroyed key is never offered').to.not.equal(gone.id);
        const hex = entry.wrapped.toString('hex');
        return next.get(hex) ?? entry.wrapped;
      };
      let calls = 0;
      const stopped = await rejection(store.rewrap((entry) => {
        if (++calls > 2) throw new Error('stopped part-way');
        return rewrap(entry);
      }));
      expect(stopped.message).to.equal('stopped part-way');
      // Whatever the stopped run left, each entry holds its old bytes or its new ones, whole.
      const between = await store.fetch(keys.map((k) => k.id));
      for (const key of keys) {
        const hex = between.get(key.id)!.toString('hex');
        expect(hex === key.wrapped.toString('hex') || hex === next.get(key.wrapped.toString('hex'))!.toString('hex')).to.equal(true);
      }

      const counts = await store.rewrap((entry) => (wrapped.has(entry.wrapped.toString('hex')) ? entry.wrapped : rewrap(entry)));
      expect(counts.dataKeys).to.be.at.least(keys.length);
      expect(counts.secrets).to.be.at.least(1);
      const found = await store.fetch([...keys.map((k) => k.id), gone.id]);
      for (const key of keys) expect(found.get(key.id)!.equals(next.get(key.wrapped.toString('hex'))!), key.id).to.equal(true);
      expect(found.get(gone.id)).to.equal(null);
      expect(await rejection(store.create([gone]))).to.be.instanceOf(KeyIdTakenError);
      expect((await store.secret(name, randomBytes(60))).equals(next.get(secret.toString('hex'))!)).to.equal(true);

      // Left as they are when rewrap says nothing: no entry written, none counted.
      expect(await store.rewrap(() => undefined)).to.deep.equal({ dataKeys: 0, secrets: 0 });
      expect((await store.fetch([keys[0]!.id])).get(keys[0]!.id)!.equals(next.get(keys[0]!.wrapped.toString('hex'))!)).to.equal(true);
    });

    it('keeps a named secret: the first one stored is the one every later call gets', async function () {
      const name = `hmac-${randomBytes(4).toString('hex')}`;
      const first = randomBytes(60);
      expect((await store.secret(name, first)).equals(first)).to.equal(true);
      expect((await store.secret(name, randomBytes(60))).equals(first)).to.equal(true);
      const other = await open();
      try {
        expect((await other.secret(name, randomBytes(60))).equals(first)).to.equal(true);
      } finally {
        await other.close();
      }
    });
  });
}

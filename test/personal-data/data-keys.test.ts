import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { PersonalDataKeys, UnknownDataKeyError } from '../../src/personal-data/index.js';
import { EmbeddedKeyStore } from '../../src/personal-data/embedded-key-store.js';
import type { DataKeyStore, StoredKey } from '../../src/personal-data/key-store.js';
import { tempDir } from '../support/tmp.js';
import { rejection } from '../support/rejection.js';

/** The embedded key store, counting what is asked of it; `create` may be held back. */
function counting(inner: DataKeyStore) {
  const calls = { create: [] as number[], fetch: [] as number[] };
  let gate: Promise<void> = Promise.resolve();
  const store: DataKeyStore = {
    create: async (keys: readonly StoredKey[]) => {
      calls.create.push(keys.length);
      await gate;
      return inner.create(keys);
    },
    fetch: (ids) => {
      calls.fetch.push(ids.length);
      return inner.fetch(ids);
    },
    destroy: (ids) => inner.destroy(ids),
    secret: (name, candidate) => inner.secret(name, candidate),
    probe: (write) => inner.probe(write),
    rewrap: (rewrap) => inner.rewrap(rewrap),
    close: () => inner.close(),
  };
  return { store, calls, hold: (until: Promise<void>) => (gate = until) };
}

describe('data keys: the pool and the cache', function () {
  let dir: ReturnType<typeof tempDir>;
  const master = randomBytes(32);
  beforeEach(() => (dir = tempDir('data-keys')));
  afterEach(() => dir.remove());

  it('hands out keys only once their batch is stored, with one key-store write per batch, not per lead', async function () {
    const { store, calls, hold } = counting(EmbeddedKeyStore.open(dir.path));
    const keys = new PersonalDataKeys(store, master, { batchSize: 256 });
    let release!: () => void;
    hold(new Promise<void>((resolve) => (release = resolve)));
    let handed = false;
    const first = Promise.resolve(keys.take()).then((key) => ((handed = true), key));
    await new Promise((resolve) => setImmediate(resolve));
    expect(handed, 'handed out before its batch was stored').to.equal(false);
    release();
    const taken = [await first];
    for (let i = 1; i < 600; i++) taken.push(await keys.take());
    expect(new Set(taken.map((k) => k.id)).size).to.equal(600);
    expect(calls.create.every((n) => n === 256)).to.equal(true);
    expect(calls.create.length).to.be.within(3, 4);

    // Every key handed out is in the store, for another process to read.
    const other = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
    for (const key of [taken[0]!, taken[599]!]) expect((await other.get(key.id))!.key.equals(key.key)).to.equal(true);
    await other.close();
    await keys.close();
  });

  it('reads a key it handed out or read before from memory; keys asked for together are read together', async function () {
    const { store, calls } = counting(EmbeddedKeyStore.open(dir.path));
    const writer = new PersonalDataKeys(store, master, { batchSize: 8 });
    const taken = [await writer.take(), await writer.take(), await writer.take()];
    expect(writer.get(taken[0]!.id)).to.deep.equal(taken[0]);
    expect(calls.fetch).to.deep.equal([]);

    const reader = counting(EmbeddedKeyStore.open(dir.path));
    const keys = new PersonalDataKeys(reader.store, master);
    const read = await Promise.all(taken.map((k) => keys.get(k.id)));
    expect(read.map((k) => k!.id)).to.deep.equal(taken.map((k) => k.id));
    expect(reader.calls.fetch).to.deep.equal([3]);
    expect(keys.get(taken[1]!.id)).to.deep.equal(taken[1]);
    expect(reader.calls.fetch).to.deep.equal([3]);
    await keys.close();
    await writer.close();
  });

  it('a destroyed key reads as null, at once here and from the store elsewhere; an id never stored is an error', async function () {
    const keys = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master, { batchSize: 4 });
    const key = await keys.take();
    await keys.destroy([key.id]);
    expect(keys.get(key.id)).to.equal(null);
    const other = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
    expect(await other.get(key.id)).to.equal(null);
    const unknown = randomBytes(16).toString('hex');
    const error = await rejection(Promise.resolve(other.get(unknown)));
    expect(error).to.be.instanceOf(UnknownDataKeyError);
    expect(error.message).to.contain(unknown);
    await other.close();
    await keys.close();
  });

  it('a key store that cannot write or read fails the post or read as an unavailable store would (retryable); the next try can succeed', async function () {
    const inner = EmbeddedKeyStore.open(dir.path);
    let broken = true;
    const full = Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    const store: DataKeyStore = {
      create: (keys) => (broken ? Promise.reject(full) : inner.create(keys)),
      fetch: (ids) => (broken ? Promise.reject(full) : inner.fetch(ids)),
      destroy: (ids) => inner.destroy(ids),
      secret: (name, candidate) => inner.secret(name, candidate),
      probe: (write) => inner.probe(write),
      rewrap: (rewrap) => inner.rewrap(rewrap),
      close: () => inner.close(),
    };
    const keys = new PersonalDataKeys(store, master, { batchSize: 4 });
    const failed = await rejection(Promise.resolve(keys.take()));
    expect(failed).to.be.instanceOf(EventStoreUnavailableError);
    expect(failed.message).to.equal('the key store cannot store new data keys: database or disk is full');
    expect(await rejection(Promise.resolve(keys.get(randomBytes(16).toString('hex'))))).to.be.instanceOf(EventStoreUnavailableError);
    broken = false;
    expect((await keys.take()).key.length).to.equal(32);
    await keys.close();
  });

  it('an erasure whose key store fails destroys nothing: the key still reads until the erasure is retried', async function () {
    const inner = EmbeddedKeyStore.open(dir.path);
    let broken = true;
    const store: DataKeyStore = {
      create: (keys) => inner.create(keys),
      fetch: (ids) => inner.fetch(ids),
      destroy: (ids) => (broken ? Promise.reject(Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })) : inner.destroy(ids)),
      secret: (name, candidate) => inner.secret(name, candidate),
      probe: (write) => inner.probe(write),
      rewrap: (rewrap) => inner.rewrap(rewrap),
      close: () => inner.close(),
    };
    const keys = new PersonalDataKeys(store, master, { batchSize: 4 });
    const key = await keys.take();
    expect(await rejection(keys.destroy([key.id]))).to.be.instanceOf(EventStoreUnavailableError);
    expect((await keys.get(key.id))?.key.equals(key.key), 'the key is still held, so it still reads').to.equal(true);
    broken = false;
    await keys.destroy([key.id]);
    expect(keys.get(key.id)).to.equal(null);
    await keys.close();
  });

  it('a read on its way while the key is destroyed does not bring the key back', async function () {
    const writer = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master, { batchSize: 4 });
    const key = await writer.take();
    const inner = EmbeddedKeyStore.open(dir.path);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let fetching!: () => void;
    const fetched = new Promise<void>((resolve) => (fetching = resolve));
    const store: DataKeyStore = {
      create: (keys) => inner.create(keys),
      // The read finds the key, then is held until the destroy has landed.
      fetch: async (ids) => {
        const found = await inner.fetch(ids);
        fetching();
        await held;
        return found;
      },
      destroy: (ids) => inner.destroy(ids),
      secret: (name, candidate) => inner.secret(name, candidate),
      probe: (write) => inner.probe(write),
      rewrap: (rewrap) => inner.rewrap(rewrap),
      close: () => inner.close(),
    };
    const reader = new PersonalDataKeys(store, master);
    const read = Promise.resolve(reader.get(key.id));
    await fetched;
    await reader.destroy([key.id]);
    release();
    expect(await read).to.equal(null);
    expect(reader.get(key.id)).to.equal(null);
    await reader.close();
    await writer.close();
  });

  it('keeps one named secret, stored wrapped: made once, the same for every process', async function () {
    const a = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
    const b = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), master);
    const secret = await a.secret('contact-hmac');
    expect(secret.length).to.equal(32);
    expect((await b.secret('contact-hmac')).equals(secret)).to.equal(true);
    expect((await a.secret('contact-hmac')).equals(secret)).to.equal(true);
    await a.close();
    await b.close();
  });
});

import { expect } from 'chai';
import sinon from 'sinon';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import type { EventStore } from '../../src/event-store/index.js';
import { formatKey, issueKey, newKeyMaterial, revokeKey, rotateKey, type Role } from '../../src/keys/api-keys.js';
import { KeyRing } from '../../src/keys/key-ring.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { tempDir } from '../support/tmp.js';

const T0 = Date.parse('2025-03-01T12:00:00.000Z');

async function create(store: EventStore, role: Role = 'supplier', name = 'acme', now = T0) {
  const { id, secret } = newKeyMaterial();
  await changeKeys(store, (state) => issueKey(state, { role, name, now, id, secret }));
  return { id, secret, key: formatKey(id, secret) };
}

async function until(check: () => boolean, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (!check()) {
    if (Date.now() - started > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return Date.now() - started;
}

/** For a stubbed clock, whose timers do not run by themselves: waits turns of the event loop instead. */
async function turnsUntil(check: () => boolean): Promise<void> {
  for (let turn = 0; turn < 10_000; turn++) {
    if (check()) return;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error('not within 10,000 turns of the event loop');
}

describe('KeyRing', function () {
  let dir: ReturnType<typeof tempDir>;
  let store: EmbeddedEventStore;
  let ring: KeyRing;
  let clock: number;

  beforeEach(async function () {
    dir = tempDir('keys');
    store = await EmbeddedEventStore.open(dir.path);
    clock = T0;
  });
  afterEach(async function () {
    await ring?.close();
    await store.close();
    dir.remove();
  });

  const open = async (pollMs = 250) => (ring = await KeyRing.open(store, { pollMs, now: () => clock }));

  it('authenticates a good key as its principal', async function () {
    const { id, key } = await create(store, 'buyer', 'acme-law');
    await open();
    expect(ring.authenticate(key)).to.deep.equal({ keyId: id, role: 'buyer', name: 'acme-law' });
  });

  it('rejects a wrong secret and an unknown id', async function () {
    const { id, secret } = await create(store);
    await open();
    const other = newKeyMaterial();
    expect(ring.authenticate(formatKey(id, other.secret))).to.equal(null);
    expect(ring.authenticate(formatKey(other.id, secret))).to.equal(null);
    // One flipped character of the secret.
    const flipped = secret.slice(0, -1) + (secret.endsWith('A') ? 'B' : 'A');
    expect(ring.authenticate(formatKey(id, flipped))).to.equal(null);
  });

  it('returns null, never throws, for malformed input of any kind', async function () {
    const { key } = await create(store);
    await open();
    const inputs: unknown[] = [
      undefined,
      null,
      '',
      ' ',
      'lp_',
      key.slice(0, -1),
      `${key}=`,
      ` ${key}`,
      `${key}\n`,
      key.toUpperCase(),
      `${key},${key}`,
      `${key}, ${key}`,
      key.replace(/.$/, 'é'),
      'ключ'.repeat(15).slice(0, 59),
      '\u0000'.repeat(59),
      'x'.repeat(10 * 1024),
      `${key}${'x'.repeat(10 * 1024)}`,
      42,
      [key],
      { toString: () => key },
    ];
    for (const input of inputs) expect(ring.authenticate(input as string), JSON.stringify(input)?.slice(0, 40)).to.equal(null);
    expect(ring.authenticate(key)).not.to.equal(null);
  });

  it('rejects a revoked key once it has read the revocation', async function () {
    const { id, key } = await create(store);
    await open();
    await changeKeys(store, (state) => revokeKey(state, { id, now: T0 }));
    await ring.refresh();
    expect(ring.authenticate(key)).to.equal(null);
  });

  it('accepts a rotated key within its grace and rejects it after; the new key works throughout', async function () {
    const old = await create(store);
    await open();
    const next = newKeyMaterial();
    await changeKeys(store, (state) => rotateKey(state, { id: old.id, now: T0, graceSeconds: 60, newId: next.id, newSecret: next.secret }));
    await ring.refresh();
    const newKey = formatKey(next.id, next.secret);
    clock = T0 + 59_999;
    expect(ring.authenticate(old.key)).to.deep.equal({ keyId: old.id, role: 'supplier', name: 'acme' });
    expect(ring.authenticate(newKey)).to.deep.equal({ keyId: next.id, role: 'supplier', name: 'acme' });
    clock = T0 + 60_000;
    expect(ring.authenticate(old.key)).to.equal(null);
    expect(ring.authenticate(newKey)).to.deep.equal({ keyId: next.id, role: 'supplier', name: 'acme' });
  });

  describe('authenticateFresh: a key made a moment ago, before the next poll', function () {
    /** The store's reads of the keys stream, counted; the ring's polls far apart, so only the lookups read. */
    const counted = async () => {
      let reads = 0;
      const readStream = store.readStream.bind(store);
      const counting = Object.assign(Object.create(store) as EventStore, {
        readStream: (...args: Parameters<EventStore['readStream']>) => (reads++, readStream(...args)),
      });
      ring = await KeyRing.open(counting, { pollMs: 3_600_000, now: () => clock });
      reads = 0;
      return () => reads;
    };

    it('is looked for in the stream once more before it is refused, and then works at once', async function () {
      const reads = await counted();
      const { id, key } = await create(store);
      expect(ring.authenticate(key), 'not read yet').to.equal(null);
      expect(await ring.authenticateFresh(key)).to.deep.equal({ keyId: id, role: 'supplier', name: 'acme' });
      expect(reads()).to.equal(1);
      // Known now: answered at once, without a read.
      expect(ring.authenticateFresh(key)).to.deep.equal({ keyId: id, role: 'supplier', name: 'acme' });
      expect(reads()).to.equal(1);
    });

    it('a flood of made-up ids shares one read at a time; malformed keys, known ids with a wrong secret and revoked keys are refused without a read', async function () {
      const reads = await counted();
      const lookups = Array.from({ length: 50 }, () => {
        const made = newKeyMaterial();
        return ring.authenticateFresh(formatKey(made.id, made.secret));
      });
      expect(await Promise.all(lookups)).to.deep.equal(Array(50).fill(null));
      expect(reads()).to.equal(1);
      const { id, secret } = await create(store);
      await ring.refresh();
      const before = reads();
      const other = newKeyMaterial();
      expect(ring.authenticateFresh(formatKey(id, other.secret))).to.equal(null);
      for (const bad of [undefined, '', 'lp_short', `${formatKey(id, secret)}x`, 'x'.repeat(59)]) expect(ring.authenticateFresh(bad)).to.equal(null);
      await changeKeys(store, (state) => revokeKey(state, { id, now: T0 }));
      await ring.refresh();
      expect(ring.authenticateFresh(formatKey(id, secret))).to.equal(null);
      expect(reads()).to.equal(before + 1);
    });

    it('with the store failing, a flood of unknown keys adds no read (nor a logged failure) each: one read, then none for a second', async function () {
      const timers = sinon.useFakeTimers({ toFake: ['performance'] });
      try {
        let reads = 0;
        let failing = false;
        const errors: unknown[] = [];
        const down = Object.assign(Object.create(store) as EventStore, {
          readStream: (...args: Parameters<EventStore['readStream']>) => (reads++, failing ? Promise.reject(new Error('down')) : store.readStream(...args)),
        });
        ring = await KeyRing.open(down, { pollMs: 3_600_000, now: () => clock, onPollError: (error) => errors.push(error) });
        reads = 0;
        failing = true;
        const { id, key } = await create(store);
        expect(await ring.authenticateFresh(key)).to.equal(null);
        expect([reads, errors.length]).to.deep.equal([1, 1]);
        const flood = Array.from({ length: 20 }, () => {
          const made = newKeyMaterial();
          return ring.authenticateFresh(formatKey(made.id, made.secret));
        });
        expect(await Promise.all(flood)).to.deep.equal(Array(20).fill(null));
        expect([reads, errors.length]).to.deep.equal([1, 1]);
        // The store back, and the pause over: the key is found.
        failing = false;
        timers.tick(1000);
        expect(await ring.authenticateFresh(key)).to.deep.equal({ keyId: id, role: 'supplier', name: 'acme' });
        expect(reads).to.equal(2);
      } finally {
        timers.restore();
      }
    });

    it('a read begun before the key was made is not taken for the answer: the lookup waits for one that begins after it', async function () {
      await counted();
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      // A poll in progress, held inside its read, which began before the key existed.
      const readStream = store.readStream.bind(store);
      let polls = 0;
      Object.assign(ring as unknown as { store: EventStore }, {
        store: Object.assign(Object.create(store) as EventStore, {
          readStream: async (...args: Parameters<EventStore['readStream']>) => {
            const events = await readStream(...args);
            if (polls++ === 0) await held;
            return events;
          },
        }),
      });
      const polling = ring.refresh();
      await new Promise((resolve) => setImmediate(resolve));
      const { id, key } = await create(store);
      const looking = ring.authenticateFresh(key);
      release();
      await polling;
      expect(await looking).to.deep.equal({ keyId: id, role: 'supplier', name: 'acme' });
    });
  });

  it('picks up a change by polling, at the first poll after it (250 ms) and not before, without refresh()', async function () {
    // The poll's timer on a stubbed clock: the interval is proven to the millisecond, and a busy
    // machine cannot fail it. The store's reads stay real.
    const timers = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      // The interval the service opens its ring with: the default.
      ring = await KeyRing.open(store, { now: () => clock });
      const { id, key } = await create(store);
      await timers.tickAsync(249);
      expect(ring.authenticate(key)).to.equal(null);
      await timers.tickAsync(1);
      await turnsUntil(() => ring.authenticate(key) !== null);
      await changeKeys(store, (state) => revokeKey(state, { id, now: T0 }));
      // The next poll is 250 ms after the last one ended.
      await timers.tickAsync(249);
      expect(ring.authenticate(key)).not.to.equal(null);
      await timers.tickAsync(1);
      await turnsUntil(() => ring.authenticate(key) === null);
    } finally {
      timers.restore();
    }
  });

  it('keeps its last good state while the store fails, and catches up when it is back', async function () {
    const { key } = await create(store);
    let failing = false;
    const errors: unknown[] = [];
    const flaky: EventStore = Object.create(store, {
      readStream: { value: (...args: Parameters<EventStore['readStream']>) => (failing ? Promise.reject(new Error('down')) : store.readStream(...args)) },
    });
    ring = await KeyRing.open(flaky, { pollMs: 20, onPollError: (error) => errors.push(error) });
    failing = true;
    const second = await create(store);
    await until(() => errors.length >= 2, 1000);
    expect(ring.authenticate(key)).not.to.equal(null);
    expect(ring.authenticate(second.key)).to.equal(null);
    failing = false;
    await until(() => ring.authenticate(second.key) !== null, 1000);
    expect((errors[0] as Error).message).to.equal('down');
  });

  it('stops polling on close', async function () {
    const timers = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    try {
      await open(20);
      await ring.close();
      const { key } = await create(store);
      // Fifty intervals: a ring still polling would have read the new key at the first.
      await timers.tickAsync(1000);
      for (let turn = 0; turn < 100; turn++) await new Promise((resolve) => setImmediate(resolve));
      expect(ring.authenticate(key)).to.equal(null);
      expect(timers.countTimers()).to.equal(0);
    } finally {
      timers.restore();
    }
  });

  it('stores only the hash: neither the key nor its secret is anywhere in the data dir', async function () {
    const a = await create(store);
    const next = newKeyMaterial();
    await changeKeys(store, (state) => rotateKey(state, { id: a.id, now: T0, graceSeconds: 60, newId: next.id, newSecret: next.secret }));
    await store.close();
    const bytes = Buffer.concat(readdirSync(dir.path).map((file) => readFileSync(join(dir.path, file))));
    for (const [key, secret] of [
      [a.key, a.secret],
      [formatKey(next.id, next.secret), next.secret],
    ] as const) {
      expect(bytes.includes(key)).to.equal(false);
      expect(bytes.includes(secret)).to.equal(false);
      expect(bytes.includes(Buffer.from(secret, 'base64url'))).to.equal(false);
    }
    // The scan does see the stream: the ids and hashes are there.
    expect(bytes.includes(`"id":"${a.id}"`)).to.equal(true);
    store = await EmbeddedEventStore.open(dir.path);
    const [issued] = await store.readStream('api-keys');
    expect(bytes.includes((issued!.data as { hash: string }).hash)).to.equal(true);
  });
});

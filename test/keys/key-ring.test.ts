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

import { expect } from 'chai';
import { createHash } from 'node:crypto';
import {
  type ApiKeyEvent,
  evolve,
  foldKeys,
  formatKey,
  hashSecret,
  initialKeyState,
  issueKey,
  KeyCommandError,
  type KeyState,
  keyStatus,
  newKeyMaterial,
  parseKey,
  revokeKey,
  rotateKey,
} from '../../src/keys/api-keys.js';

const NOW = Date.parse('2025-03-01T12:00:00.000Z');
const SECRET = 'A'.repeat(42) + 'g';
const SECRET2 = 'b'.repeat(43);
const issued = (id = 'aaaaaaaaaaaa', role = 'supplier', name = 'acme', secret = SECRET): ApiKeyEvent[] =>
  issueKey(initialKeyState, { role, name, now: NOW, id, secret });
const given = (...events: ApiKeyEvent[]): KeyState => events.reduce(evolve, initialKeyState);

function thrown(fn: () => unknown): KeyCommandError {
  try {
    fn();
  } catch (error) {
    expect(error).to.be.instanceOf(KeyCommandError);
    return error as KeyCommandError;
  }
  throw new Error('expected a KeyCommandError');
}

describe('api keys (pure decider)', function () {
  describe('issueKey', function () {
    it('emits ApiKeyIssued with the sha256 hex of the secret, never the secret', function () {
      const events = issued();
      expect(events).to.deep.equal([
        {
          type: 'ApiKeyIssued',
          data: {
            id: 'aaaaaaaaaaaa',
            role: 'supplier',
            name: 'acme',
            hash: createHash('sha256').update(SECRET).digest('hex'),
            issued_at: '2025-03-01T12:00:00.000Z',
          },
        },
      ]);
      expect(JSON.stringify(events)).not.to.contain(SECRET);
    });

    it('accepts every role and names at the edges of the rule', function () {
      for (const role of ['supplier', 'buyer', 'analyst', 'admin']) expect(issued('aaaaaaaaaaaa', role)[0]!.data).to.include({ role });
      expect(issued('aaaaaaaaaaaa', 'buyer', 'a')[0]!.data).to.include({ name: 'a' });
      expect(issued('aaaaaaaaaaaa', 'buyer', 'A.b_c-9'.padEnd(64, 'x'))[0]!.data).to.include({ name: 'A.b_c-9'.padEnd(64, 'x') });
    });

    it('rejects an unknown role and a bad name as invalid', function () {
      expect(thrown(() => issued('aaaaaaaaaaaa', 'root')).kind).to.equal('invalid');
      expect(thrown(() => issued('aaaaaaaaaaaa', 'Admin')).message).to.contain('role');
      for (const name of ['', 'x'.repeat(65), 'two words', 'ünïcode', 'a/b', 'a,b']) {
        const error = thrown(() => issued('aaaaaaaaaaaa', 'supplier', name));
        expect(error.kind, name).to.equal('invalid');
        expect(error.message).to.contain('name');
      }
    });

    it('rejects malformed key material and an id already taken', function () {
      expect(thrown(() => issued('AAAAAAAAAAAA')).kind).to.equal('invalid');
      expect(thrown(() => issued('short')).kind).to.equal('invalid');
      expect(thrown(() => issued('aaaaaaaaaaaa', 'supplier', 'acme', 'short')).kind).to.equal('invalid');
      const state = given(...issued());
      const error = thrown(() => issueKey(state, { role: 'admin', name: 'ops', now: NOW, id: 'aaaaaaaaaaaa', secret: SECRET2 }));
      expect(error.kind).to.equal('conflict');
    });
  });

  describe('evolve', function () {
    it('folds an issued key into an active record', function () {
      const state = given(...issued());
      expect(state.get('aaaaaaaaaaaa')).to.deep.equal({
        id: 'aaaaaaaaaaaa',
        role: 'supplier',
        name: 'acme',
        hash: hashSecret(SECRET),
        issued_at: '2025-03-01T12:00:00.000Z',
        revoked_at: null,
        replaced_by: null,
        expires_at: null,
      });
      expect(keyStatus(state.get('aaaaaaaaaaaa')!, NOW)).to.equal('active');
    });

    it('does not change the state it is given', function () {
      const before = given(...issued());
      const after = evolve(before, { type: 'ApiKeyRevoked', data: { id: 'aaaaaaaaaaaa', revoked_at: 'x' } });
      expect(before.get('aaaaaaaaaaaa')!.revoked_at).to.equal(null);
      expect(after.get('aaaaaaaaaaaa')!.revoked_at).to.equal('x');
    });

    it('foldKeys skips unknown and malformed events instead of failing', function () {
      const state = foldKeys(initialKeyState, [
        { type: 'SomethingNew', data: { id: 'zzzzzzzzzzzz' } },
        { type: 'ApiKeyIssued', data: null },
        { type: 'ApiKeyIssued', data: { id: 'bbbbbbbbbbbb', role: 'god', name: 'x', hash: 'h', issued_at: 't' } },
        ...issued(),
        { type: 'ApiKeyRevoked', data: { id: 'cccccccccccc', revoked_at: 't' } },
      ]);
      expect([...state.keys()]).to.deep.equal(['aaaaaaaaaaaa']);
    });
  });

  describe('revokeKey', function () {
    it('emits ApiKeyRevoked for an active key', function () {
      expect(revokeKey(given(...issued()), { id: 'aaaaaaaaaaaa', now: NOW + 1000 })).to.deep.equal([
        { type: 'ApiKeyRevoked', data: { id: 'aaaaaaaaaaaa', revoked_at: '2025-03-01T12:00:01.000Z' } },
      ]);
    });

    it('emits nothing for a key already revoked', function () {
      const state = given(...issued(), ...revokeKey(given(...issued()), { id: 'aaaaaaaaaaaa', now: NOW }));
      expect(keyStatus(state.get('aaaaaaaaaaaa')!, NOW)).to.equal('revoked');
      expect(revokeKey(state, { id: 'aaaaaaaaaaaa', now: NOW + 5 })).to.deep.equal([]);
    });

    it('an unknown id is a not_found error naming the id', function () {
      const error = thrown(() => revokeKey(initialKeyState, { id: 'ffffffffffff', now: NOW }));
      expect(error.kind).to.equal('not_found');
      expect(error.message).to.equal("no key with id 'ffffffffffff'");
    });
  });

  describe('rotateKey', function () {
    const rotate = (state: KeyState, graceSeconds = 3600, id = 'aaaaaaaaaaaa') =>
      rotateKey(state, { id, now: NOW, graceSeconds, newId: 'bbbbbbbbbbbb', newSecret: SECRET2 });

    it('issues a key with the same role and name, and marks the old one expiring at now + grace', function () {
      const events = rotate(given(...issued('aaaaaaaaaaaa', 'buyer', 'acme-law')));
      expect(events).to.deep.equal([
        {
          type: 'ApiKeyIssued',
          data: { id: 'bbbbbbbbbbbb', role: 'buyer', name: 'acme-law', hash: hashSecret(SECRET2), issued_at: '2025-03-01T12:00:00.000Z' },
        },
        { type: 'ApiKeyRotated', data: { id: 'aaaaaaaaaaaa', replaced_by: 'bbbbbbbbbbbb', expires_at: '2025-03-01T13:00:00.000Z' } },
      ]);
      const state = given(...issued('aaaaaaaaaaaa', 'buyer', 'acme-law'), ...events);
      const old = state.get('aaaaaaaaaaaa')!;
      expect(old).to.include({ replaced_by: 'bbbbbbbbbbbb', expires_at: '2025-03-01T13:00:00.000Z' });
      expect(keyStatus(old, NOW + 3_599_999)).to.equal('expiring');
      expect(keyStatus(old, NOW + 3_600_000)).to.equal('expired');
      expect(keyStatus(state.get('bbbbbbbbbbbb')!, NOW + 3_600_000)).to.equal('active');
    });

    it('refuses an unknown, revoked or already rotated key, and a bad grace', function () {
      expect(thrown(() => rotate(initialKeyState)).kind).to.equal('not_found');
      const revoked = given(...issued(), { type: 'ApiKeyRevoked', data: { id: 'aaaaaaaaaaaa', revoked_at: 't' } });
      expect(thrown(() => rotate(revoked)).kind).to.equal('conflict');
      const rotated = given(...issued(), ...rotate(given(...issued())));
      const error = thrown(() => rotateKey(rotated, { id: 'aaaaaaaaaaaa', now: NOW, graceSeconds: 60, newId: 'cccccccccccc', newSecret: SECRET }));
      expect(error.kind).to.equal('conflict');
      expect(error.message).to.contain('bbbbbbbbbbbb');
      for (const grace of [-1, 1.5, Number.NaN, 400 * 86400]) expect(thrown(() => rotate(given(...issued()), grace)).kind).to.equal('invalid');
    });

    it('revoking a key in its grace period stops it at once', function () {
      const state = given(...issued(), ...rotate(given(...issued())));
      const after = foldKeys(state, revokeKey(state, { id: 'aaaaaaaaaaaa', now: NOW }));
      expect(keyStatus(after.get('aaaaaaaaaaaa')!, NOW)).to.equal('revoked');
    });
  });

  describe('key text', function () {
    it('newKeyMaterial gives a 12-char id and a 32-byte base64url secret that round-trip through the key text', function () {
      const { id, secret } = newKeyMaterial();
      expect(id).to.match(/^[0-9a-z]{12}$/);
      expect(Buffer.from(secret, 'base64url')).to.have.length(32);
      expect(parseKey(formatKey(id, secret))).to.deep.equal({ id, secret });
      expect(newKeyMaterial().secret).not.to.equal(secret);
    });

    it('parseKey rejects anything but the exact form', function () {
      const key = formatKey('aaaaaaaaaaaa', SECRET);
      for (const text of ['', key.slice(0, -1), `${key}x`, ` ${key}`, key.toUpperCase(), `${key},${key}`, key.replace('lp_', 'lq_')]) {
        expect(parseKey(text), text).to.equal(null);
      }
    });
  });
});

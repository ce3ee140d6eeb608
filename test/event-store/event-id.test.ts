import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { validate, version, v7 as uuidv7 } from 'uuid';
import { formatV7, newEventId } from '../../src/event-store/event-id.js';

describe('event ids', function () {
  it('format exactly as the uuid package formats a v7 of the same time, sequence and random bytes', function () {
    const times = [0, 1, 0xff, 0x10000, 0xffffffff, 0x100000000, Date.UTC(2026, 10, 22), 2 ** 48 - 1];
    for (let i = 0; i < 2000; i++) {
      const msecs = i < times.length ? times[i]! : Math.floor(Math.random() * 2 ** 48);
      const sequence = i % 3 === 0 ? 0xffffffff : randomBytes(4).readUInt32BE();
      const random = randomBytes(16);
      expect(formatV7(msecs, sequence, random, 0), `msecs ${msecs} seq ${sequence}`).to.equal(uuidv7({ msecs, seq: sequence, random }));
    }
  });

  it('are valid v7 uuids, unique, and sort in the order they were made, also within one millisecond', function () {
    const ids = Array.from({ length: 20_000 }, () => newEventId());
    for (const id of ids.slice(0, 100)) {
      expect(validate(id)).to.equal(true);
      expect(version(id)).to.equal(7);
    }
    expect(new Set(ids).size).to.equal(ids.length);
    expect([...ids].sort()).to.deep.equal(ids);
    const msecs = parseInt(ids.at(-1)!.slice(0, 8) + ids.at(-1)!.slice(9, 13), 16);
    expect(Math.abs(msecs - Date.now())).to.be.below(60_000);
  });
});

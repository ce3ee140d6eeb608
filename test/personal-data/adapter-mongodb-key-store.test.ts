// The MongoDB key store without a server: which ids a refused batch clashed on, which failures are
// an outage (a 503), and the read and write concerns its collections keep whatever MONGODB_URL
// says. The errors are built as the driver builds them, from its own classes.
import { expect } from 'chai';
import {
  type BulkWriteResult,
  type Document,
  MongoBulkWriteError,
  MongoClient,
  MongoNetworkError,
  MongoServerError,
  MongoWriteConcernError,
  type WriteConcernError,
  type WriteError,
} from 'mongodb';
import { createRequire } from 'node:module';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { KeyIdTakenError } from '../../src/personal-data/key-store.js';
import { clashingKeyIds, keyStoreCollections, keyStoreError } from '../../src/personal-data/mongodb-key-store.js';
import { isStoreUnavailable } from '../../src/store-unavailable.js';

// The driver exports these classes as types only; its bulk-write module holds them, and is the very
// module its MongoBulkWriteError comes from.
const bulk = createRequire(import.meta.url)('mongodb/lib/bulk/common.js') as {
  BulkWriteResult: new (raw: object, ordered: boolean) => BulkWriteResult;
  WriteError: new (error: { index: number; code: number; errmsg: string; errInfo: Document; op: Document }) => WriteError;
  WriteConcernError: new (error: { code: number; codeName?: string; errmsg: string; errInfo?: Document }) => WriteConcernError;
};

const ids = Array.from({ length: 10 }, (_, i) => `00112233445566778899aabb${i.toString(16).padStart(8, '0')}`);

const WRITE_CONCERN_TIMEOUT = { code: 64, codeName: 'WriteConcernTimeout', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } };

/** A write of the batch refused by the server: on `_id` unless another index is named. */
function refusedAt(index: number, { code = 11000, keyIndex = '_id_' } = {}): WriteError {
  const errmsg =
    code === 11000
      ? `E11000 duplicate key error collection: leadpost.data_keys index: ${keyIndex} dup key: { _id: "${ids[index]}" }`
      : 'Document failed validation';
  return new bulk.WriteError({ index, code, errmsg, errInfo: {}, op: { _id: ids[index] } });
}

/** The result an unordered insert of `ids` keeps: every document not refused counts as inserted. */
function unorderedResult(writeErrors: WriteError[], writeConcernErrors: WriteConcernError[] = []): BulkWriteResult {
  const refused = new Set(writeErrors.map((w) => w.index));
  return new bulk.BulkWriteResult(
    {
      ok: 1,
      writeErrors,
      writeConcernErrors,
      insertedIds: ids.map((_id, index) => ({ index, _id })),
      nInserted: ids.length - refused.size,
      nUpserted: 0,
      nMatched: 0,
      nModified: 0,
      nRemoved: 0,
      upserted: [],
    },
    false,
  );
}

/** What an unordered bulk write throws once every batch ran and some writes were refused (the driver's handleWriteError). */
function refusedWrites(...writeErrors: WriteError[]): MongoBulkWriteError {
  const first = writeErrors[0]!;
  return new MongoBulkWriteError({ message: first.errmsg!, code: first.code, writeErrors }, unorderedResult(writeErrors));
}

/**
 * What it throws when the server applied the batch (refusing `writeErrors`) but the write concern
 * was not met in time: the server's MongoWriteConcernError merged into the result, the error
 * naming the write concern's code only.
 */
function writeConcernTimedOut(...writeErrors: WriteError[]): MongoBulkWriteError {
  const result = unorderedResult(writeErrors, [new bulk.WriteConcernError(WRITE_CONCERN_TIMEOUT)]);
  return new MongoBulkWriteError({ message: WRITE_CONCERN_TIMEOUT.errmsg, code: WRITE_CONCERN_TIMEOUT.code }, result);
}

describe('MongoDB key store: a refused batch of keys', function () {
  it('names exactly the ids that clashed on `_id`, however many and wherever in the batch', function () {
    expect(clashingKeyIds(refusedWrites(refusedAt(5)), ids)).to.deep.equal([ids[5]]);
    expect(clashingKeyIds(refusedWrites(refusedAt(0), refusedAt(3), refusedAt(9)), ids)).to.deep.equal([ids[0], ids[3], ids[9]]);
  });

  it('is no clash when a write was refused for another reason, or on another index', function () {
    expect(clashingKeyIds(refusedWrites(refusedAt(2), refusedAt(4, { code: 121 })), ids)).to.equal(null);
    expect(clashingKeyIds(refusedWrites(refusedAt(2, { keyIndex: 'created_at_1' })), ids)).to.equal(null);
  });

  it('is no clash when the write concern was not met, even with duplicates among the writes', function () {
    expect(clashingKeyIds(writeConcernTimedOut(refusedAt(5)), ids)).to.equal(null);
    expect(clashingKeyIds(writeConcernTimedOut(), ids)).to.equal(null);
    const lateOnly = new MongoBulkWriteError(new bulk.WriteConcernError(WRITE_CONCERN_TIMEOUT), unorderedResult([refusedAt(5)], [new bulk.WriteConcernError(WRITE_CONCERN_TIMEOUT)]));
    expect(clashingKeyIds(lateOnly, ids)).to.equal(null);
  });

  it('is no clash when the batch stopped on a failure of its own (the network), nor for an error that is no bulk write', function () {
    const cut = new MongoBulkWriteError(new MongoNetworkError('connection 4 to 10.0.0.5:27017 closed'), unorderedResult([refusedAt(1)]));
    expect(clashingKeyIds(cut, ids)).to.equal(null);
    expect(clashingKeyIds(new MongoServerError({ ok: 0, code: 11000, errmsg: 'E11000 duplicate key error', keyPattern: { _id: 1 } }), ids)).to.equal(null);
    expect(clashingKeyIds(new TypeError('not a key'), ids)).to.equal(null);
  });
});

describe('MongoDB key store: which failures are an outage', function () {
  const outage = (error: unknown) => {
    const translated = keyStoreError(error);
    expect(translated, String(error)).to.be.instanceOf(EventStoreUnavailableError);
    expect((translated as Error).cause).to.equal(error);
    // What the HTTP shell asks before it answers 503 with Retry-After.
    expect(isStoreUnavailable(translated)).to.equal(true);
  };

  it('a write concern that timed out, as a single write or a batch reports it', function () {
    outage(new MongoWriteConcernError({ ok: 1, n: 1, writeConcernError: WRITE_CONCERN_TIMEOUT }));
    outage(writeConcernTimedOut());
    outage(writeConcernTimedOut(refusedAt(5)));
    outage(new MongoBulkWriteError(new bulk.WriteConcernError(WRITE_CONCERN_TIMEOUT), unorderedResult([])));
  });

  it('a network failure, also inside a bulk write, and a primary stepping down', function () {
    outage(new MongoNetworkError('connection 4 to 10.0.0.5:27017 closed'));
    outage(new MongoBulkWriteError(new MongoNetworkError('connection reset'), unorderedResult([])));
    outage(new MongoServerError({ ok: 0, code: 189, codeName: 'PrimarySteppedDown', errmsg: 'primary stepped down' }));
  });

  it('leaves a clash, a refused id and a fault a retry would repeat as they are', function () {
    for (const error of [new KeyIdTakenError([ids[5]!]), new TypeError('a data key id is 32 lower-case hex digits'), refusedWrites(refusedAt(5)), new MongoServerError({ ok: 0, code: 13, codeName: 'Unauthorized', errmsg: 'not authorized' })]) {
      expect(keyStoreError(error)).to.equal(error);
      expect(isStoreUnavailable(keyStoreError(error))).to.equal(false);
    }
  });
});

describe('MongoDB key store: its collections', function () {
  it('read from the primary and write to the journal of a majority within 10 s, whatever MONGODB_URL asks', async function () {
    // Never connected: the options are the collections' own, decided without a server.
    const client = new MongoClient('mongodb://db1.example:27017,db2.example:27017/leadpost?replicaSet=rs0&readPreference=secondaryPreferred&w=1&journal=false');
    try {
      const { keys, secrets } = keyStoreCollections(client.db('leadpost'));
      expect(client.db('leadpost').collection('rm_leads').readPreference?.mode).to.equal('secondaryPreferred');
      for (const collection of [keys, secrets]) {
        expect(collection.readPreference?.mode).to.equal('primary');
        expect({ ...collection.writeConcern }).to.include({ w: 'majority', journal: true, wtimeoutMS: 10_000 });
      }
      expect([keys.collectionName, secrets.collectionName]).to.deep.equal(['data_keys', 'key_secrets']);
    } finally {
      await client.close();
    }
  });
});

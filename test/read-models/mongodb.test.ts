// The MongoDB adapter: the shared contract suite against a real server when MONGODB_URL is set,
// and, always, unit tests of the pure translations (filters, keyset cursors, writes) and of how
// driver errors are read, which need no server.
import { expect } from 'chai';
import { MongoNetworkError, MongoServerError, MongoServerSelectionError } from 'mongodb';
import {
  aggregatePipeline,
  databaseNameFromUrl,
  findQuery,
  groupKeysetQuery,
  guardFilter,
  isDuplicateKeyError,
  isUnavailable,
  keyPartExpression,
  keysetQuery,
  leadingQuery,
  toMongoFilter,
  toMongoWrite,
} from '../../src/read-models/mongo-query.js';
import { MongoReadModelStore } from '../../src/read-models/mongodb.js';
import { ReadModelUnavailableError, positionKey } from '../../src/read-models/port.js';
import { readModelStoreContract, rejection } from './contract.js';

const url = process.env.MONGODB_URL;
if (url) {
  readModelStoreContract('MongoDB', () => MongoReadModelStore.connect(url));
} else {
  describe('MongoDB read-model store', function () {
    it('runs the contract suite against a server', function () {
      console.log('skipped: set MONGODB_URL=mongodb://localhost:27017/leadpost_test?directConnection=true to run the MongoDB contract suite');
      this.skip();
    });
  });
}

describe('MongoDB read-model store: translations', function () {
  describe('filters', function () {
    it('maps equality, null, dotted fields, ranges and $in to MongoDB operators', function () {
      expect(
        toMongoFilter({
          status: 'sold',
          buyer: null,
          test: false,
          'delivery.status': 'ok',
          created_at: { $gte: '2024-01-01', $lt: '2024-02-01', $lte: undefined },
          price: { $in: [1, 'x', null, true] },
        }),
      ).to.deep.equal({
        status: { $eq: 'sold' },
        buyer: { $eq: null },
        test: { $eq: false },
        'delivery.status': { $eq: 'ok' },
        created_at: { $gte: '2024-01-01', $lt: '2024-02-01' },
        price: { $in: [1, 'x', null, true] },
      });
      expect(toMongoFilter(undefined)).to.deep.equal({});
    });

    it('refuses field names and operators outside the port, so nothing reaches the server as an operator', function () {
      for (const filter of [{ $where: 'sleep(1)' }, { 'a.$b': 1 }, { _pos: 'x' }, { a: { $ne: 1 } }, { a: { $regex: '.' } }, { a: { $in: [{ $gt: 1 }] } }]) {
        expect(() => toMongoFilter(filter as never), JSON.stringify(filter)).to.throw(TypeError);
      }
      // A condition whose operators are all absent constrains nothing (rather than matching `{}`).
      expect(toMongoFilter({ a: { $gte: undefined } })).to.deep.equal({});
    });
  });

  describe('keyset cursors and sorting', function () {
    it('ascending: strictly after (value, id)', function () {
      expect(keysetQuery({ sort: { field: 'hour', direction: 'asc' }, after: { value: '2024-01-01T10', id: 'k' } })).to.deep.equal({
        $or: [{ hour: { $gt: '2024-01-01T10' } }, { hour: '2024-01-01T10', _id: { $gt: 'k' } }],
      });
    });

    it('descending: strictly before (value, id), and documents without the field', function () {
      expect(keysetQuery({ sort: { field: 'created_at', direction: 'desc' }, after: { value: 7, id: 'k' } })).to.deep.equal({
        $or: [{ created_at: { $lt: 7 } }, { created_at: null }, { created_at: 7, _id: { $lt: 'k' } }],
      });
    });

    it('on _id, only the id counts; without a cursor there is no condition', function () {
      expect(keysetQuery({ sort: { field: '_id', direction: 'desc' }, after: { value: 'k', id: 'k' } })).to.deep.equal({ _id: { $lt: 'k' } });
      expect(keysetQuery({ sort: { field: 'a', direction: 'asc' } })).to.equal(null);
    });

    it('combines filter and cursor with $and, sorts by the field then _id, and keeps the limit', function () {
      const found = findQuery({
        filter: { supplier: 's1', created_at: { $lt: '2025' } },
        sort: { field: 'created_at', direction: 'desc' },
        after: { value: '2024', id: '9' },
        limit: 11,
      });
      expect(found.query).to.deep.equal({
        $and: [
          { supplier: { $eq: 's1' }, created_at: { $lt: '2025' } },
          { $or: [{ created_at: { $lt: '2024' } }, { created_at: null }, { created_at: '2024', _id: { $lt: '9' } }] },
        ],
      });
      expect(Object.entries(found.sort)).to.deep.equal([
        ['created_at', -1],
        ['_id', -1],
      ]);
      expect(found.limit).to.equal(11);
      expect(findQuery({ sort: { field: 'a', direction: 'asc' }, after: { value: 1, id: 'x' }, limit: 1 }).query).to.deep.equal({
        $or: [{ a: { $gt: 1 } }, { a: 1, _id: { $gt: 'x' } }],
      });
      expect(findQuery({ sort: { field: '_id', direction: 'asc' }, limit: 1 }).sort).to.deep.equal({ _id: 1 });
      expect(() => findQuery({ sort: { field: 'a', direction: 'up' as never }, limit: 1 })).to.throw(TypeError);
      expect(() => findQuery({ sort: { field: 'a', direction: 'asc' }, limit: 1.5 })).to.throw(TypeError);
    });
  });

  describe('aggregation', function () {
    it('a window on the first key field: nulls come first, so an open lower bound lets them in', function () {
      const options = { filter: { test: false }, key: [{ field: 's1' }], sum: ['n'], limit: 3 };
      const window = (w: Parameters<typeof aggregatePipeline>[1]) => aggregatePipeline(options, w)[0];
      expect(window({ from: 'a', to: 'c' })).to.deep.equal({ $match: { $and: [{ test: { $eq: false } }, { s1: { $gte: 'a', $lte: 'c' } }] } });
      expect(window({ to: 'c' })).to.deep.equal({ $match: { $and: [{ test: { $eq: false } }, { $or: [{ s1: null }, { s1: { $lte: 'c' } }] }] } });
      expect(window({ from: null, to: null })).to.deep.equal({ $match: { $and: [{ test: { $eq: false } }, { s1: null }] } });
      expect(window({ from: 'a' })).to.deep.equal({ $match: { $and: [{ test: { $eq: false } }, { s1: { $gte: 'a' } }] } });
      expect(window({})).to.deep.equal({ $match: { test: { $eq: false } } });
      expect(leadingQuery({ ...options, after: ['b'] })).to.deep.equal({ query: { $and: [{ test: { $eq: false } }, { s1: { $gte: 'b' } }] }, sort: { s1: 1 }, limit: 0, field: 's1' });
      expect(leadingQuery({ ...options, after: [null] }).query).to.deep.equal({ test: { $eq: false } });
    });

    it('key parts: a missing field groups with null; steps are a balanced tree of literals', function () {
      expect(keyPartExpression({ field: 'sid' })).to.deep.equal({ $ifNull: ['$sid', null] });
      const steps = [{ from: '$a', label: '$1' }, { from: 'b', label: '2' }, { from: 'c', label: '3' }];
      expect(keyPartExpression({ field: 'hour', steps })).to.deep.equal({
        $cond: [
          { $gte: ['$hour', { $literal: '$a' }] },
          { $cond: [{ $gte: ['$hour', { $literal: 'b' }] }, { $cond: [{ $gte: ['$hour', { $literal: 'c' }] }, { $literal: '3' }, { $literal: '2' }] }, { $literal: '$1' }] },
          null,
        ],
      });
    });

    it('groups after the cursor, null before any string; then sorted by the key and limited', function () {
      expect(groupKeysetQuery(['a', null])).to.deep.equal({ $or: [{ '_id.k0': { $gt: 'a' } }, { '_id.k0': 'a', '_id.k1': { $ne: null } }] });
      expect(groupKeysetQuery([null])).to.deep.equal({ $or: [{ '_id.k0': { $ne: null } }] });
      expect(groupKeysetQuery([])).to.deep.equal({ _id: { $exists: false } });
      const pipeline = aggregatePipeline({ key: [{ field: 's1' }, { field: 'sid' }], sum: ['n', 'cents'], after: ['a', 'x'], limit: 5 }, { from: 'a', to: 'f' });
      expect(pipeline).to.deep.equal([
        { $match: { s1: { $gte: 'a', $lte: 'f' } } },
        { $group: { _id: { k0: { $ifNull: ['$s1', null] }, k1: { $ifNull: ['$sid', null] } }, s0: { $sum: '$n' }, s1: { $sum: '$cents' } } },
        { $match: { $or: [{ '_id.k0': { $gt: 'a' } }, { '_id.k0': 'a', '_id.k1': { $gt: 'x' } }] } },
        { $sort: { '_id.k0': 1, '_id.k1': 1 } },
        { $limit: 5 },
      ]);
      expect(aggregatePipeline({ key: [], sum: ['n'], limit: 1 })).to.deep.equal([{ $match: {} }, { $group: { _id: {}, s0: { $sum: '$n' } } }, { $limit: 1 }]);
      expect(() => aggregatePipeline({ key: [{ field: '$where' }], sum: [], limit: 1 })).to.throw(TypeError);
    });
  });

  describe('writes', function () {
    const position = { commit: 12, prepare: 11 };
    const key = positionKey(position);

    it('guards every write by the position the document has seen', function () {
      expect(guardFilter('lead-1', key)).to.deep.equal({ _id: 'lead-1', $or: [{ _pos: { $lt: key } }, { _pos: { $exists: false } }] });
    });

    it('put replaces (without a stray _id), set/inc/push update, and all record the position', function () {
      expect(toMongoWrite({ op: 'put', collection: 'c', id: 'a', position, doc: { _id: 'a', v: 1 } }, key)).to.deep.equal({ replacement: { v: 1, _pos: key } });
      expect(toMongoWrite({ op: 'set', collection: 'c', id: 'a', position, set: { v: 1 } }, key)).to.deep.equal({ update: { $set: { v: 1, _pos: key } } });
      expect(toMongoWrite({ op: 'inc', collection: 'c', id: 'a', position, inc: { n: 2 }, setOnInsert: { hour: 'h' } }, key)).to.deep.equal({
        update: { $inc: { n: 2 }, $set: { _pos: key }, $setOnInsert: { hour: 'h' } },
      });
      expect(toMongoWrite({ op: 'inc', collection: 'c', id: 'a', position, inc: {}, setOnInsert: {} }, key)).to.deep.equal({ update: { $set: { _pos: key } } });
      expect(toMongoWrite({ op: 'push', collection: 'c', id: 'a', position, field: 'log', value: { at: 1 } }, key)).to.deep.equal({
        update: { $push: { log: { at: 1 } }, $set: { _pos: key } },
      });
    });
  });

  describe('driver errors', function () {
    it('an E11000 on _id means the guarded write was already applied', function () {
      const onId = new MongoServerError({ message: 'E11000 duplicate key error collection: x.rm_c index: _id_ dup key: { _id: "a" }', code: 11000, keyPattern: { _id: 1 } });
      expect(isDuplicateKeyError(onId)).to.equal(true);
      expect(isDuplicateKeyError({ code: 11000 })).to.equal(true);
      expect(isDuplicateKeyError(new MongoServerError({ message: 'E11000 on another index', code: 11000, keyPattern: { email: 1 } }))).to.equal(false);
      expect(isDuplicateKeyError(new MongoServerError({ message: 'type mismatch', code: 14 }))).to.equal(false);
      expect(isDuplicateKeyError(new Error('E11000'))).to.equal(false);
      expect(isDuplicateKeyError(null)).to.equal(false);
    });

    it('network and server-selection errors mean unavailable; query errors do not', function () {
      expect(isUnavailable(new MongoNetworkError('connection reset'))).to.equal(true);
      expect(isUnavailable(new MongoServerSelectionError('no primary', {} as never))).to.equal(true);
      const stepDown = new MongoServerError({ message: 'not primary', code: 10107 });
      stepDown.addErrorLabel('RetryableWriteError');
      expect(isUnavailable(stepDown)).to.equal(true);
      expect(isUnavailable(new MongoServerError({ message: 'type mismatch', code: 14 }))).to.equal(false);
      expect(isUnavailable(new TypeError('bad filter'))).to.equal(false);
    });

    it('connecting to no server is ReadModelUnavailableError', async function () {
      const error = await rejection(MongoReadModelStore.connect('mongodb://127.0.0.1:9/leadpost_test?directConnection=true&serverSelectionTimeoutMS=300'));
      expect(error).to.be.instanceOf(ReadModelUnavailableError);
      expect(error.cause).to.be.instanceOf(MongoServerSelectionError);
    });
  });

  describe('database name', function () {
    it('comes from the URL path when there is one', function () {
      expect(databaseNameFromUrl('mongodb://localhost:27017/leadpost_test?directConnection=true')).to.equal('leadpost_test');
      expect(databaseNameFromUrl('mongodb+srv://u:p%2Fq@cluster.example.net/reads')).to.equal('reads');
      expect(databaseNameFromUrl('mongodb://a:1,b:2/db?replicaSet=rs0')).to.equal('db');
      expect(databaseNameFromUrl('mongodb://localhost:27017')).to.equal(undefined);
      expect(databaseNameFromUrl('mongodb://localhost:27017/')).to.equal(undefined);
      expect(databaseNameFromUrl('mongodb://localhost:27017/?w=majority')).to.equal(undefined);
    });
  });
});

// The MongoDB adapter: the shared contract suite against a real server when MONGODB_URL is set,
// and, always, unit tests of the pure translations (filters, keyset cursors, writes) and of the
// adapter driven through a client whose server answers are scripted with the driver's own error
// classes and codes (connecting, failover, bulk writes, transactions), which need no server.
import { expect } from 'chai';
import {
  type BulkWriteResult,
  type Document,
  MongoBulkWriteError,
  MongoNetworkError,
  MongoNetworkTimeoutError,
  MongoServerError,
  MongoServerSelectionError,
  MongoWriteConcernError,
  type WriteConcernError,
  type WriteError,
} from 'mongodb';
import { createRequire } from 'node:module';
import { deliveriesProjection } from '../../src/projections/projections.js';
import {
  aggregatePipeline,
  databaseNameFromUrl,
  findQuery,
  groupKeysetQuery,
  guardFilter,
  isDuplicateKeyError,
  hostsOfUrl,
  isUnavailable,
  keyPartExpression,
  keysetBranches,
  leadingQuery,
  toMongoFilter,
  toMongoWrite,
} from '../../src/read-models/mongo-query.js';
import { MongoReadModelStore } from '../../src/read-models/mongodb.js';
import { LeaseLostError, ReadModelUnavailableError, type ReadWrite, positionKey } from '../../src/read-models/port.js';
import { readModelStoreContract } from './contract.js';
import { rejection } from '../support/rejection.js';
import { type Call, PRIMARY, STANDALONE, type Script, scriptedClient } from './scripted-mongo.js';

// The driver exports these classes as types only; its bulk-write module holds them, and is the very
// module its MongoBulkWriteError comes from.
const bulk = createRequire(import.meta.url)('mongodb/lib/bulk/common.js') as {
  BulkWriteResult: new (raw: object, ordered: boolean) => BulkWriteResult;
  WriteError: new (error: { index: number; code: number; errmsg: string; errInfo: Document; op: Document }) => WriteError;
  WriteConcernError: new (error: { code: number; codeName?: string; errmsg: string }) => WriteConcernError;
};

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
    it('ascending: beyond the value, or at it and beyond the id', function () {
      expect(keysetBranches({ sort: { field: 'hour', direction: 'asc' }, after: { value: '2024-01-01T10', id: 'k' } })).to.deep.equal([
        { hour: { $gt: '2024-01-01T10' } },
        { hour: '2024-01-01T10', _id: { $gt: 'k' } },
      ]);
    });

    it('descending: below the value, at it and below the id, and documents without the field', function () {
      expect(keysetBranches({ sort: { field: 'created_at', direction: 'desc' }, after: { value: 7, id: 'k' } })).to.deep.equal([
        { created_at: { $lt: 7 } },
        { created_at: 7, _id: { $lt: 'k' } },
        { created_at: null },
      ]);
    });

    it('on _id, only the id counts; without a cursor there is no condition', function () {
      expect(keysetBranches({ sort: { field: '_id', direction: 'desc' }, after: { value: 'k', id: 'k' } })).to.deep.equal([{ _id: { $lt: 'k' } }]);
      expect(keysetBranches({ sort: { field: 'a', direction: 'asc' } })).to.equal(null);
    });

    it('a cursor is a top-level $or whose every branch carries the filter, so each is a bounded index range; sorted by the field then _id', function () {
      const found = findQuery({
        filter: { supplier: 's1', created_at: { $lt: '2025' } },
        sort: { field: 'created_at', direction: 'desc' },
        after: { value: '2024', id: '9' },
        limit: 11,
      });
      const filter = { supplier: { $eq: 's1' }, created_at: { $lt: '2025' } };
      expect(found.query).to.deep.equal({
        $or: [
          { $and: [filter, { created_at: { $lt: '2024' } }] },
          { $and: [filter, { created_at: '2024', _id: { $lt: '9' } }] },
          { $and: [filter, { created_at: null }] },
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
      expect(findQuery({ filter: { a: 1 }, sort: { field: '_id', direction: 'asc' }, after: { value: 'x', id: 'x' }, limit: 1 }).query).to.deep.equal({
        $and: [{ a: { $eq: 1 } }, { _id: { $gt: 'x' } }],
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
      // A bulk write's error as the driver rebuilds it: the message, no key pattern.
      expect(isDuplicateKeyError({ code: 11000, errmsg: 'E11000 duplicate key error collection: leadpost.rm_a index: _id_ dup key: { _id: "x" }' })).to.equal(true);
      expect(isDuplicateKeyError({ code: 11000, errmsg: 'E11000 duplicate key error collection: leadpost.rm_a index: email_1 dup key: { email: "x" }' })).to.equal(false);
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

    it('connecting to no server is ReadModelUnavailableError naming the server', async function () {
      const url = 'mongodb://127.0.0.1:9/leadpost_test?directConnection=true&serverSelectionTimeoutMS=300';
      const error = await rejection(MongoReadModelStore.connect(url, { primaryWaitMs: 200 }));
      expect(error).to.be.instanceOf(ReadModelUnavailableError);
      expect(error.message).to.contain('MongoDB at 127.0.0.1:9 has no writable primary');
      expect(error.cause).to.be.instanceOf(MongoServerSelectionError);
    });
  });

  describe('names from the URL', function () {
    it('the hosts, for messages, without credentials, database or options', function () {
      expect(hostsOfUrl('mongodb://leadpost:s3cret@db1.example:27017,db2.example:27017/leadpost?replicaSet=rs0')).to.equal('db1.example:27017,db2.example:27017');
      expect(hostsOfUrl('mongodb+srv://u:p%2Fq@cluster.example.net/reads')).to.equal('cluster.example.net');
      // A password the URL did not escape still never shows.
      expect(hostsOfUrl('mongodb://u:pa/ss?x@db:27017/')).to.equal('db:27017');
      expect(hostsOfUrl('mongodb://localhost')).to.equal('localhost');
    });

    it('the database, from the URL path when there is one', function () {
      expect(databaseNameFromUrl('mongodb://localhost:27017/leadpost_test?directConnection=true')).to.equal('leadpost_test');
      expect(databaseNameFromUrl('mongodb+srv://u:p%2Fq@cluster.example.net/reads')).to.equal('reads');
      expect(databaseNameFromUrl('mongodb://a:1,b:2/db?replicaSet=rs0')).to.equal('db');
      expect(databaseNameFromUrl('mongodb://localhost:27017')).to.equal(undefined);
      expect(databaseNameFromUrl('mongodb://localhost:27017/')).to.equal(undefined);
      expect(databaseNameFromUrl('mongodb://localhost:27017/?w=majority')).to.equal(undefined);
    });
  });
});

describe('MongoDB read-model store: through the driver', function () {
  const at = (commit: number, prepare = commit) => ({ commit, prepare });
  const URL = 'mongodb://leadpost:s3cret@db1.example:27017,db2.example:27017/leadpost?replicaSet=rs0';
  // A commit that keeps failing is tried again for commitWithinMs: 200 ms here, not 10 s.
  const open = (script?: Script, options: { primaryWaitMs?: number; commitWithinMs?: number } = {}) => {
    const scripted = scriptedClient(script);
    return { ...scripted, store: MongoReadModelStore.open(scripted.client, URL, { commitWithinMs: 200, ...options }) };
  };
  const serverError = (code: number, codeName: string, errmsg: string, errorLabels?: string[]) =>
    new MongoServerError({ ok: 0, code, codeName, errmsg, ...(errorLabels ? { errorLabels } : {}) });
  /** A bulk write's result as the driver keeps it (its constructor is internal to the driver). */
  const bulkResult = (writeErrors: WriteError[] = [], writeConcernErrors: WriteConcernError[] = []) =>
    new bulk.BulkWriteResult(
      { ok: 1, writeErrors, writeConcernErrors, insertedIds: [], nInserted: 0, nUpserted: 0, nMatched: 0, nModified: 0, nRemoved: 0, upserted: [] },
      true,
    );
  /** How the driver reports a bulk write that stopped at a duplicate `_id` (ordered: the writes after it were not run). */
  const duplicateAt = (index: number, id: string) => {
    const writeError = new bulk.WriteError({
      index,
      code: 11000,
      errmsg: `E11000 duplicate key error collection: leadpost.rm_a index: _id_ dup key: { _id: "${id}" }`,
      errInfo: {},
      op: {},
    });
    return new MongoBulkWriteError({ message: writeError.errmsg!, code: 11000, writeErrors: [writeError] }, bulkResult([writeError]));
  };

  describe('connect waits for a writable primary', function () {
    it('a replica set not yet initiated, then electing, is waited for: commits then run in transactions', async function () {
      const hellos: object[] = [
        { isWritablePrimary: false, secondary: false, isreplicaset: true, info: 'Does not have a valid replica set config', ok: 1 },
        { isWritablePrimary: false, secondary: true, setName: 'rs0', ok: 1 },
        PRIMARY,
      ];
      const { store, of } = open((call) => (call.method === 'hello' ? hellos.shift() : undefined), { primaryWaitMs: 10_000 });
      const opened = await store;
      expect(of('hello')).to.have.length(3);
      expect(opened.transactional).to.equal(true);
      await opened.commit('p', at(1), [{ op: 'set', collection: 'a', id: 'x', position: at(1), set: { v: 1 } }]);
      expect(of('commitTransaction')).to.have.length(1);
    });

    it('a server not reachable yet is waited for too', async function () {
      let refused = 2;
      const { store, of } = open(
        (call) => {
          if (call.method === 'connect' && refused-- > 0) throw new MongoServerSelectionError('connect ECONNREFUSED 10.0.0.5:27017', {} as never);
          return undefined;
        },
        { primaryWaitMs: 10_000 },
      );
      expect((await store).transactional).to.equal(true);
      expect(of('connect')).to.have.length(3);
    });

    it('gives up after primaryWaitMs with ReadModelUnavailableError naming the hosts, never the credentials, and closes the client', async function () {
      const { store, of } = open((call) => (call.method === 'hello' ? { isWritablePrimary: false, secondary: true, setName: 'rs0', ok: 1 } : undefined), {
        primaryWaitMs: 300,
      });
      const error = await rejection(store);
      expect(error).to.be.instanceOf(ReadModelUnavailableError);
      expect(error.message).to.equal('MongoDB at db1.example:27017,db2.example:27017 has no writable primary after 0.3 s: it answers as a secondary');
      expect(error.message).not.to.match(/s3cret|leadpost:/);
      expect(of('hello').length).to.be.above(1);
      expect(of('close')).to.have.length(1);
    });

    it('an error that is not the server being unavailable fails at once', async function () {
      const denied = serverError(18, 'AuthenticationFailed', 'Authentication failed.');
      const { store, of } = open((call) => {
        if (call.method === 'connect') throw denied;
        return undefined;
      });
      expect(await rejection(store)).to.equal(denied);
      expect(of('connect')).to.have.length(1);
    });

    it('a standalone server has no transactions: commits go without them', async function () {
      const { store, of } = open((call) => (call.method === 'hello' ? STANDALONE : undefined));
      const opened = await store;
      expect(opened.transactional).to.equal(false);
      await opened.commit('p', at(1), [{ op: 'set', collection: 'a', id: 'x', position: at(1), set: { v: 1 } }]);
      expect(of('startSession')).to.deep.equal([]);
    });
  });

  describe('failover, shutdown, write concern and network errors are ReadModelUnavailableError (a 503)', function () {
    const FAILOVER: Array<[number, string, string]> = [
      [10107, 'NotWritablePrimary', 'not primary'],
      [189, 'PrimarySteppedDown', 'Primary stepped down while waiting for replication'],
      [11602, 'InterruptedDueToReplStateChange', 'operation was interrupted because a replica set state change occurred'],
      [13435, 'NotPrimaryNoSecondaryOk', 'not primary and secondaryOk=false'],
      [13436, 'NotPrimaryOrSecondary', 'node is not in primary or recovering state'],
      [91, 'ShutdownInProgress', 'The server is in quiesce mode and will shut down'],
    ];

    const unavailableFrom = async (fail: (call: Call) => boolean, error: Error, act: (store: MongoReadModelStore) => Promise<unknown>) => {
      const { store } = open((call) => {
        if (fail(call)) throw error;
        return undefined;
      });
      const failure = await rejection(act(await store));
      expect(failure, error.message).to.be.instanceOf(ReadModelUnavailableError);
      expect(failure.cause, error.message).to.equal(error);
    };
    const read = (store: MongoReadModelStore) => store.get('a', 'x');
    const commit = (store: MongoReadModelStore) => store.commit('p', at(2), [{ op: 'set', collection: 'a', id: 'x', position: at(2), set: { v: 1 } }]);

    it('the server codes of a failover or a shutdown, on a read (the driver labels none)', async function () {
      for (const [code, name, message] of FAILOVER) {
        await unavailableFrom((call) => call.method === 'findOne', serverError(code, name, message), read);
        await unavailableFrom((call) => call.method === 'find', serverError(code, name, message), (store) => store.find('a', { sort: { field: 'v', direction: 'asc' }, limit: 5 }));
      }
    });

    it('the same codes on a bulk write, which the driver wraps in MongoBulkWriteError', async function () {
      for (const [code, name, message] of FAILOVER) {
        const wrapped = new MongoBulkWriteError(serverError(code, name, message), bulkResult());
        await unavailableFrom((call) => call.method === 'bulkWrite', wrapped, commit);
      }
    });

    it('write concern errors, alone or inside a bulk write', async function () {
      const timedOut = new MongoWriteConcernError({
        writeConcernError: { code: 64, codeName: 'WriteConcernTimeout', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } },
        ok: 1,
        n: 1,
      });
      await unavailableFrom((call) => call.method === 'updateOne' && call.collection === 'rm_checkpoints', timedOut, commit);
      // As the driver reports a write concern error of a bulk write: its code, and the error in the result.
      const unsatisfiable = new bulk.WriteConcernError({ code: 100, codeName: 'UnsatisfiableWriteConcern', errmsg: 'Not enough data-bearing nodes' });
      const inBulk = new MongoBulkWriteError({ message: 'Not enough data-bearing nodes', code: 100 }, bulkResult([], [unsatisfiable]));
      await unavailableFrom((call) => call.method === 'bulkWrite', inBulk, commit);
      await unavailableFrom((call) => call.method === 'bulkWrite', new MongoBulkWriteError(unsatisfiable, bulkResult([], [unsatisfiable])), commit);
    });

    it('network errors and server selection timeouts', async function () {
      await unavailableFrom((call) => call.method === 'findOne', new MongoNetworkError('connection 3 to 10.0.0.5:27017 closed'), read);
      await unavailableFrom((call) => call.method === 'findOne', new MongoNetworkTimeoutError('connection 3 to 10.0.0.5:27017 timed out'), read);
      await unavailableFrom((call) => call.method === 'find', new MongoServerSelectionError('Server selection timed out after 30000 ms', {} as never), commit);
    });

    it('the same, thrown inside a bulk write, which the driver wraps with neither code nor label', async function () {
      // On a standalone server a lost connection gets no retryable label, and a selection timeout never does.
      for (const cause of [new MongoNetworkError('connection 3 to 10.0.0.5:27017 closed'), new MongoServerSelectionError('Server selection timed out after 30000 ms', {} as never)]) {
        const wrapped = new MongoBulkWriteError(cause, bulkResult());
        expect([wrapped.code, wrapped.errorLabels]).to.deep.equal([undefined, []]);
        await unavailableFrom((call) => call.method === 'bulkWrite', wrapped, commit);
      }
      // A bulk write refused for what it asked stays what it is.
      expect(isUnavailable(new MongoBulkWriteError(serverError(2, 'BadValue', 'unknown operator'), bulkResult()))).to.equal(false);
    });

    it('the labels the driver leaves on a transaction that could not commit', async function () {
      const conflict = serverError(112, 'WriteConflict', 'Write conflict during plan execution', ['TransientTransactionError']);
      await unavailableFrom((call) => call.method === 'commitTransaction', conflict, commit);
      const unknown = serverError(50, 'MaxTimeMSExpired', 'operation exceeded time limit', ['UnknownTransactionCommitResult']);
      await unavailableFrom((call) => call.method === 'commitTransaction', unknown, commit);
    });

    it('a transaction a write conflict aborted runs again, and one whose commit came to an unknown end commits again, within the bound', async function () {
      const conflict = serverError(112, 'WriteConflict', 'Write conflict during plan execution', ['TransientTransactionError']);
      const unknown = serverError(50, 'MaxTimeMSExpired', 'operation exceeded time limit', ['UnknownTransactionCommitResult']);
      const answers: Error[] = [conflict, unknown];
      const { store, of } = open((call) => {
        const next = call.method === 'commitTransaction' ? answers.shift() : undefined;
        if (next) throw next;
        return undefined;
      });
      await commit(await store);
      expect(of('startTransaction')).to.have.length(2);
      expect(of('commitTransaction')).to.have.length(3);
      expect(of('bulkWrite')).to.have.length(2);
    });

    it('a bad query or write stays what it is', async function () {
      const bad = serverError(2, 'BadValue', 'unknown operator');
      const { store } = open((call) => {
        if (call.method === 'findOne') throw bad;
        return undefined;
      });
      expect(await rejection((await store).get('a', 'x'))).to.equal(bad);
    });
  });

  describe('a commit without transactions', function () {
    const writes: ReadWrite[] = [
      { op: 'set', collection: 'a', id: 'x', position: at(3), set: { v: 3 } },
      { op: 'inc', collection: 'a', id: 'x', position: at(6), inc: { n: 1 } },
      { op: 'put', collection: 'b', id: 'p', position: at(6), doc: { v: 6 } },
      { op: 'set', collection: 'a', id: 'y', position: at(6), set: { v: 6 } },
      { op: 'push', collection: 'a', id: 'z', position: at(7), field: 'log', value: 7 },
      { op: 'set', collection: 'b', id: 'q', position: at(7), set: { v: 7 } },
    ];
    /** rm_a already holds x, which has seen position 5. */
    const standalone = (then: (call: Call) => unknown = () => undefined) =>
      open((call) => {
        if (call.method === 'hello') return STANDALONE;
        if (call.method === 'find' && call.collection === 'rm_a') return [{ _id: 'x', _pos: positionKey(at(5)) }];
        return then(call);
      });
    const ids = (call: Call) => (call.args[0] as Array<{ updateOne?: { filter: { _id: string } }; replaceOne?: { filter: { _id: string } } }>).map((op) => (op.updateOne ?? op.replaceOne)!.filter._id);

    it('reads positions with one query per collection and sends one ordered bulk write per collection, without the writes a document has seen', async function () {
      const { store, of, calls } = standalone();
      await (await store).commit('p', at(7), writes);
      expect(of('find').map((c) => [c.collection, c.args[0]])).to.deep.equal([
        ['rm_a', { _id: { $in: ['x', 'y', 'z'] } }],
        ['rm_b', { _id: { $in: ['p', 'q'] } }],
      ]);
      const bulks = of('bulkWrite');
      expect(bulks.map((c) => [c.collection, ids(c), c.args[1]])).to.deep.equal([
        ['rm_a', ['x', 'y', 'z'], { ordered: true }],
        ['rm_b', ['p', 'q'], { ordered: true }],
      ]);
      // Every write keeps its guard: it applies only to a document that has not seen its position.
      expect((bulks[0]!.args[0] as Document[])[0]).to.deep.equal({
        updateOne: { filter: guardFilter('x', positionKey(at(6))), update: { $inc: { n: 1 }, $set: { _pos: positionKey(at(6)) } }, upsert: true },
      });
      expect(of('updateOne').map((c) => c.collection)).to.deep.equal(['rm_checkpoints']);
      expect(of('replaceOne')).to.deep.equal([]);
      expect(calls.map((c) => c.method).filter((m) => m !== 'hello' && m !== 'connect')).to.deep.equal(['find', 'find', 'bulkWrite', 'bulkWrite', 'updateOne']);
    });

    it('a write that collides on _id is sent again with the ones after it, and skipped when it collides a second time', async function () {
      let collisions = [duplicateAt(1, 'y'), duplicateAt(0, 'y')];
      const { store, of } = standalone((call) => {
        if (call.method === 'bulkWrite' && call.collection === 'rm_a') {
          const next = collisions.shift();
          if (next) throw next;
        }
        return undefined;
      });
      await (await store).commit('p', at(7), writes);
      expect(of('bulkWrite', 'rm_a').map(ids)).to.deep.equal([['x', 'y', 'z'], ['y', 'z'], ['z']]);
      expect(of('updateOne', 'rm_checkpoints')).to.have.length(1);
      // A collision on a write that goes through the second time is not skipped.
      collisions = [duplicateAt(1, 'y')];
      const again = standalone((call) => {
        if (call.method === 'bulkWrite' && call.collection === 'rm_a') {
          const next = collisions.shift();
          if (next) throw next;
        }
        return undefined;
      });
      await (await again.store).commit('p', at(7), writes);
      expect(again.of('bulkWrite', 'rm_a').map(ids)).to.deep.equal([['x', 'y', 'z'], ['y', 'z']]);
    });
  });

  describe('a commit in a transaction', function () {
    const write = (collection: string, id: string, position: number): ReadWrite => ({ op: 'set', collection, id, position: at(position), set: { v: position } });

    it('creates the collections it writes (and the checkpoints) before the transaction, once; one that exists already is fine', async function () {
      const { store, calls, of } = open((call) => {
        if (call.method === 'createCollection' && call.collection === 'rm_checkpoints') {
          throw serverError(48, 'NamespaceExists', 'Collection leadpost.rm_checkpoints already exists.');
        }
        return undefined;
      });
      const opened = await store;
      await opened.commit('p', at(1), [write('a', 'x', 1), write('b', 'y', 1), write('a', 'z', 1)]);
      const order = calls.map((c) => (c.method === 'createCollection' ? `create ${c.collection}` : c.method)).filter((m) => m !== 'hello' && m !== 'connect');
      expect(order).to.deep.equal([
        'create rm_checkpoints',
        'create rm_a',
        'create rm_b',
        'startSession',
        'startTransaction',
        'find',
        'find',
        'bulkWrite',
        'bulkWrite',
        'updateOne',
        'commitTransaction',
        'endSession',
      ]);
      for (const call of [...of('find'), ...of('bulkWrite')]) expect((call.args[1] as { session?: unknown }).session, call.method).to.be.an('object');
      await opened.commit('p', at(2), [write('a', 'x', 2)]);
      expect(of('createCollection')).to.have.length(3);
      // A dropped collection is created again before the next transaction writes to it.
      await opened.drop('a');
      await opened.commit('p', at(3), [write('a', 'x', 3)]);
      expect(of('createCollection').map((c) => c.collection)).to.deep.equal(['rm_checkpoints', 'rm_a', 'rm_b', 'rm_a']);
    });

    it('a collection it cannot create fails the commit before any transaction starts', async function () {
      const refused = serverError(13, 'Unauthorized', 'not authorized on leadpost to execute command { create: "rm_a" }');
      const { store, of } = open((call) => {
        if (call.method === 'createCollection' && call.collection === 'rm_a') throw refused;
        return undefined;
      });
      expect(await rejection((await store).commit('p', at(1), [write('a', 'x', 1)]))).to.equal(refused);
      expect(of('startSession')).to.deep.equal([]);
    });
  });

  describe('leases', function () {
    const expires = new Date('2026-11-24T12:00:03.000Z');

    it('taking or renewing is one findOneAndUpdate: a filter on holder or expiry, and the token and expiry computed by the server', async function () {
      const { store, of } = open((call) => (call.method === 'findOneAndUpdate' ? { _id: 'projector', holder: 'web-1:7:ab', token: 4, expires_at: expires } : undefined));
      const lease = await (await store).acquireLease('projector', 'web-1:7:ab', 3000);
      expect(lease).to.deep.equal({ name: 'projector', holder: 'web-1:7:ab', token: 4, expiresAt: expires.getTime() });
      const [call] = of('findOneAndUpdate', 'rm_leases');
      expect(call!.args[0]).to.deep.equal({ _id: 'projector', $or: [{ holder: 'web-1:7:ab' }, { $expr: { $lte: ['$expires_at', '$$NOW'] } }] });
      const stillHeld = { $and: [{ $eq: ['$holder', 'web-1:7:ab'] }, { $gt: ['$expires_at', '$$NOW'] }] };
      expect(call!.args[1]).to.deep.equal([
        {
          $set: {
            token: { $cond: [stillHeld, '$token', { $add: [{ $ifNull: ['$token', 0] }, 1] }] },
            holder: { $literal: 'web-1:7:ab' },
            expires_at: { $add: ['$$NOW', 3000] },
          },
        },
      ]);
      expect(call!.args[2]).to.deep.equal({ upsert: true, returnDocument: 'after', writeConcern: { w: 'majority', wtimeoutMS: 3000 } });
    });

    it('held by another, the upsert collides on _id: the lease is read and returned as it stands', async function () {
      const duplicate = new MongoServerError({ ok: 0, code: 11000, codeName: 'DuplicateKey', errmsg: 'E11000 duplicate key error', keyPattern: { _id: 1 } });
      const { store, of } = open((call) => {
        if (call.method === 'findOneAndUpdate') throw duplicate;
        if (call.method === 'findOne' && call.collection === 'rm_leases') return { _id: 'projector', holder: 'web-2:8:cd', token: 5, expires_at: expires };
        return undefined;
      });
      expect(await (await store).acquireLease('projector', 'web-1:7:ab', 3000)).to.deep.equal({ name: 'projector', holder: 'web-2:8:cd', token: 5, expiresAt: expires.getTime() });
      expect(of('findOne', 'rm_leases')[0]!.args[0]).to.deep.equal({ _id: 'projector' });
    });

    it('a fenced commit in a transaction writes the lease last, in the session, and fails the transaction when its holder lost it', async function () {
      const fence = { lease: 'projector', holder: 'web-1:7:ab', token: 4 };
      let held = true;
      const { store, of, calls } = open((call) => (call.method === 'updateOne' && call.collection === 'rm_leases' ? { matchedCount: held ? 1 : 0 } : undefined));
      const opened = await store;
      const from = calls.length;
      await opened.commit('p', at(1), [{ op: 'set', collection: 'a', id: 'x', position: at(1), set: { v: 1 } }], fence);
      const [fenced] = of('updateOne', 'rm_leases');
      expect(fenced!.args[0]).to.deep.equal({ _id: 'projector', holder: 'web-1:7:ab', token: 4, $expr: { $gt: ['$expires_at', '$$NOW'] } });
      expect(fenced!.args[1]).to.deep.equal({ $inc: { commits: 1 } });
      expect(fenced!.args[2]).to.have.property('session');
      // Last in the transaction: the lease is locked only from there to the commit, never behind the writes.
      const order = calls.slice(from).map((c) => (c.collection ? `${c.method} ${c.collection}` : c.method));
      expect(order.slice(order.indexOf('startTransaction'))).to.deep.equal(['startTransaction', 'find rm_a', 'bulkWrite rm_a', 'updateOne rm_checkpoints', 'updateOne rm_leases', 'commitTransaction', 'endSession']);
      held = false;
      // Thrown inside the transaction, which is aborted, and with it the writes made before.
      const lost = await rejection(opened.commit('p', at(2), [{ op: 'set', collection: 'a', id: 'x', position: at(2), set: { v: 2 } }], fence));
      expect(lost).to.be.instanceOf(LeaseLostError);
      expect(of('startTransaction')).to.have.length(2);
      expect(of('abortTransaction')).to.have.length(1);
      expect(of('commitTransaction')).to.have.length(1);
    });

    it('without transactions the fence is read just before the writes', async function () {
      const { store, of } = open((call) => (call.method === 'hello' ? STANDALONE : undefined));
      const error = await rejection((await store).commit('p', at(1), [{ op: 'set', collection: 'a', id: 'x', position: at(1), set: { v: 1 } }], { lease: 'projector', holder: 'web-1:7:ab', token: 4 }));
      expect(error).to.be.instanceOf(LeaseLostError);
      expect(of('findOne', 'rm_leases')[0]!.args[0]).to.deep.equal({ _id: 'projector', holder: 'web-1:7:ab', token: 4, $expr: { $gt: ['$expires_at', '$$NOW'] } });
      expect(of('bulkWrite')).to.deep.equal([]);
    });
  });

  describe('report pages', function () {
    it('the walk along the first key field and the grouping may both sort on disk: either may sort a whole time range', async function () {
      const { store, of } = open();
      const filter = { received_at: { $gte: '2024-01-01T00', $lt: '2025-01-01T00' } };
      await (await store).aggregate('leads_v1', { filter, key: [{ field: 's1' }], sum: ['sold'], limit: 51 });
      const [walk] = of('find', 'rm_leads_v1');
      expect(walk!.args[1]).to.deep.include({ sort: { s1: 1 }, allowDiskUse: true });
      const [grouping] = of('aggregate', 'rm_leads_v1');
      expect(grouping!.args[1]).to.deep.include({ allowDiskUse: true });
    });
  });

  describe('list pages', function () {
    it('a cursor page of deliveries by buyer is one query: a top-level $or of bounded ranges, each with the filter, in index order', async function () {
      const { store, of } = open();
      const after = { value: '2024-05-01T00:00:00.000Z', id: '1234' };
      await (await store).find('deliveries_v1', { filter: { buyer: 'acme' }, sort: { field: 'created_at', direction: 'desc' }, after, limit: 51 });
      const [find] = of('find', 'rm_deliveries_v1');
      const buyer = { buyer: { $eq: 'acme' } };
      expect(find!.args[0]).to.deep.equal({
        $or: [
          { $and: [buyer, { created_at: { $lt: after.value } }] },
          { $and: [buyer, { created_at: after.value, _id: { $lt: after.id } }] },
          { $and: [buyer, { created_at: null }] },
        ],
      });
      expect(find!.args[1]).to.deep.include({ sort: { created_at: -1, _id: -1 }, limit: 51 });
    });

    it('the deliveries projection indexes buyer and bucket with and without a status, each then created_at and _id', async function () {
      const { store, of } = open();
      await (await store).ensureIndexes('deliveries_v1', deliveriesProjection.indexes.deliveries!);
      const keys = of('createIndex').map((c) => Object.keys(c.args[0] as Document).join(','));
      expect(keys).to.include.members(['buyer,created_at,_id', 'bucket,created_at,_id', 'buyer,status,created_at,_id', 'bucket,status,created_at,_id']);
    });
  });
});

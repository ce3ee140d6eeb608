// The MongoDB read-model store's transactions and leases without a server: the options a commit's
// transaction runs with, and what the driver makes of them for a read inside it when MONGODB_URL
// asks for another read preference; the concerns leases are read and written with.
import { expect } from 'chai';
import { MongoClient, type TransactionOptions } from 'mongodb';
import { MongoReadModelStore } from '../../src/read-models/mongodb.js';
import { ReadModelUnavailableError } from '../../src/read-models/port.js';
import { scriptedClient } from './scripted-mongo.js';
import { type WireMongod, startWireMongod } from './wire-mongod.js';

const URL = 'mongodb://db1.example:27017,db2.example:27017/leadpost?replicaSet=rs0&readPreference=secondaryPreferred&w=1';

/** The options of each transaction a commit runs, read from a scripted client. */
async function transactionOptionsOfACommit(): Promise<Array<TransactionOptions | undefined>> {
  const scripted = scriptedClient();
  const seen: Array<TransactionOptions | undefined> = [];
  const startSession = scripted.client.startSession.bind(scripted.client);
  scripted.client.startSession = (() => {
    const session = startSession();
    const start = session.startTransaction.bind(session);
    session.startTransaction = ((options?: TransactionOptions) => {
      seen.push(options);
      start(options);
    }) as typeof session.startTransaction;
    return session;
  }) as typeof scripted.client.startSession;
  const store = await MongoReadModelStore.open(scripted.client, URL);
  const at = { commit: 1, prepare: 1 };
  await store.commit('leads', at, [{ op: 'set', collection: 'leads', id: 'lead-1', position: at, set: { status: 'sold' } }]);
  return seen;
}

describe('MongoDB read-model store: a commit in a transaction', function () {
  it('reads from the primary with majority read and write concerns, giving up on a majority after 10 s', async function () {
    const [options, ...more] = await transactionOptionsOfACommit();
    expect(more).to.deep.equal([]);
    expect(options?.readPreference).to.have.property('mode', 'primary');
    expect(options?.readConcern).to.deep.equal({ level: 'majority' });
    expect({ ...options?.writeConcern }).to.include({ w: 'majority', wtimeoutMS: 10_000 });
  });

  it('with those options a read in the transaction goes to the primary where MONGODB_URL says secondaryPreferred', async function () {
    const [options] = await transactionOptionsOfACommit();
    // A real driver session, never connected: the read preference is settled before any server is chosen.
    const client = new MongoClient(URL);
    const session = client.startSession();
    try {
      const leads = client.db('leadpost').collection('rm_leads');
      session.startTransaction();
      // The driver refuses this one in a transaction ("Read preference in a transaction must be primary").
      expect(leads.find({}, { session }).readPreference.mode).to.equal('secondaryPreferred');
      await session.abortTransaction();
      session.startTransaction(options);
      expect(leads.find({}, { session }).readPreference.mode).to.equal('primary');
      await session.abortTransaction();
    } finally {
      await session.endSession();
      await client.close();
    }
  });
});

describe('MongoDB read-model store: a commit whose majority is not reached', function () {
  // The driver's own withTransaction would commit again, 10 s at a time, for 120 s: held to this
  // mocha timeout, such a commit fails the test.
  this.timeout(10_000);
  let mongod: WireMongod;
  let store: MongoReadModelStore | undefined;
  before(async () => (mongod = await startWireMongod()));
  after(async () => {
    await store?.close();
    await mongod.close();
  });

  it('fails as unavailable after waiting for it once, within the commit bound, with the real driver', async function () {
    store = await MongoReadModelStore.connect(`mongodb://127.0.0.1:${mongod.port}/leadpost?directConnection=true`, { commitWithinMs: 300 });
    expect(store.transactional).to.equal(true);
    const at = { commit: 1, prepare: 1 };
    const started = Date.now();
    const failure = await store.commit('leads', at, [{ op: 'set', collection: 'leads', id: 'lead-1', position: at, set: { status: 'sold' } }]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(failure).to.be.instanceOf(ReadModelUnavailableError);
    expect(mongod.commits).to.deep.equal([{ w: 'majority', wtimeout: 300 }]);
    expect(Date.now() - started).to.be.below(5_000);
  });
});

describe('MongoDB read-model store: leases and checkpoints', function () {
  it('are read from the primary where MONGODB_URL says secondaryPreferred: a secondary may hold an older lease or checkpoint', async function () {
    const scripted = scriptedClient();
    const store = await MongoReadModelStore.open(scripted.client, URL);
    await store.lease('projector');
    await store.checkpoint('leads');
    const reads = [...scripted.of('findOne', 'rm_leases'), ...scripted.of('findOne', 'rm_checkpoints')];
    expect(reads).to.have.length(2);
    for (const read of reads) expect((read.args[1] as { readPreference?: { mode: string } } | undefined)?.readPreference?.mode, read.collection).to.equal('primary');
  });
});

describe('MongoDB read-model store: taking or renewing a lease', function () {
  it('waits for a majority, for no longer than the lease lasts, where MONGODB_URL says w=1', async function () {
    // What a write without a concern of its own gets from this URL.
    const client = new MongoClient(URL);
    expect(client.db('leadpost').collection('rm_leases').writeConcern?.w).to.equal(1);
    await client.close();
    const taken = { _id: 'delivery', holder: 'web-1:7:ab', token: 1, expires_at: new Date() };
    const scripted = scriptedClient((call) => (call.method === 'findOneAndUpdate' ? taken : undefined));
    const store = await MongoReadModelStore.open(scripted.client, URL);
    await store.acquireLease('delivery', 'web-1:7:ab', 3000);
    const [take, ...more] = scripted.of('findOneAndUpdate', 'rm_leases');
    expect(more).to.deep.equal([]);
    expect((take!.args[2] as { writeConcern?: unknown }).writeConcern).to.deep.equal({ w: 'majority', wtimeoutMS: 3000 });
  });
});

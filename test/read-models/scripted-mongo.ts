import type { Document, MongoClient } from 'mongodb';

// A MongoClient whose server is a script: the adapter is driven through the calls it makes on the
// driver, and the script answers each one (or throws one of the driver's own errors) as a server
// would, so what the adapter does with an answer is tested without a server. Only the calls the
// adapter makes exist.

export interface Call {
  /** `connect`, `hello`, `createCollection`, `find`, `findOne`, `bulkWrite`, `updateOne`, `startSession`, `startTransaction`, `commitTransaction`… */
  readonly method: string;
  /** The collection, for calls on one. */
  readonly collection?: string;
  readonly args: readonly unknown[];
}

/** Returns the answer to a call, undefined for the usual one, or throws the error the server gave. */
export type Script = (call: Call) => unknown;

/** The `hello` of the primary of a replica set. */
export const PRIMARY = { isWritablePrimary: true, setName: 'rs0', ok: 1 };
/** The `hello` of a standalone server: no transactions. */
export const STANDALONE = { isWritablePrimary: true, ok: 1 };

const USUAL: Record<string, unknown> = {
  hello: PRIMARY,
  find: [],
  aggregate: [],
  listCollections: [],
  findOne: null,
  findOneAndUpdate: null,
  bulkWrite: {},
  updateOne: {},
  deleteMany: {},
  deleteOne: {},
  createCollection: {},
  createIndex: 'index',
  drop: true,
};

export function scriptedClient(script: Script = () => undefined): { client: MongoClient; calls: Call[]; of(method: string, collection?: string): Call[] } {
  const calls: Call[] = [];
  const call = (method: string, collection: string | undefined, args: unknown[]): unknown => {
    const made: Call = { method, ...(collection !== undefined ? { collection } : {}), args };
    calls.push(made);
    return script(made) ?? USUAL[method];
  };
  const answer = async (method: string, collection: string | undefined, args: unknown[]) => call(method, collection, args);
  const cursor = (method: string, collection: string | undefined, args: unknown[]) => ({
    toArray: () => answer(method, collection, args),
    async *[Symbol.asyncIterator]() {
      yield* (await answer(method, collection, args)) as Document[];
    },
    close: async () => {},
  });
  const collection = (name: string) => ({
    collectionName: name,
    find: (...args: unknown[]) => cursor('find', name, args),
    aggregate: (...args: unknown[]) => cursor('aggregate', name, args),
    findOne: (...args: unknown[]) => answer('findOne', name, args),
    findOneAndUpdate: (...args: unknown[]) => answer('findOneAndUpdate', name, args),
    bulkWrite: (...args: unknown[]) => answer('bulkWrite', name, args),
    updateOne: (...args: unknown[]) => answer('updateOne', name, args),
    replaceOne: (...args: unknown[]) => answer('replaceOne', name, args),
    deleteMany: (...args: unknown[]) => answer('deleteMany', name, args),
    deleteOne: (...args: unknown[]) => answer('deleteOne', name, args),
    createIndex: (...args: unknown[]) => answer('createIndex', name, args),
    drop: (...args: unknown[]) => answer('drop', name, args),
  });
  const db = (name: string) => ({
    databaseName: name,
    command: (command: Document, ...rest: unknown[]) => answer(Object.keys(command)[0]!, undefined, [command, ...rest]),
    createCollection: (collectionName: string, ...rest: unknown[]) => answer('createCollection', collectionName, rest),
    listCollections: (...args: unknown[]) => cursor('listCollections', undefined, args),
    collection,
  });
  const client = {
    connect: async () => {
      await answer('connect', undefined, []);
      return client;
    },
    db,
    startSession: () => {
      call('startSession', undefined, []);
      let open = false;
      const session = {
        startTransaction: (options?: unknown) => {
          call('startTransaction', undefined, [options]);
          open = true;
        },
        inTransaction: () => open,
        commitTransaction: async () => {
          open = false;
          await answer('commitTransaction', undefined, []);
        },
        abortTransaction: async () => {
          open = false;
          await answer('abortTransaction', undefined, []);
        },
        endSession: () => answer('endSession', undefined, []),
      };
      return session;
    },
    close: () => answer('close', undefined, []),
  };
  return {
    client: client as unknown as MongoClient,
    calls,
    of: (method, name) => calls.filter((c) => c.method === method && (name === undefined || c.collection === name)),
  };
}

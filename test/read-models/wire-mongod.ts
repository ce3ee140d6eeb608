// A MongoDB server as the real driver meets it on the wire, for what no scripted client can show:
// what the driver itself does with an answer. It plays the primary of a replica set `rs0` cut off
// from its secondaries: every command succeeds, except that a commitTransaction waits out its
// write concern's wtimeout and then answers ok with a WriteConcernFailed error, as such a primary
// does. It speaks the handshake's OP_QUERY and OP_MSG, and nothing more.

import { createServer, type Server, type Socket } from 'node:net';
import { BSON, type Document, ObjectId } from 'mongodb';

export interface WireMongod {
  readonly port: number;
  /** The write concern of each commitTransaction, in order. */
  readonly commits: Document[];
  close(): Promise<void>;
}

const OP_REPLY = 1;
const OP_QUERY = 2004;
const OP_MSG = 2013;

export async function startWireMongod(): Promise<WireMongod> {
  const commits: Document[] = [];
  const electionId = new ObjectId();
  const sockets = new Set<Socket>();
  let port = 0;
  const hello = () => ({
    ismaster: true, isWritablePrimary: true, helloOk: true, setName: 'rs0', setVersion: 1, electionId,
    hosts: [`127.0.0.1:${port}`], primary: `127.0.0.1:${port}`, me: `127.0.0.1:${port}`, maxWireVersion: 21, minWireVersion: 0,
    maxBsonObjectSize: 16_777_216, maxMessageSizeBytes: 48_000_000, maxWriteBatchSize: 100_000, logicalSessionTimeoutMinutes: 30,
    localTime: new Date(), connectionId: 1, ok: 1,
  });
  const answer = async (command: Document): Promise<Document> => {
    const name = Object.keys(command)[0]!;
    if (name === 'ismaster' || name === 'isMaster' || name === 'hello') return hello();
    if (name === 'commitTransaction') {
      commits.push(command.writeConcern as Document);
      await new Promise((resolve) => setTimeout(resolve, Number((command.writeConcern as Document | undefined)?.wtimeout ?? 0)));
      return { ok: 1, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } };
    }
    if (name === 'update') return { ok: 1, n: 1, nModified: 1 };
    if (name === 'find') return { ok: 1, cursor: { id: 0n, ns: `${String(command.$db)}.${String(command.find)}`, firstBatch: [] } };
    return { ok: 1 };
  };
  let nextId = 1;
  const header = (length: number, responseTo: number, opCode: number) => {
    const bytes = Buffer.alloc(16);
    bytes.writeInt32LE(length, 0);
    bytes.writeInt32LE(nextId++, 4);
    bytes.writeInt32LE(responseTo, 8);
    bytes.writeInt32LE(opCode, 12);
    return bytes;
  };
  const reply = async (socket: Socket, message: Buffer): Promise<void> => {
    const requestId = message.readInt32LE(4);
    const opCode = message.readInt32LE(12);
    if (opCode === OP_QUERY) {
      // flags, the collection's name (a C string), skip, limit, then the query.
      let at = 20;
      while (message[at] !== 0) at++;
      at += 1 + 8;
      const doc = BSON.serialize(await answer(BSON.deserialize(message.subarray(at, at + message.readInt32LE(at)))));
      const fields = Buffer.alloc(20);
      fields.writeInt32LE(1, 16);
      socket.write(Buffer.concat([header(16 + 20 + doc.length, requestId, OP_REPLY), fields, doc]));
    } else if (opCode === OP_MSG) {
      // flags, then sections: kind 0 is the command, kind 1 a document sequence (skipped).
      const end = message.readUInt32LE(16) & 1 ? message.length - 4 : message.length;
      let at = 20;
      let command: Document = {};
      while (at < end) {
        const kind = message[at++];
        const length = message.readInt32LE(at);
        if (kind === 0) command = BSON.deserialize(message.subarray(at, at + length));
        at += length;
      }
      const doc = BSON.serialize(await answer(command));
      socket.write(Buffer.concat([header(16 + 5 + doc.length, requestId, OP_MSG), Buffer.alloc(5), doc]));
    }
  };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => {});
    let pending = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
        const length = pending.readInt32LE(0);
        void reply(socket, pending.subarray(0, length));
        pending = pending.subarray(length);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
  return {
    port,
    commits,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

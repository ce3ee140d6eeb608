import { expect } from 'chai';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import { QUIET_MS, REPORT_MS } from '../../src/ops/outage-log.js';
import { overriding } from '../support/overriding.js';
import { TestService, validLead } from '../support/service.js';
import { until } from '../support/until.js';

// Another process holds keys.db's write lock (an operator's sqlite3 shell) while posts need new
// data keys: each waits its 10 s and is answered 503. The log says so once for the outage, with the
// store's error said once, and once more when the 503s have stopped, counting them, rather than a
// warning per post, which under load was thousands of identical lines. An outage that goes on is
// counted every REPORT_MS meanwhile (there the event store is made to fail at once, so that a
// test need not hold a lock for each of many posts).

interface Line {
  readonly level: number;
  readonly time: string;
  readonly msg: string;
  readonly trace_id?: string;
  readonly answered_503?: number;
  readonly started_at?: string;
  readonly last_at?: string;
  readonly err?: { readonly message: string; readonly stack: string };
}

const POSTS = 6;

describe('the log of a store outage', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  let other: Database.Database | undefined;
  afterEach(async () => {
    if (other?.open) other.close();
    await svc?.stop();
    svc = undefined;
  });

  const outageLines = (): Line[] =>
    svc!.logs.map((text) => JSON.parse(text) as Line).filter((line) => line.msg.startsWith('store unavailable'));

  it('keys.db locked past a write\'s wait: one warning when the posts begin to fail, with the cause said once, then one line counting every 503 once they stop', async function () {
    // A fresh service: its pool of data keys fills at its first post, which must write keys.db.
    svc = await TestService.start();
    const key = await svc.key();
    other = new Database(join(svc.dataDir, 'keys.db'));
    other.exec('BEGIN IMMEDIATE');
    const replies = await Promise.all(Array.from({ length: POSTS }, () => svc!.post(validLead(), { 'x-api-key': key })));
    expect(replies.map((reply) => reply.status)).to.deep.equal(Array(POSTS).fill(503));
    other.exec('ROLLBACK');
    other.close();

    const over = await until('the line that ends the outage', () => outageLines().find((line) => line.msg.startsWith('store unavailable: over')), 3 * QUIET_MS);
    const lines = outageLines();
    const first = lines[0]!;
    expect(lines.filter((line) => line.msg === 'store unavailable'), JSON.stringify(lines)).to.have.length(1);
    expect(replies.map((reply) => reply.body.trace_id)).to.include(first.trace_id);
    // pino appends a cause's message to its error's; the key store's error already ends with it.
    expect(first.err!.message).to.equal('the key store cannot store new data keys: database is locked');
    expect(first.err!.stack).to.include('caused by: SqliteError: database is locked');
    expect(over.answered_503).to.equal(POSTS);
    expect(over.msg).to.equal(`store unavailable: over, no request answered 503 for ${QUIET_MS / 1000} s (answered_503: the outage's total)`);
    expect(Date.parse(over.last_at!)).to.be.at.least(Date.parse(over.started_at!));
    expect(lines.at(-1)).to.deep.equal(over);
    // Posts failing within moments of each other: the first line and the last, which counts every 503.
    expect(lines, JSON.stringify(lines.map(({ err, ...line }) => line))).to.have.length(2);

    // The lock gone, posts are answered as usual.
    expect((await svc.post(validLead(), { 'x-api-key': key })).status).to.equal(201);
  });

  it('an outage that goes on: a line every REPORT_MS counting the 503s since the line before, then the last line counting them all', async function () {
    let down = false;
    svc = await TestService.start({
      wrapStore: (store) =>
        overriding(store, { append: (...args) => (down ? Promise.reject(new EventStoreUnavailableError('the disk is gone')) : store.append(...args)) }),
    });
    const key = await svc.key();
    down = true;
    let answered503 = 0;
    const goesOn = () => outageLines().find((line) => line.msg.startsWith('store unavailable: still'));
    const started = Date.now();
    while (!goesOn()) {
      if (Date.now() - started > 3 * REPORT_MS) throw new Error(`no line counting the 503s within ${3 * REPORT_MS} ms: ${JSON.stringify(outageLines().slice(0, 3))}`);
      const reply = await svc.post(validLead(), { 'x-api-key': key });
      expect(reply.status, reply.text).to.equal(503);
      answered503 += 1;
    }
    down = false;
    const over = await until('the line that ends the outage', () => outageLines().find((line) => line.msg.startsWith('store unavailable: over')), 3 * QUIET_MS);
    const lines = outageLines();
    expect(lines[0]!.msg).to.equal('store unavailable');
    expect(lines[0]!.err!.message).to.equal('the disk is gone');
    const middle = lines.slice(1, -1);
    expect(middle.length, JSON.stringify(lines)).to.be.at.least(1);
    for (const line of middle) {
      expect(line.msg).to.equal('store unavailable: still answering 503 (answered_503: the requests since the line before, not logged one by one)');
      expect(line.err!.message).to.equal('the disk is gone');
    }
    // The lines that count are REPORT_MS apart, the first REPORT_MS after the outage began.
    const times = lines.slice(0, -1).map((line) => Date.parse(line.time));
    for (let i = 1; i < times.length; i++) expect(times[i]! - times[i - 1]!).to.be.at.least(REPORT_MS - 5);
    expect(over).to.deep.equal(lines.at(-1));
    expect(over.answered_503).to.equal(answered503);
    expect(1 + middle.reduce((sum, line) => sum + line.answered_503!, 0)).to.be.at.most(answered503);
    expect(answered503).to.be.greaterThan(middle.length + 1);
  });

  it('the key ring, reading the keys stream four times a second, logs a failing store once, then counts its failed reads', async function () {
    let down = false;
    let failedReads = 0;
    svc = await TestService.start({
      wrapStore: (store) =>
        overriding(store, {
          readStream: (stream, ...rest) => {
            if (down && stream === 'api-keys') {
              failedReads += 1;
              return Promise.reject(new EventStoreUnavailableError('the disk is gone'));
            }
            return store.readStream(stream, ...rest);
          },
        }),
    });
    down = true;
    await until('a dozen failed reads of the keys stream', () => (failedReads >= 12 ? true : undefined), 20_000);
    down = false;
    const keyRingLines = () => svc!.logs.map((text) => JSON.parse(text) as Line & { failed_reads?: number }).filter((line) => line.msg.startsWith('key ring refresh failed'));
    const over = await until('the line that ends the failed reads', () => keyRingLines().find((line) => line.msg.startsWith('key ring refresh failed: over')), 3 * QUIET_MS);
    const lines = keyRingLines();
    expect(lines.map((line) => line.msg), JSON.stringify(lines)).to.deep.equal(['key ring refresh failed', over.msg]);
    expect(lines[0]!.err!.message).to.equal('the disk is gone');
    expect(over.failed_reads).to.equal(failedReads);
  });
});

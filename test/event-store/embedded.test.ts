import { expect } from 'chai';
import Database from 'better-sqlite3';
import sinon from 'sinon';
import { writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { EventStoreUnavailableError } from '../../src/event-store/index.js';
import type { RecordedEvent } from '../../src/event-store/port.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { eventStoreContract } from './contract.js';

/** Reads `count` events of a subscription into `seen`, as `stream:revision`. */
async function readInto(seen: string[], subscription: AsyncIterable<RecordedEvent>, count: number): Promise<void> {
  for await (const event of subscription) {
    seen.push(`${event.streamId}:${event.revision}`);
    if (seen.length === count) break;
  }
}

const FULL_DISK_CHILD = fileURLToPath(new URL('./full-disk-child.js', import.meta.url));

describe('embedded event store (SQLite)', function () {
  const dir = tempDir('events');
  after(() => dir.remove());

  eventStoreContract('embedded SQLite', () => EmbeddedEventStore.open(dir.path), {
    childEnv: () => ({ LEADPOST_DATA_DIR: dir.path, EVENTSTORE_URL: '' }),
  });

  describe('durability', function () {
    this.timeout(60_000);

    it('kill -9 in the middle of appending: every acknowledged append is readable, no append is partial', async function () {
      for (let round = 0; round < 3; round++) {
        const prefix = `crash${round}-`;
        const child = runChild(['streams', prefix, '1000000', '4'], { LEADPOST_DATA_DIR: dir.path, EVENTSTORE_URL: '' });
        await child.until('acked ', 300 + round * 200);
        child.process.kill('SIGKILL');
        const result = await child;
        expect(result.signal).to.equal('SIGKILL');
        const acked = result.lines.filter((l) => l.startsWith('acked ')).map((l) => Number(l.slice(6)));

        const store = await EmbeddedEventStore.open(dir.path);
        try {
          for (const index of acked) {
            const events = await store.readStream(`${prefix}${index}`);
            expect(events.map((e) => e.revision), `acknowledged stream ${index}`).to.deep.equal([0, 1, 2, 3]);
          }
          const perStream = new Map<string, number>();
          for (const e of await store.readAll()) {
            if (e.streamId.startsWith(prefix)) perStream.set(e.streamId, (perStream.get(e.streamId) ?? 0) + 1);
          }
          // Appends in flight at the kill are either wholly there or wholly absent.
          for (const [streamId, count] of perStream) expect(count, streamId).to.equal(4);
          expect(perStream.size).to.be.at.least(acked.length);
        } finally {
          await store.close();
        }
      }
    });

    it('an append resolves only after the commit: a new connection reads it at once', async function () {
      const a = await EmbeddedEventStore.open(dir.path);
      const b = await EmbeddedEventStore.open(dir.path);
      try {
        await a.append('visible-1', [{ type: 'E', data: { n: 1 } }], { expectedRevision: 'no_stream' });
        expect(await b.readStream('visible-1')).to.have.length(1);
      } finally {
        await a.close();
        await b.close();
      }
    });
  });

  describe('decoded tail shared by readers', function () {
    it('readers at different places, reading while appends go on, each see every event once and in order', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      try {
        const start = await store.headPosition();
        await store.append('tail-0', Array.from({ length: 30 }, (_, i) => ({ type: 'E', data: { i } })));
        const early = (await store.readAll({ fromPosition: start, maxCount: 3 })).at(-1)!.position;
        const seen: string[][] = [[], [], [], []];
        const from = [start, early, start, start];
        let appended = 30;
        for (let round = 0; round < 40; round++) {
          // Readers take turns with small and odd page sizes, so reads start inside, at and past the tail.
          for (let r = 0; r < 4; r++) {
            const page = await store.readAll({ fromPosition: from[r]!, maxCount: 1 + ((round * 7 + r * 3) % 11) });
            for (const event of page) seen[r]!.push(`${event.streamId}:${event.revision}`);
            if (page.length > 0) from[r] = page.at(-1)!.position;
          }
          if (round % 3 === 0) {
            await store.append(`tail-${round + 1}`, [{ type: 'E', data: {} }, { type: 'E', data: {} }]);
            appended += 2;
          }
        }
        for (let r = 0; r < 4; r++) {
          for (const event of await store.readAll({ fromPosition: from[r]! })) seen[r]!.push(`${event.streamId}:${event.revision}`);
        }
        const all = (await store.readAll({ fromPosition: start })).map((e) => `${e.streamId}:${e.revision}`);
        expect(all).to.have.length(appended);
        expect(seen[0]).to.deep.equal(all);
        expect(seen[1]).to.deep.equal(all.slice(3));
        expect(seen[2]).to.deep.equal(all);
        expect(seen[3]).to.deep.equal(all);
      } finally {
        await store.close();
      }
    });
  });

  describe("a subscriber reading this process's own appends", function () {

    it('gets them from memory without a query, and still finds a commit of another writer between them on disk', async function () {
      const store = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
      const other = await EmbeddedEventStore.open(dir.path);
      try {
        const start = await store.headPosition();
        await store.append('own-0', [{ type: 'E', data: {} }]);
        const subscription = store.subscribeToAll({ fromPosition: start });
        const seen: string[] = [];
        const reading = readInto(seen, subscription, 6);
        await until(() => `1 events read (${seen.join(', ')})`, () => seen.length === 1, 5000);
        const disk = sinon.spy(store as unknown as { readAllFromDisk(): unknown }, 'readAllFromDisk');
        await store.append('own-1', [{ type: 'E', data: {} }, { type: 'E', data: {} }]);
        await store.append('own-2', [{ type: 'E', data: {} }]);
        await until(() => `4 events read (${seen.join(', ')})`, () => seen.length === 4, 5000);
        expect(disk.callCount, 'reads of the disk for appends of this process').to.equal(0);
        // Another writer's commit lands between two of ours: the gap sends the reader to the disk.
        await other.append('theirs-3', [{ type: 'E', data: {} }]);
        await store.append('own-4', [{ type: 'E', data: {} }]);
        await reading;
        expect(seen).to.deep.equal(['own-0:0', 'own-1:0', 'own-1:1', 'own-2:0', 'theirs-3:0', 'own-4:0']);
        expect(disk.callCount).to.be.greaterThan(0);
      } finally {
        await other.close();
        await store.close();
      }
    });
  });

  describe('a process without subscribers (one that serves the API while another projects)', function () {
    it('keeps only the number of events of its commits; a subscriber that comes later reads those from disk and every later one from memory', async function () {
      const store = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
      const recent = sinon.spy((store as unknown as { recent: { set(position: number, kept: unknown): void } }).recent, 'set');
      const rowsKept = () => recent.args.filter(([, kept]) => typeof kept !== 'number').length;
      try {
        const start = await store.headPosition();
        await store.append('unwatched-0', [{ type: 'E', data: {} }]);
        await store.append('unwatched-1', [{ type: 'E', data: {} }, { type: 'E', data: {} }]);
        expect(recent.args.map(([, kept]) => kept), 'what is kept of commits with nobody subscribed').to.deep.equal([1, 2]);

        const subscription = store.subscribeToAll({ fromPosition: start });
        const seen: string[] = [];
        const reading = readInto(seen, subscription, 5);
        await until(() => `3 events read (${seen.join(', ')})`, () => seen.length === 3, 5000);
        const disk = sinon.spy(store as unknown as { readAllFromDisk(): unknown }, 'readAllFromDisk');
        await store.append('watched-2', [{ type: 'E', data: {} }]);
        await store.append('watched-3', [{ type: 'E', data: {} }]);
        await reading;
        expect(seen).to.deep.equal(['unwatched-0:0', 'unwatched-1:0', 'unwatched-1:1', 'watched-2:0', 'watched-3:0']);
        expect(rowsKept(), 'commits kept whole while subscribed').to.equal(2);
        expect(disk.callCount, 'reads of the disk for appends made while subscribed').to.equal(0);

        // Unsubscribed (the loop's break ended it): only counts again.
        await store.append('unwatched-4', [{ type: 'E', data: {} }]);
        expect(rowsKept()).to.equal(2);
        expect(recent.lastCall.args[1]).to.equal(1);
      } finally {
        await store.close();
      }
    });
  });

  describe('a subscriber catching up', function () {
    it('reads page after page of history without waiting for the poll interval', async function () {
      // With a poll interval of a minute, a subscriber that waited between pages would time out here.
      const store = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
      try {
        const start = await store.headPosition();
        for (let i = 0; i < 5; i++) await store.append(`history-${i}`, Array.from({ length: 700 }, () => ({ type: 'E', data: {} })));
        const reader = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
        let seen = 0;
        try {
          for await (const _ of reader.subscribeToAll({ fromPosition: start })) if (++seen === 3500) break;
        } finally {
          await reader.close();
        }
        expect(seen).to.equal(3500);
      } finally {
        await store.close();
      }
    });

    it('lets timers and I/O run between pages: a long backlog does not hold the process for all of it', async function () {
      // Every page is at hand at once, so without a pause between them the whole backlog would be
      // read in one go of promises: the other subscribers' poll timers, and HTTP, would wait for it.
      const store = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
      try {
        const start = await store.headPosition();
        for (let i = 0; i < 5; i++) await store.append(`backlog-${i}`, Array.from({ length: 700 }, () => ({ type: 'E', data: {} })));
        const reader = await EmbeddedEventStore.open(dir.path, { pollIntervalMs: 60_000 });
        let seen = 0;
        let seenWhenTimerRan: number | undefined;
        setTimeout(() => (seenWhenTimerRan = seen), 0);
        try {
          for await (const _ of reader.subscribeToAll({ fromPosition: start })) if (++seen === 3500) break;
        } finally {
          await reader.close();
        }
        expect(seenWhenTimerRan, 'events read when a timer due at once ran').to.be.a('number').and.below(3500);
      } finally {
        await store.close();
      }
    });
  });

  describe('a group of appends starting new streams', function () {
    it('written together, each still fails or succeeds on its own: an existing name and a name given twice fail, the rest land in order', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      try {
        await store.append('group-existing', [{ type: 'Old', data: {} }]);
        // Sent in one tick, so they reach the writer thread together and share commits.
        const names = Array.from({ length: 60 }, (_, i) => (i === 10 ? 'group-existing' : i === 20 ? 'group-7' : `group-${i}`));
        const results = await Promise.allSettled(
          names.map((name, i) => store.append(name, [{ type: 'New', data: { i } }, { type: 'Next', data: { i } }], { expectedRevision: 'no_stream' })),
        );
        results.forEach((result, i) => {
          if (i === 10 || i === 20) {
            expect(result.status, names[i]).to.equal('rejected');
            expect((result as PromiseRejectedResult).reason).to.have.property('actual', i === 10 ? 0 : 1);
          } else {
            expect(result.status, names[i]).to.equal('fulfilled');
          }
        });
        const positions = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value.position.commit] : []));
        expect(positions).to.deep.equal([...positions].sort((a, b) => a - b));
        expect(new Set(positions).size).to.equal(58);
        for (const i of [0, 7, 31, 32, 59]) {
          expect((await store.readStream(`group-${i}`)).map((e) => [e.type, e.data])).to.deep.equal([
            ['New', { i }],
            ['Next', { i }],
          ]);
        }
        expect((await store.readStream('group-existing')).map((e) => e.type)).to.deep.equal(['Old']);
      } finally {
        await store.close();
      }
    });
  });

  describe('appends crossing to the writer thread together', function () {
    it('keep each stream name and event text whole: newlines, quotes, non-Latin text and astral characters, empty and long texts, any expected revision', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      try {
        await store.append('cross-existing', [{ type: 'Old', data: {} }]);
        const names = ['cross-a\nb', 'cross-"quoted"', 'cross-ünïcødé-名前', 'cross-😀\u2028', 'cross-\\back', 'cross-long'];
        const data = [{ text: 'line\nbreak' }, { text: '\u0000 and "quotes" and \\' }, { name: 'Zoë Ñúñez 名前' }, { emoji: '😀🎉', separator: '\u2028\u2029' }, {}, { text: 'x'.repeat(100_000) }];
        // One tick: these reach the writer in one message, beside an append that fails its expected revision.
        const appends = names.map((name, i) => store.append(name, [{ type: 'Crossed', data: data[i] }, { type: 'Again', data: { i } }], { expectedRevision: 'no_stream' }));
        const conflict = store.append('cross-existing', [{ type: 'New', data: {} }], { expectedRevision: 'no_stream' });
        const after = store.append('cross-existing', [{ type: 'Next', data: { ok: '✓' } }], { expectedRevision: 0 });
        const results = await Promise.all(appends);
        expect(results.map((r) => r.nextExpectedRevision)).to.deep.equal(names.map(() => 1));
        expect(await conflict.then(() => 'appended', (error: unknown) => (error as { actual?: unknown }).actual)).to.equal(0);
        expect((await after).nextExpectedRevision).to.equal(1);
        for (const [i, name] of names.entries()) {
          const read = await store.readStream(name);
          expect(read.map((e) => [e.streamId, e.type, e.data]), name).to.deep.equal([
            [name, 'Crossed', data[i]],
            [name, 'Again', { i }],
          ]);
        }
        expect((await store.readStream('cross-existing')).map((e) => [e.type, e.data])).to.deep.equal([['Old', {}], ['Next', { ok: '✓' }]]);
        // A second connection reads what the writer thread wrote, not this process's memory of it.
        const other = await EmbeddedEventStore.open(dir.path);
        try {
          expect((await other.readStream(names[2]!)).map((e) => e.data)).to.deep.equal([data[2], { i: 2 }]);
          expect((await other.readStream(names[0]!))[0]!.streamId).to.equal(names[0]);
        } finally {
          await other.close();
        }
      } finally {
        await store.close();
      }
    });
  });

  describe('a data dir written by layout 1 (before streams were keyed by name)', function () {
    const LAYOUT_1 = `
      CREATE TABLE streams (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, revision INTEGER NOT NULL);
      CREATE TABLE commits (position INTEGER PRIMARY KEY, stream_id INTEGER NOT NULL REFERENCES streams(id),
        first_revision INTEGER NOT NULL, last_revision INTEGER NOT NULL, events TEXT NOT NULL, created INTEGER NOT NULL,
        UNIQUE (stream_id, last_revision));`;
    const stored = (...types: string[]) => JSON.stringify(types.map((type, i) => [`00000000-0000-7000-8000-00000000000${i}`, type, { type }, {}]));

    function writeLayout1(path: string): void {
      const db = new Database(join(path, 'events.db'));
      db.pragma('journal_mode = WAL');
      db.exec(LAYOUT_1);
      db.prepare('INSERT INTO streams (id, name, revision) VALUES (?, ?, ?)').run(1, 'lead-1', 2);
      db.prepare('INSERT INTO streams (id, name, revision) VALUES (?, ?, ?)').run(2, 'lead-2', 0);
      const commit = db.prepare('INSERT INTO commits (position, stream_id, first_revision, last_revision, events, created) VALUES (?, ?, ?, ?, ?, ?)');
      commit.run(1, 1, 0, 1, stored('A0', 'A1'), 1000);
      commit.run(2, 2, 0, 0, stored('B0'), 2000);
      commit.run(3, 1, 2, 2, stored('A2'), 3000);
      db.close();
    }

    it('is upgraded in place on open: same streams, revisions and positions, and appends go on from there', async function () {
      const old = tempDir('events-layout-1');
      try {
        writeLayout1(old.path);
        const store = await EmbeddedEventStore.open(old.path);
        try {
          const lead1 = await store.readStream('lead-1');
          expect(lead1.map((e) => [e.type, e.revision, e.position.commit, e.position.prepare, e.created])).to.deep.equal([
            ['A0', 0, 1, 0, 1000],
            ['A1', 1, 1, 1, 1000],
            ['A2', 2, 3, 0, 3000],
          ]);
          expect((await store.readStream('lead-1', { fromRevision: 2 })).map((e) => e.type)).to.deep.equal(['A2']);
          expect((await store.readAll()).map((e) => `${e.streamId}:${e.type}`)).to.deep.equal(['lead-1:A0', 'lead-1:A1', 'lead-2:B0', 'lead-1:A2']);
          const conflict = await store.append('lead-2', [{ type: 'B1', data: {} }], { expectedRevision: 'no_stream' }).then(() => null, (e: unknown) => e);
          expect(conflict).to.have.property('actual', 0);
          const next = await store.append('lead-1', [{ type: 'A3', data: {} }], { expectedRevision: 2 });
          expect(next).to.deep.equal({ nextExpectedRevision: 3, position: { commit: 4, prepare: 0 } });
          expect((await store.readStream('lead-1', { fromRevision: 2 })).map((e) => e.type)).to.deep.equal(['A2', 'A3']);
        } finally {
          await store.close();
        }
        const raw = new Database(join(old.path, 'events.db'), { readonly: true });
        try {
          expect(raw.pragma('user_version', { simple: true })).to.equal(2);
          const tables = raw.prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name").pluck().all();
          expect(tables).to.deep.equal(['commits', 'streams']);
        } finally {
          raw.close();
        }
        // A second open finds the new layout and changes nothing.
        const again = await EmbeddedEventStore.open(old.path);
        expect((await again.readStream('lead-1')).map((e) => e.type)).to.deep.equal(['A0', 'A1', 'A2', 'A3']);
        await again.close();
      } finally {
        old.remove();
      }
    });

    it('a file of a newer layout is refused with a message saying to upgrade, and left untouched', async function () {
      const newer = tempDir('events-layout-9');
      try {
        const db = new Database(join(newer.path, 'events.db'));
        db.pragma('user_version = 9');
        db.close();
        const error = await EmbeddedEventStore.open(newer.path).then(() => null, (e: unknown) => e);
        expect(error).to.be.instanceOf(EventStoreUnavailableError);
        expect((error as Error).message).to.match(/layout 9.*upgrade leadpost/);
        const raw = new Database(join(newer.path, 'events.db'), { readonly: true });
        expect(raw.pragma('user_version', { simple: true })).to.equal(9);
        raw.close();
      } finally {
        newer.remove();
      }
    });
  });

  describe('failures', function () {
    it('a data dir that cannot be created is EventStoreUnavailableError, not a crash', async function () {
      // A path below a regular file can never be a directory.
      const file = join(dir.path, 'not-a-dir');
      writeFileSync(file, '');
      const error = await EmbeddedEventStore.open(join(file, 'data')).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
    });

    it('a read that SQLite or the disk fails is EventStoreUnavailableError (a 503), and so is a read after close', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      const statements = store as unknown as { selectLastCommit: { get(): unknown }; selectAll: { all(): unknown } };
      const failingStream = sinon.stub(statements.selectLastCommit, 'get').throws(new Database.SqliteError('disk I/O error', 'SQLITE_IOERR_READ'));
      const failingAll = sinon.stub(statements.selectAll, 'all').throws(new Database.SqliteError('disk I/O error', 'SQLITE_IOERR_READ'));
      try {
        const error = await store.readStream('any').then(() => null, (e: unknown) => e);
        expect(error).to.be.instanceOf(EventStoreUnavailableError);
        const catchUp = await store.readAll({ fromPosition: await store.headPosition() }).then(() => null, (e: unknown) => e);
        expect(catchUp).to.be.instanceOf(EventStoreUnavailableError);
        // Only storage failures: a bug stays a bug (a 500), not a 503 that invites a retry.
        failingStream.throws(new TypeError('a programming error'));
        const bug = await store.readStream('any').then(() => null, (e: unknown) => e);
        expect(bug).to.be.instanceOf(TypeError).and.not.to.be.instanceOf(EventStoreUnavailableError);
      } finally {
        failingStream.restore();
        failingAll.restore();
        await store.close();
      }
      const afterClose = await store.readAll().then(() => null, (e: unknown) => e);
      expect(afterClose).to.be.instanceOf(EventStoreUnavailableError);
    });

    it("an append the disk refuses (full) is unavailable, with SQLite's code carried over from the writer thread, which readiness names", async function () {
      // A file-size limit on a child process: its writes past 2 MiB fail as on a full disk (EFBIG,
      // which SQLite reports as SQLITE_FULL or a write error), through the real writer thread.
      const full = tempDir('events-full');
      try {
        const child = spawn('bash', ['-c', 'ulimit -f 2048 && exec "$0" --enable-source-maps "$1"', process.execPath, FULL_DISK_CHILD], {
          env: { ...process.env, LEADPOST_DATA_DIR: full.path },
        });
        let out = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
        const exit = await new Promise<number | null>((resolve) => child.on('exit', resolve));
        expect(exit, out).to.equal(0);
        const failure = JSON.parse(out.trim()) as { appended: number; name: string; message: string; code: string | null };
        expect(failure.appended, 'appends before the disk filled').to.be.above(0);
        expect(failure.name).to.equal('EventStoreUnavailableError');
        expect(failure.code).to.match(/^SQLITE_(FULL|IOERR)/);
      } finally {
        full.remove();
      }
    });

    it('an append after close is refused as unavailable', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      await store.close();
      const error = await store.append('closed-1', [{ type: 'E', data: {} }]).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
    });

    it('data that is not JSON-serialisable is refused before anything is written', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      try {
        const cyclic: Record<string, unknown> = {};
        cyclic.self = cyclic;
        const error = await store.append('cyclic-1', [{ type: 'E', data: cyclic }]).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).to.be.instanceOf(TypeError);
        expect(await store.readStream('cyclic-1')).to.deep.equal([]);
      } finally {
        await store.close();
      }
    });
  });
});

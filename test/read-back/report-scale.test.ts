import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { PROJECTIONS, versionBuild } from '../../src/projections/index.js';
import { leadsProjection, reportsProjection } from '../../src/projections/projections.js';
import { REBUILD_STORE_OPTIONS, rebuildProjections } from '../../src/projections/rebuild.js';
import { checkpointName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { METRICS } from '../../src/read-models/report.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, writeRouting } from '../reliability/support/server-process.js';
import { START_NODE_ARGS } from '../support/child.js';
import { type Seeded, seedLeads } from '../support/seed-leads.js';
import { tempDir } from '../support/tmp.js';

// A report's memory does not grow with the number of leads. 200,000 leads over seven days, each
// with its own s1, are written straight into the event store and projected into the reports;
// `leadpost serve` then runs in its own process under the heap cap of `npm start`, and every row of
// a report by s1 (one per lead) and by day, sid, state and buyer is read over HTTPS, a page at a
// time and as streamed CSV, and adds up to what was seeded.

const LEADS = 200_000;
const WEEK_MS = 7 * 86_400_000;
const FROM = '2026-10-01';
const TO = '2026-10-07';
const shape = {
  receivedAt: (n: number) => new Date(Date.parse(`${FROM}T00:00:00Z`) + Math.floor(((n - 1) * WEEK_MS) / LEADS)),
  s1: (n: number) => `click-${n}`,
};

interface Totals {
  rows: number;
  received: number;
  sold: number;
  revenueCents: number;
}

const add = (totals: Totals, row: Record<string, unknown>) => {
  totals.rows += 1;
  totals.received += Number(row.received);
  totals.sold += Number(row.sold);
  totals.revenueCents += Math.round(Number(row.revenue) * 100);
};

describe('reports over 200,000 leads, served under the heap cap of npm start', function () {
  this.timeout(180_000);
  const dir = tempDir('report-scale');
  const client = new Client(2);
  let server: ServerProcess | undefined;
  let apiKey = '';
  let seeded: Seeded;
  let peakRssKb = 0;
  let startRssKb = 0;
  const sample = () => (peakRssKb = Math.max(peakRssKb, server?.rssKb() ?? 0));

  before(async function () {
    expect(START_NODE_ARGS).to.include('--max-old-space-size=128');
    const store = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path, REBUILD_STORE_OPTIONS);
    try {
      const { id, secret } = newKeyMaterial();
      await changeKeys(store, (state) => issueKey(state, { role: 'analyst', name: 'ann', now: Date.now(), id, secret }));
      apiKey = formatKey(id, secret);
      seeded = await seedLeads(store, { leads: LEADS, shape });
      // Projected as `leadpost replay` would, into the builds the service serves: the reports, and
      // the lead views a report by s1 sums. The other read models are not read here: their builds
      // start empty at the head, with nothing to replay.
      const read = [leadsProjection, reportsProjection];
      await rebuildProjections(store, readModels, read, { build: versionBuild });
      const head = await store.headPosition();
      for (const projection of PROJECTIONS) {
        if (!read.includes(projection)) await readModels.commit(checkpointName(projection, versionBuild(projection)), head, []);
      }
    } finally {
      await readModels.close();
      await store.close();
    }
    const routingFile = writeRouting(dir.path, { buyers: [], buckets: [{ id: 'unsold', default: true }] });
    server = await ServerProcess.start({ dataDir: dir.path, routingFile, nodeArgs: START_NODE_ARGS });
    startRssKb = server.rssKb() ?? 0;
  });

  after(async function () {
    client.destroy();
    const result = await server?.stop();
    dir.remove();
    if (result) expect(result.stderr).not.to.match(/heap out of memory/i);
  });

  /** Every row of a report in JSON, `limit` a page, following next_cursor to the end. */
  async function pages(groupBy: string, limit: number, row: (row: Record<string, unknown>) => void): Promise<number> {
    let cursor: string | null = '';
    let count = 0;
    while (cursor !== null) {
      const path = `/functions/reports/summary?from=${FROM}&to=${TO}&group_by=${groupBy}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`;
      const reply = await client.request(server!.httpsPort, 'GET', path, { 'x-api-key': apiKey });
      expect(reply.status, reply.text.slice(0, 500)).to.equal(200);
      const items = reply.body.items as Array<Record<string, unknown>>;
      expect(items.length).to.be.at.most(limit);
      items.forEach(row);
      cursor = reply.body.next_cursor as string | null;
      if (++count % 50 === 0) sample();
    }
    sample();
    return count;
  }

  /** A report as CSV, read as it streams in: the header, then each row as cells. */
  function csv(groupBy: string, row: (cells: string[]) => void): Promise<{ header: string[]; headers: Record<string, unknown> }> {
    const agent = new Agent({ rejectUnauthorized: false });
    return new Promise((resolve, reject) => {
      const path = `/functions/reports/summary?from=${FROM}&to=${TO}&group_by=${groupBy}`;
      const req = request({ host: '127.0.0.1', port: server!.httpsPort, path, agent, headers: { 'x-api-key': apiKey, accept: 'text/csv' } }, (res) => {
        let header: string[] | undefined;
        let rest = '';
        let lines = 0;
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          rest += chunk;
          let end: number;
          while ((end = rest.indexOf('\r\n')) >= 0) {
            const cells = rest.slice(0, end).split(',');
            rest = rest.slice(end + 2);
            if (header) row(cells);
            else header = cells;
            if (++lines % 20_000 === 0) sample();
          }
        });
        res.on('end', () => {
          agent.destroy();
          expect(res.statusCode).to.equal(200);
          expect(rest, 'ends with a whole line').to.equal('');
          resolve({ header: header ?? [], headers: res.headers });
        });
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end();
    });
  }

  it('by s1: one row per lead, every s1 once in key order, paged to the end, adding up to what was seeded', async function () {
    const totals: Totals = { rows: 0, received: 0, sold: 0, revenueCents: 0 };
    const seen = new Set<string>();
    let previous = '';
    const requests = await pages('s1', 500, (row) => {
      const s1 = row.s1 as string;
      expect(s1 > previous, `${s1} after ${previous}`).to.equal(true);
      previous = s1;
      seen.add(s1);
      add(totals, row);
    });
    expect(requests).to.equal(LEADS / 500);
    expect(seen.size).to.equal(LEADS);
    expect(totals).to.deep.equal({ rows: LEADS, received: LEADS, sold: seeded.sold, revenueCents: seeded.revenueCents });
  });

  it('by day, sid, state and buyer: every group once over the seven days, adding up to what was seeded', async function () {
    const totals: Totals = { rows: 0, received: 0, sold: 0, revenueCents: 0 };
    const keys = new Set<string>();
    const days = new Set<string>();
    await pages('day,sid,state,buyer', 50, (row) => {
      keys.add(JSON.stringify([row.day, row.sid, row.state, row.buyer]));
      days.add(row.day as string);
      add(totals, row);
    });
    expect(keys.size).to.equal(totals.rows);
    expect([...days].sort()).to.deep.equal(['2026-10-01', '2026-10-02', '2026-10-03', '2026-10-04', '2026-10-05', '2026-10-06', '2026-10-07']);
    expect(totals.rows, 'several pages').to.be.above(300);
    expect({ ...totals, rows: 0 }).to.deep.equal({ rows: 0, received: LEADS, sold: seeded.sold, revenueCents: seeded.revenueCents });
  });

  it('as CSV: every row, streamed as it is read from the store', async function () {
    for (const groupBy of ['s1', 'day,sid,state,buyer']) {
      const dims = groupBy.split(',');
      const columns = [...dims, ...METRICS];
      const totals: Totals = { rows: 0, received: 0, sold: 0, revenueCents: 0 };
      const s1s = new Set<string>();
      const { header, headers } = await csv(groupBy, (cells) => {
        expect(cells).to.have.length(columns.length);
        const row = Object.fromEntries(columns.map((c, i) => [c, cells[i]]));
        if (groupBy === 's1') s1s.add(row.s1!);
        add(totals, row);
      });
      expect(header).to.deep.equal(columns);
      // Streamed: no length known up front.
      expect(headers['transfer-encoding']).to.equal('chunked');
      expect(headers['content-length']).to.equal(undefined);
      if (groupBy === 's1') expect({ rows: totals.rows, s1s: s1s.size }).to.deep.equal({ rows: LEADS, s1s: LEADS });
      expect({ ...totals, rows: 0 }, groupBy).to.deep.equal({ rows: 0, received: LEADS, sold: seeded.sold, revenueCents: seeded.revenueCents });
    }
  });

  it('the service is still up, and its memory stayed bounded', async function () {
    const health = await client.request(server!.httpsPort, 'GET', '/healthz');
    expect(health.status).to.equal(200);
    expect(server!.child.process.exitCode).to.equal(null);
    sample();
    const status = readStatus(server!.pid);
    console.log(`      service under ${START_NODE_ARGS.join(' ')}: RSS ${Math.round(startRssKb / 1024)} MiB when listening, ${Math.round(peakRssKb / 1024)} MiB at most while sampled, peak (VmHWM) ${Math.round(status.hwmKb / 1024)} MiB`);
    expect(status.hwmKb / 1024, 'peak resident memory, MiB').to.be.below(300);
  });
});

function readStatus(pid: number): { hwmKb: number } {
  const text = readFileSync(`/proc/${pid}/status`, 'utf8');
  return { hwmKb: Number(/^VmHWM:\s+(\d+)\s+kB/m.exec(text)?.[1] ?? 0) };
}

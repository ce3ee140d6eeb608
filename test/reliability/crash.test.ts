// Crash. `leadpost serve` runs in its own process on a data dir of its own, with
// keys made by the CLI, under a steady load of 20 posts in flight; it is killed with SIGKILL at a
// random moment, restarted on the same data dir, and killed again (5 times in `npm test`, 20 under
// LEADPOST_STRESS=1). After every restart:
//   - every lead answered 2xx (and every other answer that named a lead) is in the store with the
//     complete events of the outcome it was answered with, and readable through GET;
//   - no lead stream is partial, including those of requests cut off by the kill;
//   - an Idempotency-Key answered before the kill replays the very same answer;
// and at the end the read models (leads view, deliveries, report totals) converge to the exact
// counts the event store gives, however many projection batches the kills cut in half.
//
// Reproduce a run with CRASH_SEED=<seed printed by the run>.

import { expect } from 'chai';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { versionBuild } from '../../src/projections/index.js';
import { deliveriesProjection, leadsProjection } from '../../src/projections/projections.js';
import { collectionName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { envelopeProblems, mapLimit, Rng } from '../post-lead/helpers.js';
import { tempDir } from '../support/tmp.js';
import { Client, type Reply } from './support/client.js';
import { type LeadOutcome, leadNumber, leadStreams, readLead, totalsOf, totalsOfRows } from './support/leads.js';
import { createKey, type CreatedKey, ServerProcess, writeRouting } from './support/server-process.js';
import { scale, seedFrom } from './support/stress.js';

const KILLS = scale(5, 20);
const IN_FLIGHT = 20;
const CAP = scale(60, 400);
const CONVERGE_MS = 30_000;

const ROUTING = {
  currency: 'USD',
  buyers: [
    { id: 'ca-capped', price: 31.5, states: ['CA'], caps: [{ period: 'day', max: CAP }] },
    { id: 'ny-buyer', price: 12.25, states: ['NY'] },
  ],
  buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }],
};

interface Sent {
  readonly round: number;
  readonly kind: string;
  readonly body: Record<string, unknown>;
  readonly idempotencyKey?: string;
  reply?: Reply;
  error?: string;
}

describe('reliability: kill -9 under concurrent load, restart, nothing acknowledged is lost', function () {
  this.timeout(scale(180_000, 1_200_000));
  const seed = seedFrom('CRASH_SEED', 0x6b11_0009);
  const rng = new Rng(seed);
  // Made in before(), not here: a describe body also runs when a filter (-g) skips every test.
  let dir: ReturnType<typeof tempDir>;
  const sent: Sent[] = [];
  /** Problems found after each restart, by round. */
  const problems: string[] = [];
  const kills: Array<{ round: number; signal: string | null; afterMs: number; answered: number; cutOff: number }> = [];
  let routingFile: string;
  let supplier: CreatedKey;
  let analyst: CreatedKey;
  let server: ServerProcess | undefined;
  let counter = 0;

  /** The next request: mostly sellable leads, and every other outcome, some with an Idempotency-Key. */
  function nextRequest(round: number): Sent {
    counter += 1;
    const n = counter;
    const roll = rng.int(0, 99);
    let kind: string;
    let body: Record<string, unknown>;
    const accepted = sent.filter((s) => s.reply?.status === 201);
    if (roll < 50) [kind, body] = ['ca', leadNumber(n, { s1: `r${round}` }, 'crash')];
    else if (roll < 62) [kind, body] = ['tx', leadNumber(n, { accident_state: 'TX', zip: '75001' }, 'crash')];
    else if (roll < 74) [kind, body] = ['ny', leadNumber(n, { accident_state: 'NY', zip: '10001' }, 'crash')];
    else if (roll < 82) [kind, body] = ['invalid', leadNumber(n, { zip: 'not-a-zip' }, 'crash')];
    else if (roll < 88 && accepted.length > 0) {
      // The e-mail of a lead accepted earlier, maybe before a kill: a duplicate however the server restarted.
      const earlier = rng.pick(accepted).body;
      [kind, body] = ['duplicate', leadNumber(n, { email: earlier.email }, 'crash')];
    } else if (roll < 93) [kind, body] = ['toll-free', leadNumber(n, { mobile: `+1888467${1000 + (n % 9000)}` }, 'crash')];
    else [kind, body] = ['test', leadNumber(n, { test: true }, 'crash')];
    const idempotencyKey = rng.chance(0.25) ? `crash-${seed}-${n}` : undefined;
    return { round, kind, body, ...(idempotencyKey ? { idempotencyKey } : {}) };
  }

  /** Keeps IN_FLIGHT posts going until `stop()`; the kill cuts off whatever is in flight. */
  function drive(port: number, round: number) {
    const client = new Client(IN_FLIGHT);
    let stopped = false;
    const worker = async (): Promise<void> => {
      while (!stopped) {
        const request = nextRequest(round);
        sent.push(request);
        const headers: Record<string, string> = { 'x-api-key': supplier.key };
        if (request.idempotencyKey) headers['idempotency-key'] = request.idempotencyKey;
        try {
          request.reply = await client.post(port, request.body, headers);
        } catch (error) {
          request.error = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
        }
      }
    };
    const workers = Promise.all(Array.from({ length: IN_FLIGHT }, worker));
    return {
      /** No new posts from here on; those in flight stay in flight. */
      halt: () => {
        stopped = true;
      },
      finished: async () => {
        await workers;
        client.destroy();
      },
    };
  }

  /** Everything that must hold after a restart, for every answer so far; returns the outcomes in the store. */
  async function verify(port: number, round: number): Promise<Map<number, LeadOutcome>> {
    const store = await EmbeddedEventStore.open(dir.path);
    const outcomes = new Map<number, LeadOutcome>();
    try {
      for (const [leadId, events] of await leadStreams(store)) {
        const read = readLead(leadId, events);
        problems.push(...read.problems.map((p) => `after kill ${round}: ${p}`));
        if (read.outcome) outcomes.set(leadId, read.outcome);
      }
    } finally {
      await store.close();
    }
    for (const s of sent) {
      if (!s.reply) continue;
      const envelope = envelopeProblems(s.reply);
      if (envelope.length > 0) problems.push(`round ${s.round} ${s.kind}: ${envelope.join('; ')}`);
      const leadId = s.reply.body.lead_id;
      if (typeof leadId !== 'number') continue;
      const outcome = outcomes.get(leadId);
      if (!outcome) {
        problems.push(`after kill ${round}: lead ${leadId} answered ${s.reply.status} ${String(s.reply.body.code)} in round ${s.round} is not in the store`);
        continue;
      }
      if (outcome.code !== s.reply.body.code || outcome.traceId !== s.reply.body.trace_id || outcome.revenue !== s.reply.body.revenue) {
        problems.push(`after kill ${round}: lead ${leadId} answered ${String(s.reply.body.code)} ${String(s.reply.body.revenue)} but the store says ${outcome.code} ${outcome.revenue}`);
      }
    }
    // Readable through the API, and an Idempotency-Key replays the very answer given before the kill.
    const client = new Client(16);
    try {
      const answered = sent.filter((s) => s.round === round - 1 && s.reply && s.reply.status >= 200 && s.reply.status < 300);
      await mapLimit(answered, 16, async (s) => {
        const leadId = s.reply!.body.lead_id as number;
        const view = await client.request(port, 'GET', `/functions/leads/${leadId}`, { 'x-api-key': supplier.key });
        const lead = view.body.lead as { code?: unknown } | undefined;
        if (view.status !== 200 || lead?.code !== s.reply!.body.code) problems.push(`after kill ${round}: GET lead ${leadId} → ${view.status} ${view.text.slice(0, 200)}`);
        if (s.idempotencyKey) {
          const replay = await client.post(port, s.body, { 'x-api-key': supplier.key, 'idempotency-key': s.idempotencyKey });
          if (replay.status !== s.reply!.status || replay.headers['idempotency-replayed'] !== 'true' || replay.text !== s.reply!.text) {
            problems.push(`after kill ${round}: replay of ${s.idempotencyKey} → ${replay.status} ${replay.text.slice(0, 200)}, was ${s.reply!.status} ${s.reply!.text.slice(0, 200)}`);
          }
        }
      });
    } finally {
      client.destroy();
    }
    return outcomes;
  }

  let finalOutcomes = new Map<number, LeadOutcome>();

  before(async function () {
    dir = tempDir('crash');
    routingFile = writeRouting(dir.path, ROUTING);
    [supplier, analyst] = await Promise.all([createKey(dir.path, 'supplier', 'sup-crash'), createKey(dir.path, 'analyst', 'ann')]);
    console.log(`      crash seed ${seed} (CRASH_SEED=${seed} to reproduce), ${KILLS} kills, ${IN_FLIGHT} posts in flight`);
    // A kill can land when every post in flight has just been answered (the server is fast and the
    // answers wait in this process's sockets); such a round cuts nothing off, so it does not count,
    // and the rounds go on until KILLS kills have cut posts off.
    for (let round = 0; ; round++) {
      server = await ServerProcess.start({ dataDir: dir.path, routingFile, env: { LEAD_ID_BLOCK_SIZE: '10' } });
      if (round > 0) finalOutcomes = await verify(server.httpsPort, round);
      if (kills.filter((k) => k.cutOff > 0).length === KILLS || round === 2 * KILLS) break;
      const load = drive(server.httpsPort, round);
      const afterMs = rng.int(300, 1500);
      await new Promise((resolve) => setTimeout(resolve, afterMs));
      load.halt();
      const result = await server.kill();
      await load.finished();
      const thisRound = sent.filter((s) => s.round === round);
      kills.push({ round, signal: result.signal, afterMs, answered: thisRound.filter((s) => s.reply).length, cutOff: thisRound.filter((s) => s.error).length });
    }
  });

  after(async function () {
    await server?.stop();
    dir?.remove();
  });

  it(`was killed with SIGKILL ${KILLS} times under load, with posts in flight each time, and restarted after each`, function () {
    expect(kills.map((k) => k.signal)).to.deep.equal(Array(kills.length).fill('SIGKILL'));
    // KILLS kills landed with requests in flight (cut off), after some were answered.
    expect(kills.filter((k) => k.cutOff > 0), JSON.stringify(kills)).to.have.length(KILLS);
    expect(kills.reduce((n, k) => n + k.answered, 0)).to.be.greaterThan(KILLS * IN_FLIGHT);
  });

  it('after every restart: every answered lead is in the store with the events of its answer, readable, replayable; no stream is partial', function () {
    expect(problems.slice(0, 20), `${problems.length} problems`).to.deep.equal([]);
    const answered2xx = sent.filter((s) => s.reply && s.reply.status >= 200 && s.reply.status < 300);
    const lost = answered2xx.filter((s) => !finalOutcomes.has(s.reply!.body.lead_id as number));
    const cutOff = sent.filter((s) => s.error);
    // Streams no answer named: requests the kill cut off after their append, recorded whole.
    const named = new Set(sent.map((s) => s.reply?.body.lead_id).filter((id) => typeof id === 'number'));
    const recordedCutOff = [...finalOutcomes.keys()].filter((id) => !named.has(id));
    console.log(
      `      figures: ${KILLS} kills survived; ${sent.length} posts, ${answered2xx.length} answered 2xx, ${sent.length - cutOff.length} answered in all, ` +
        `${cutOff.length} cut off by a kill (${recordedCutOff.length} of them recorded whole before it); ${finalOutcomes.size} lead streams, none partial; leads lost: ${lost.length}`,
    );
    expect(lost.map((s) => s.reply!.body.lead_id)).to.deep.equal([]);
    expect(answered2xx.length).to.be.greaterThan(0);
  });

  it('the cap was never exceeded across the kills', function () {
    const sold = [...finalOutcomes.values()].filter((o) => o.code === 'SOLD' && o.buyer === 'ca-capped' && !o.test);
    expect(sold.length).to.be.at.most(CAP);
  });

  it('after the last restart the read models converge to the exact counts in the event store', async function () {
    const expectedAll = totalsOf(finalOutcomes.values());
    const expectedReal = totalsOf([...finalOutcomes.values()].filter((o) => !o.test));
    const expectedIds = [...finalOutcomes.keys()].sort((a, b) => a - b);
    const expectedDeliveries = [...finalOutcomes.values()].filter((o) => !o.test && (o.code === 'SOLD' || o.code === 'UNSOLD')).map((o) => o.leadId).sort((a, b) => a - b);
    const client = new Client(4);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const started = Date.now();
    let seen: Record<string, unknown> = {};
    try {
      for (;;) {
        const summary = async (test: string) => {
          const reply = await client.request(server!.httpsPort, 'GET', `/functions/reports/summary?group_by=supplier&test=${test}`, { 'x-api-key': analyst.key });
          return totalsOfRows((reply.body.items ?? []) as Array<Record<string, unknown>>);
        };
        const leads = await readModels.find(collectionName('leads', versionBuild(leadsProjection)), { sort: { field: '_id', direction: 'asc' }, limit: 10_000_000 });
        const deliveries = await readModels.find(collectionName('deliveries', versionBuild(deliveriesProjection)), { sort: { field: '_id', direction: 'asc' }, limit: 10_000_000 });
        seen = {
          reportAll: await summary('include'),
          reportReal: await summary('exclude'),
          leadIds: leads.map((d) => d.lead_id as number).sort((a, b) => a - b),
          leadCodes: leads.filter((d) => d.code !== finalOutcomes.get(d.lead_id as number)?.code).map((d) => `${String(d.lead_id)}:${String(d.code)}`),
          deliveryIds: deliveries.map((d) => d.lead_id as number).sort((a, b) => a - b),
        };
        const want = { reportAll: expectedAll, reportReal: expectedReal, leadIds: expectedIds, leadCodes: [], deliveryIds: expectedDeliveries };
        if (JSON.stringify(seen) === JSON.stringify(want) || Date.now() - started > CONVERGE_MS) {
          expect(seen).to.deep.equal(want);
          break;
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    } finally {
      client.destroy();
      await readModels.close();
    }
    console.log(`      read models converged: ${expectedIds.length} lead views, ${expectedDeliveries.length} deliveries, report ${JSON.stringify(expectedAll)}`);
  });
});

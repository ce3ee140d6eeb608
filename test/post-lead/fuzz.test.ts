// Seeded fuzzing of POST /functions/leads through the real HTTPS server: malformed and hostile
// bodies and headers, sent 16 at a time. Every response must be the decision envelope, complete and
// consistent, with the outcome an oracle expects for what was sent; afterwards the lead streams in
// the store must match the lead ids answered, nothing may be polluted, and a valid lead still sells.
//
// Reproduce a run with FUZZ_SEED=<seed printed by the run>.

import { expect } from 'chai';
import type { RecordedEvent } from '../../src/event-store/index.js';
import { TestService, type Reply } from '../support/service.js';
import { Client } from '../reliability/support/client.js';
import { type Case, Fuzzer, oracle, POLLUTION_NAMES, sendCase } from '../reliability/support/fuzz-cases.js';
import { envelopeProblems, mapLimit, Rng, uniqueLead } from './helpers.js';

const RANDOM_CASES = 2000;
const CONCURRENCY = 16;
const DEFAULT_SEED = 0x1eadb0a7;

interface Outcome {
  readonly index: number;
  readonly kase: Case;
  readonly reply?: Reply;
  /** Answers after the first on the same connection. */
  readonly more: Reply[];
  readonly error?: string;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}$/;

// ---------------------------------------------------------------------------------------------

function seedFromEnv(): number {
  const raw = process.env.FUZZ_SEED;
  if (raw === undefined || raw === '') return DEFAULT_SEED;
  const seed = Number(raw);
  if (!Number.isSafeInteger(seed)) throw new Error(`FUZZ_SEED must be an integer, not ${raw}`);
  return seed >>> 0;
}

function prototypeSnapshot(): Record<string, string[]> {
  return Object.fromEntries(
    [Object.prototype, Array.prototype, Function.prototype, String.prototype, Object, Promise.prototype].map((proto, i) => [
      ['Object.prototype', 'Array.prototype', 'Function.prototype', 'String.prototype', 'Object', 'Promise.prototype'][i]!,
      Reflect.ownKeys(proto).map(String).sort(),
    ]),
  );
}

describe('post-lead: fuzzing the real HTTPS server with hostile requests', function () {
  this.timeout(120_000);
  const seed = seedFromEnv();
  let svc: TestService;
  let key: string;
  let outcomes: Outcome[] = [];
  let snapshot: Record<string, string[]>;

  before(async () => {
    snapshot = prototypeSnapshot();
    svc = await TestService.start();
    key = await svc.key();
    const buyerKey = await svc.key('buyer', 'acme-law');
    const rng = new Rng(seed);
    const fuzzer = new Fuzzer(rng, key, buyerKey);
    const cases = [...fuzzer.fixed(), ...Array.from({ length: RANDOM_CASES }, () => fuzzer.next())];
    console.log(`      fuzz seed ${seed} (FUZZ_SEED=${seed} to reproduce), ${cases.length} cases`);
    const started = Date.now();
    const client = new Client(CONCURRENCY);
    try {
      outcomes = await mapLimit(cases, CONCURRENCY, async (kase, index): Promise<Outcome> => ({ index, kase, ...(await sendCase(svc.port, client, kase)) }));
    } finally {
      client.destroy();
    }
    const counts: Record<string, number> = {};
    for (const o of outcomes) {
      const code = o.reply ? String(o.reply.body.code ?? `HTTP ${o.reply.status}`) : 'NO_RESPONSE';
      counts[code] = (counts[code] ?? 0) + 1;
    }
    const line = Object.entries(counts).sort(([a], [b]) => a.localeCompare(b)).map(([code, n]) => `${code}=${n}`).join(' ');
    console.log(`      fuzz summary: ${outcomes.length} requests in ${Date.now() - started} ms: ${line}`);
  });

  after(async () => {
    await svc?.stop();
  });

  const describeCase = (o: Outcome) => {
    const { body } = o.kase;
    let members = '';
    try {
      const parsed: unknown = JSON.parse(body.toString());
      if (typeof parsed === 'object' && parsed !== null) members = ` members ${JSON.stringify(Object.keys(parsed)).slice(0, 300)}`;
    } catch {
      // Not JSON: the start of the body says enough.
    }
    const start = Buffer.isBuffer(body) ? `<${body.length} bytes>` : body.slice(0, 120);
    return `#${o.index} ${o.kase.kind} (FUZZ_SEED=${seed})${members} body ${JSON.stringify(start)}`;
  };

  it(`sends at least 1,000 cases and gets an answer to every one`, () => {
    expect(outcomes.length).to.be.at.least(1000);
    const failed = outcomes.filter((o) => o.error).map((o) => `${describeCase(o)}: ${o.error}`);
    expect(failed.slice(0, 10), `${failed.length} requests got no response`).to.deep.equal([]);
  });

  it('every response is a complete, consistent envelope (< 500, JSON, 11 fields, trace id = X-Trace-Id)', () => {
    const problems = outcomes.flatMap((o) => [...(o.reply ? [o.reply] : []), ...o.more].flatMap((reply) => envelopeProblems(reply).map((p) => `${describeCase(o)}: ${p}`)));
    expect(problems.slice(0, 10), `${problems.length} problems`).to.deep.equal([]);
  });

  it('every outcome is the one the contract gives for what was sent', () => {
    const wrong = outcomes
      .filter((o) => o.reply)
      .filter((o) => !oracle(o.kase).includes(String(o.reply!.body.code)))
      .map((o) => `${describeCase(o)}: got ${String(o.reply!.body.code)} (HTTP ${o.reply!.status}), expected ${oracle(o.kase).join('|')}`);
    // Pipelined requests: each later answer is the one expected for its request, and there are no others.
    for (const o of outcomes.filter((x) => x.reply)) {
      const expected = (o.kase.then ?? []).map((codes) => codes.join('|'));
      const got = o.more.map((reply, i) => ((o.kase.then?.[i] ?? []).includes(String(reply.body.code)) ? expected[i] : `${String(reply.body.code)} (HTTP ${reply.status})`));
      if (JSON.stringify(got) !== JSON.stringify(expected)) wrong.push(`${describeCase(o)}: later answers ${got.join(', ')}, expected ${expected.join(', ')}`);
    }
    expect(wrong.slice(0, 10), `${wrong.length} unexpected outcomes`).to.deep.equal([]);
  });

  it('a valid traceparent becomes the trace id; an invalid one is replaced', () => {
    const traced = outcomes.filter((o) => o.reply && o.kase.headers.traceparent !== undefined);
    expect(traced.length).to.be.greaterThan(0);
    for (const o of traced) {
      const match = TRACEPARENT.exec(o.kase.headers.traceparent as string);
      const valid = match && !/^0+$/.test(match[1]!) && !/^0+$/.test(match[2]!);
      if (valid) expect(o.reply!.body.trace_id, describeCase(o)).to.equal(match[1]);
      else expect(o.kase.headers.traceparent, describeCase(o)).not.to.include(String(o.reply!.body.trace_id));
    }
  });

  it('the lead streams in the store are exactly the leads answered, each with the outcome answered', async () => {
    const answered = new Map<number, string>();
    for (const o of outcomes) {
      for (const reply of [...(o.reply ? [o.reply] : []), ...o.more]) {
        if (reply.body.lead_id !== null && reply.body.lead_id !== undefined) answered.set(reply.body.lead_id as number, String(reply.body.code));
      }
    }
    const streams = new Map<string, RecordedEvent[]>();
    for (const event of await svc.service.store.readAll()) {
      if (!/^lead-\d+$/.test(event.streamId)) continue;
      streams.set(event.streamId, [...(streams.get(event.streamId) ?? []), event]);
    }
    const expected = new Set([...answered.keys()].map((id) => `lead-${id}`));
    const byTrace = new Map(outcomes.filter((o) => o.reply).map((o) => [String(o.reply!.body.trace_id), o]));
    const unanswered = [...streams].filter(([id]) => !expected.has(id)).map(([id, events]) => {
      const o = byTrace.get(String(events[0]!.metadata.trace_id));
      return `${id} (${events.map((e) => e.type).join(', ')}) answered ${o ? `${String(o.reply!.body.code)} with lead_id ${String(o.reply!.body.lead_id)}: ${describeCase(o)}` : 'by no request seen'}`;
    });
    const missing = [...expected].filter((id) => !streams.has(id));
    expect({ unanswered: unanswered.slice(0, 10), missing: missing.slice(0, 10) }, 'lead streams vs lead ids answered').to.deep.equal({ unanswered: [], missing: [] });
    for (const [leadId, code] of answered) {
      const events = streams.get(`lead-${leadId}`)!;
      expect(events[0]!.type, `lead ${leadId}`).to.equal('LeadReceived');
      const last = events[events.length - 1]!;
      if (code === 'SOLD') expect(last.type, `lead ${leadId}`).to.equal('LeadSold');
      else if (code === 'UNSOLD') expect(last.type, `lead ${leadId}`).to.equal('LeadRouted');
      else expect({ type: last.type, code: (last.data as { code?: string }).code }, `lead ${leadId}`).to.deep.equal({ type: 'LeadRejected', code });
    }
  });

  it('nothing was polluted: Object.prototype and friends have the keys they had before', () => {
    expect(prototypeSnapshot()).to.deep.equal(snapshot);
    for (const name of POLLUTION_NAMES) {
      expect(({} as Record<string, unknown>)[name], name).to.equal(undefined);
      expect(([] as unknown as Record<string, unknown>)[name], name).to.equal(undefined);
    }
  });

  it('afterwards the server still answers a valid lead 201', async () => {
    const reply = await svc.post(uniqueLead(), { 'x-api-key': key });
    expect(reply.status, reply.text).to.equal(201);
    expect(envelopeProblems(reply)).to.deep.equal([]);
    expect(reply.body.code).to.equal('SOLD');
  });
});

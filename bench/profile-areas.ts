import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

// Where a post's CPU goes on the server's main thread, from the .cpuprofile files that
// `BENCH_SERVER_NODE_ARGS="--cpu-prof --cpu-prof-dir=DIR"` leaves (one per thread; the main
// thread's have thread id 0 in their name). Each sample goes to one area: first by what it runs
// under (start-up, the projections, the delivery worker), else by the innermost frame of the
// service's own code on its stack, else by the libraries and Node internals it is in. GC and V8's
// own work stay apart: they are not any one area's, though allocations drive them.

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
}
interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}
interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

type Frame = { readonly url: string; readonly name: string };
type Rule = readonly [area: string, matches: (frame: Frame) => boolean];
const inFile = (pattern: RegExp) => (frame: Frame) => pattern.test(frame.url);

/** Checked anywhere on the stack, in order: what the sample runs under. */
const CONTEXTS: readonly Rule[] = [
  ['start-up (modules, TLS material, schemas)', (f) => /node:internal\/modules\/|node_modules\/(selfsigned|@peculiar|asn1js|tsyringe)\/|node_modules\/ajv\/dist\/core/.test(f.url)],
  ['projections: reads, folds, read-model writes', inFile(/\/src\/(projections|read-models)\/|\/subscription\.js$/)],
  ['delivery worker, key-ring polling', (f) => /\/src\/delivery\/|\/key-stream\.js$/.test(f.url)],
];
/** Checked from the innermost frame outwards: the service's own code. */
const OWN: readonly Rule[] = [
  ['event store: appends, writer messages, answers', inFile(/\/event-store\/|\/events\/codec\/|counting-event-store\.js$/)],
  ['validation (ajv, mobile number, normalising)', inFile(/\/src\/leads\//)],
  ['phone, e-mail and consent checks', inFile(/\/src\/enrichment\//)],
  ['contact claims', inFile(/\/commands\/contacts\.js$/)],
  ['caps', inFile(/\/commands\/caps\.js$/)],
  ['routing', (f) => /\/src\/routing\//.test(f.url) || f.name === 'route'],
  ['post-lead command (decider, handler, ids, outcome)', inFile(/\/src\/commands\//)],
  ['body read and JSON parse', inFile(/\/http\/body\.js$/)],
  ['authentication (key parse and hash)', inFile(/\/http\/auth\.js$|\/keys\/key-ring\.js$/)],
  ['metrics', inFile(/\/ops\/|node_modules\/prom-client\//)],
  ['shell: trace id, headers, envelope, access log, route', inFile(/\/src\/http\/|node_modules\/pino/)],
];
/** Last: the frameworks and Node, which the bare endpoint runs too. */
const UNDER: readonly Rule[] = [
  ['Koa, router, compose', inFile(/node_modules\/(koa|@koa|koa-compose|delegates|on-finished|ee-first|statuses|mime-types|vary|type-is|accepts|http-errors)\//)],
  ['Node HTTP, TLS, streams', inFile(/^node:/)],
];

function areaOf(stack: readonly Frame[]): string {
  const leaf = stack[0]!.name;
  if (leaf === '(garbage collector)') return 'GC (main thread)';
  if (leaf === '(program)') return 'V8 outside JavaScript';
  for (const [area, matches] of CONTEXTS) if (stack.some(matches)) return area;
  for (const rules of [OWN, UNDER]) {
    for (const frame of stack) for (const [area, matches] of rules) if (matches(frame)) return area;
  }
  return 'other (natives, microtasks, timers)';
}

/** Busy milliseconds per area over the main-thread profiles in `dir`, start-up apart. */
export function profileAreas(dir: string): { busyMs: number; startupMs: number; areas: Array<{ area: string; share: string }> } {
  const totals = new Map<string, number>();
  for (const file of readdirSync(dir).filter((name) => /\.\d+\.0\.\d+\.cpuprofile$/.test(name))) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
    const parent = new Map<number, number>();
    for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
    const areas = new Map<number, string>();
    profile.samples.forEach((id, index) => {
      if (nodes.get(id)!.callFrame.functionName === '(idle)') return;
      let area = areas.get(id);
      if (area === undefined) {
        const stack: Frame[] = [];
        for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
          const { url, functionName } = nodes.get(at)!.callFrame;
          stack.push({ url, name: functionName });
        }
        areas.set(id, (area = areaOf(stack)));
      }
      totals.set(area, (totals.get(area) ?? 0) + (profile.timeDeltas[index] ?? 0) / 1000);
    });
  }
  const startupMs = [...totals].filter(([area]) => area.startsWith('start-up')).reduce((sum, [, ms]) => sum + ms, 0);
  const busyMs = [...totals.values()].reduce((sum, ms) => sum + ms, 0) - startupMs;
  const areas = [...totals]
    .filter(([area]) => !area.startsWith('start-up'))
    .sort((a, b) => b[1] - a[1])
    .map(([area, ms]) => ({ area, share: `${((100 * ms) / busyMs).toFixed(1)}%` }));
  return { busyMs: Math.round(busyMs), startupMs: Math.round(startupMs), areas };
}

import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LoadCounter, LoadResult, startBenchService } from './post-lead.js';
import { percentile } from './stats.js';

// Two builds of the service compared under the post-lead load, side by side. Run one after the
// other, two builds cannot be told apart on this machine: its speed drifts by up to 2× within
// minutes. So every service runs at once (each build as served, and as the API process of a
// split with its projector beside it), and the load goes to each in turn, a short slice at a
// time, in an order that reverses every round; each slice is compared with the first build's
// slice of the same round, so that a busy spell of the machine falls on all of them.

/** What `startBenchService` and the load helpers are, in a build's dist (bench/post-lead.js). */
type PostLeadModule = Pick<typeof import('./post-lead.js'), 'startBenchService' | 'load' | 'loadResult' | 'sellableLead'>;

export interface SideBySideRow {
  readonly case: string;
  /** Server CPU per post, all threads and the main thread, µs: means of the slices. */
  readonly cpuUs: number;
  readonly mainThreadCpuUs: number;
  readonly requestsPerSecond: number;
  /** The median of the slices' p99 latencies, ms (one slice's p99 rests on its slowest 1%). */
  readonly p99Ms: number;
  /** Means of each slice's ratio to the first build's slice of the same round (1 for the first build). */
  readonly cpuRatio: string;
  readonly mainThreadRatio: string;
  readonly requestsRatio: string;
  readonly p99Ratio: string;
}

interface Running {
  readonly name: string;
  readonly build: PostLeadModule;
  readonly service: Awaited<ReturnType<typeof startBenchService>>;
  readonly counter: LoadCounter;
  readonly slices: LoadResult[];
}

/**
 * `builds`: a name and the path of each build's `dist` folder.
 * Both cases of each build run: all roles in one process, and `--roles api` beside `--roles projector,delivery`.
 */
export async function benchPostLeadSideBySide(builds: ReadonlyArray<{ name: string; dist: string }>, slices: number, sliceSeconds: number): Promise<SideBySideRow[]> {
  const running: Running[] = [];
  try {
    for (const { name, dist } of builds) {
      const build = (await import(pathToFileURL(resolve(dist, 'bench/post-lead.js')).href)) as PostLeadModule;
      running.push({ name: `${name}, all roles`, build, service: await build.startBenchService(), counter: { n: 0 }, slices: [] });
      const api = await build.startBenchService({ roles: 'api' });
      running.push({ name: `${name}, api process`, build, service: api, counter: { n: 0 }, slices: [] });
      await api.sibling('projector,delivery');
    }
    const slice = (run: Running, seconds: number, warmup: number) =>
      run.build.load(run.service.url, { 'x-api-key': run.service.apiKey }, run.build.sellableLead, seconds, warmup, run.counter, run.service.pid);
    for (const run of running) await slice(run, 1, 3);
    for (let round = 0; round < slices; round++) {
      for (const run of round % 2 === 0 ? running : [...running].reverse()) {
        run.slices.push(run.build.loadResult(run.name, await slice(run, sliceSeconds, 0.5), run.service.pid, []));
      }
    }
  } finally {
    for (const run of running) await run.service.stop();
  }
  const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const cases = running.length / builds.length;
  return running.map((run, index) => {
    const base = running[index % cases]!.slices;
    const ratio = (field: 'serverCpuUsPerRequest' | 'mainThreadCpuUs' | 'requestsPerSecond' | 'p99Ms') => mean(run.slices.map((r, i) => r[field] / base[i]![field])).toFixed(3);
    return {
      case: run.name,
      cpuUs: Math.round(mean(run.slices.map((r) => r.serverCpuUsPerRequest))),
      mainThreadCpuUs: Math.round(mean(run.slices.map((r) => r.mainThreadCpuUs))),
      requestsPerSecond: Math.round(mean(run.slices.map((r) => r.requestsPerSecond))),
      p99Ms: percentile(run.slices.map((r) => r.p99Ms), 50),
      cpuRatio: ratio('serverCpuUsPerRequest'),
      mainThreadRatio: ratio('mainThreadCpuUs'),
      requestsRatio: ratio('requestsPerSecond'),
      p99Ratio: ratio('p99Ms'),
    };
  });
}

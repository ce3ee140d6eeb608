import autocannon from 'autocannon';
import { readFileSync, writeFileSync } from 'node:fs';
import { type AddressInfo, connect, createServer } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { type Role, formatKey, issueKey, newKeyMaterial } from '../src/keys/api-keys.js';
import { changeKeys } from '../src/keys/key-stream.js';
import { START_NODE_ARGS, runChild } from '../test/support/child.js';
import { CERT_URL } from '../test/support/service.js';
import { tempDir } from '../test/support/tmp.js';
import { EmbeddedReadModelStore } from '../src/read-models/embedded.js';
import { versionBuild } from '../src/projections/index.js';
import { leadsProjection } from '../src/projections/projections.js';
import { collectionName } from '../src/projections/runner.js';
import { percentile } from './stats.js';

export const BIN = fileURLToPath(new URL('../../bin/leadpost.js', import.meta.url));

export interface LoadResult {
  readonly case: string;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly non2xx: number;
  readonly errors: number;
  readonly serverRssMb: number;
  /** The server process's CPU time (all threads) per answered request: what one request costs it. */
  readonly serverCpuUsPerRequest: number;
  /** The part of it on the main thread (the rest is the event store's writer thread, and libuv's). */
  readonly mainThreadCpuUs: number;
  /** From a lead's 201 to its view in the read model, for every 20th lead. */
  readonly lagP50Ms: number;
  readonly lagP99Ms: number;
  readonly lagSamples: number;
}

/**
 * Projection lag as a reader sees it: every 20th accepted lead is looked for in the lead-view
 * read model (a second connection to the server's read-model file) until it appears.
 */
function projectionLag(dataDir: string) {
  const readModels = EmbeddedReadModelStore.open(dataDir);
  const waiting = new Map<string, number>();
  const lags: number[] = [];
  let accepted = 0;
  const timer = setInterval(() => {
    for (const [id, since] of waiting) {
      void readModels.get(collectionName('leads', versionBuild(leadsProjection)), id).then((doc) => {
        if (doc && waiting.delete(id)) lags.push(performance.now() - since);
      });
    }
  }, 5);
  return {
    sample(body: string): void {
      if (accepted++ % 20 !== 0) return;
      const id = /"lead_id":(\d+)/.exec(body)?.[1];
      if (id) waiting.set(id, performance.now());
    },
    async stop(): Promise<number[]> {
      const deadline = Date.now() + 10_000;
      while (waiting.size > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      clearInterval(timer);
      await readModels.close();
      return lags;
    },
  };
}

/** Exchanges 200-899 but the N11 service codes (211, 311, …), which are never valid numbers. */
const EXCHANGES = Array.from({ length: 700 }, (_, i) => 200 + i).filter((exchange) => exchange % 100 !== 11);
const AREAS = ['213', '310', '415', '212', '312', '617', '305', '206'];

/** A unique, valid, sellable lead: its mobile and e-mail never repeat for n below 49 million. */
export function sellableLead(n: number): string {
  const line = String(1000 + (n % 9000));
  const block = Math.floor(n / 9000);
  const exchange = String(EXCHANGES[block % EXCHANGES.length]);
  const area = AREAS[Math.floor(block / EXCHANGES.length) % AREAS.length];
  return JSON.stringify({
    first_name: 'Ada',
    last_name: 'Lovelace',
    email: `ada.${n}@example.com`,
    mobile: `+1${area}${exchange}${line}`,
    zip: '90210',
    accident_state: 'CA',
    certificate_url: CERT_URL,
    sid: 'bench',
    s1: `click-${n}`,
  });
}

/** A port nothing listens on now. The access log stays off (LOG_LEVEL=warn), so the port is chosen here. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

async function listening(port: number): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => (socket.end(), resolve(true)));
      socket.on('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on port ${port}`);
}

export function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Math.round(Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
}

export interface LoadCounter {
  n: number;
  sample?: string;
  /** Called with each 2xx answer's body while measuring (not during warm-up). */
  onAccepted?: (body: string) => void;
  measuring?: boolean;
}

/** CPU seconds (user + system) a process has used so far: every thread, and its main thread alone. */
export function cpuSeconds(pid: number): { all: number; main: number } {
  // Fields 14 and 15 of /proc/PID/stat, after the command name in parentheses; in clock ticks (100/s).
  const ticks = (file: string) => {
    const fields = readFileSync(file, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  };
  return { all: ticks(`/proc/${pid}/stat`), main: ticks(`/proc/${pid}/task/${pid}/stat`) };
}

/** POSTs from 50 keep-alive connections over HTTPS, for a duration or a number of requests; body n for the n-th. */
export function posts(
  url: string,
  headers: Record<string, string>,
  body: (n: number) => string,
  counter: LoadCounter,
  limit: { readonly duration: number } | { readonly amount: number },
) {
  return autocannon({
    url,
    method: 'POST',
    connections: 50,
    ...limit,
    headers: { 'content-type': 'application/json', ...headers },
    requests: [
      {
        setupRequest: (request) => ({ ...request, body: body(counter.n++) }),
        onResponse: (status, responseBody) => {
          if (status >= 300 && counter.sample === undefined) counter.sample = `${status} ${responseBody}`;
          if (status < 300 && counter.measuring) counter.onAccepted?.(responseBody);
        },
      },
    ],
  });
}

/**
 * `posts` for `seconds` after a warm-up, with the server's CPU time over the measured part, and
 * that of `otherPids` (processes working beside it, e.g. its projector) over the same part.
 */
export async function load(url: string, headers: Record<string, string>, body: (n: number) => string, seconds: number, warmup: number, counter: LoadCounter, serverPid: number, otherPids: number[] = []) {
  await posts(url, headers, body, counter, { duration: warmup });
  counter.measuring = true;
  const cpuBefore = cpuSeconds(serverPid);
  const othersBefore = otherPids.map((pid) => cpuSeconds(pid).all);
  const result = await posts(url, headers, body, counter, { duration: seconds });
  const cpuAfter = cpuSeconds(serverPid);
  const otherCpuSeconds = otherPids.map((pid, i) => cpuSeconds(pid).all - othersBefore[i]!);
  return { result, serverCpuSeconds: cpuAfter.all - cpuBefore.all, mainThreadCpuSeconds: cpuAfter.main - cpuBefore.main, otherCpuSeconds };
}

export function loadResult(
  name: string,
  { result, serverCpuSeconds, mainThreadCpuSeconds }: { result: autocannon.Result; serverCpuSeconds: number; mainThreadCpuSeconds: number; otherCpuSeconds?: number[] },
  serverPid: number,
  lags: number[],
): LoadResult {
  const perRequest = (cpuSeconds: number) => Math.round((cpuSeconds * 1e6) / Math.max(1, result.requests.total));
  return {
    case: name,
    requestsPerSecond: Math.round(result.requests.average),
    p50Ms: result.latency.p50,
    p99Ms: result.latency.p99,
    non2xx: result.non2xx,
    errors: result.errors,
    serverRssMb: rssMb(serverPid),
    serverCpuUsPerRequest: perRequest(serverCpuSeconds),
    mainThreadCpuUs: perRequest(mainThreadCpuSeconds),
    lagP50Ms: Math.round(percentile(lags, 50)),
    lagP99Ms: Math.round(percentile(lags, 99)),
    lagSamples: lags.length,
  };
}

const BARE = fileURLToPath(new URL('./bare-koa.js', import.meta.url));

/**
 * The limit: a bare Koa HTTPS endpoint parsing the same body, under the same load. `durable`: the
 * same endpoint also making a sold post's durable appends before answering (bare-koa.ts).
 */
/** `durable`: a sold post's appends (true), or the same events in one append ('merged'); see bare-koa.ts. */
export async function benchBareKoa(seconds: number, warmup: number, durable: boolean | 'merged' = false, body: (n: number) => string = sellableLead): Promise<LoadResult> {
  const server = runChild([], durable ? { BARE_DURABLE: durable === 'merged' ? 'merged' : '1' } : {}, { script: BARE });
  try {
    await server.until('{', 1);
    const port = (JSON.parse(server.lines[0]!) as { https_port: number }).https_port;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
    const measured = await load(`https://127.0.0.1:${port}/`, {}, body, seconds, warmup, { n: 0 }, server.process.pid!);
    const name = durable === 'merged' ? "bare Koa + a post's events in 1 append" : durable ? "bare Koa + a post's 3 durable appends" : 'bare Koa HTTPS, same body';
    return loadResult(name, measured, server.process.pid!, []);
  } finally {
    server.process.kill('SIGTERM');
    await server;
  }
}

const BENCH_ROUTING = { buyers: [{ id: 'bench-buyer', price: 25, states: ['CA'], caps: [{ period: 'day', max: 100_000_000 }] }] };

interface BenchServiceOptions {
  /** The role of the key the bench gets (a supplier's by default, to post leads). */
  readonly role?: Role;
  /** Runs on the data dir before `serve` starts, e.g. to fill its stores. */
  readonly prepare?: (dataDir: string) => Promise<void>;
  /** Another entry point taking the same environment as `serve` (serve-in-clear.ts). */
  readonly script?: string;
  /** LEADPOST_ROLES of the process (all three by default). */
  readonly roles?: string;
  /** The routing file's content (by default one buyer that buys every CA lead). */
  readonly routing?: unknown;
  /** More environment for `serve`. */
  readonly env?: Record<string, string>;
  /** Writes to the event store before the service starts (more keys, a history). */
  readonly prepareStore?: (store: EmbeddedEventStore) => Promise<void>;
}

/** Another `serve` process on the bench service's data dir, e.g. the projector beside an api-only one. */
export interface BenchSibling {
  readonly pid: number;
  stop(): Promise<void>;
}

/** A `leadpost serve` child on a fresh data dir with one key and one buyer that buys every CA lead. */
export async function startBenchService(
  options: BenchServiceOptions = {},
): Promise<{ url: string; apiKey: string; dataDir: string; pid: number; sibling(roles: string): Promise<BenchSibling>; stop(): Promise<void> }> {
  const dir = tempDir('bench-post');
  const routing = join(dir.path, 'routing.json');
  writeFileSync(routing, JSON.stringify(options.routing ?? BENCH_ROUTING));
  const store = await EmbeddedEventStore.open(dir.path);
  const { id, secret } = newKeyMaterial();
  await changeKeys(store, (state) => issueKey(state, { role: options.role ?? 'supplier', name: 'bench', now: Date.now(), id, secret }));
  await options.prepareStore?.(store);
  await store.close();
  try {
    await options.prepare?.(dir.path);
  } catch (error) {
    dir.remove();
    throw error;
  }

  const nodeArgs = [...START_NODE_ARGS, ...(process.env.BENCH_SERVER_NODE_ARGS?.split(' ').filter(Boolean) ?? [])];
  const env = (port: number, httpPort: number, roles: string | undefined) => ({
    LEADPOST_DATA_DIR: dir.path,
    LEADPOST_ROUTING_FILE: routing,
    PORT: String(port),
    HTTP_PORT: String(httpPort),
    HOST: '127.0.0.1',
    RATE_LIMIT_PER_SECOND: '0',
    LOG_LEVEL: 'warn',
    ...(roles ? { LEADPOST_ROLES: roles } : {}),
    ...options.env,
  });
  const [port, httpPort] = [await freePort(), await freePort()];
  const server = runChild(options.script ? [] : ['serve'], env(port, httpPort, options.roles), { script: options.script ?? BIN, nodeArgs });
  await listening(port);
  const siblings: BenchSibling[] = [];
  process.env.NODE_TLS_REJECT_UNAUTHORIZED = '0';
  return {
    url: `https://127.0.0.1:${port}/functions/leads`,
    apiKey: formatKey(id, secret),
    dataDir: dir.path,
    pid: server.process.pid!,
    async sibling(roles) {
      const [siblingPort, siblingHttpPort] = [await freePort(), await freePort()];
      const child = runChild(['serve'], env(siblingPort, siblingHttpPort, roles), { script: BIN, nodeArgs });
      await listening(siblingPort);
      const sibling = {
        pid: child.process.pid!,
        async stop() {
          child.process.kill('SIGTERM');
          await child;
        },
      };
      siblings.push(sibling);
      return sibling;
    },
    async stop() {
      for (const sibling of siblings) await sibling.stop();
      server.process.kill('SIGTERM');
      await server;
      dir.remove();
    },
  };
}

/** The service's POST /functions/leads with every check on and durable appends, in its own process. */
export async function benchPostLead(seconds: number, warmup: number): Promise<LoadResult> {
  const service = await startBenchService();
  try {
    const lag = projectionLag(service.dataDir);
    const counter: LoadCounter = { n: 0, onAccepted: lag.sample };
    const measured = await load(service.url, { 'x-api-key': service.apiKey }, sellableLead, seconds, warmup, counter, service.pid);
    if (measured.result.non2xx > 0) console.error(`first non-2xx answer: ${counter.sample}`);
    const lags = await lag.stop();
    return loadResult('POST /functions/leads (service)', measured, service.pid, lags);
  } finally {
    await service.stop();
  }
}

const SHELL_ONLY = fileURLToPath(new URL('./serve-shell-only.js', import.meta.url));

/** The service's HTTP shell alone, the post answered at once (serve-shell-only.ts): what the shell costs. */
export async function benchShellOnly(seconds: number, warmup: number): Promise<LoadResult> {
  const service = await startBenchService({ script: SHELL_ONLY });
  try {
    const counter: LoadCounter = { n: 0 };
    const measured = await load(service.url, { 'x-api-key': service.apiKey }, sellableLead, seconds, warmup, counter, service.pid);
    if (measured.result.non2xx > 0) console.error(`first non-2xx answer: ${counter.sample}`);
    return loadResult("the service's HTTP shell, post answered at once", measured, service.pid, []);
  } finally {
    await service.stop();
  }
}

/**
 * The same load on an `api`-only process, with the projections and the delivery worker in a
 * second process on the same data dir (`serve --roles projector,delivery`), on the same two cores.
 * The row is the API process's; `projectorCpuUsPerRequest` is what the other process spent per post.
 */
export async function benchPostLeadApiOnly(seconds: number, warmup: number): Promise<LoadResult & { projectorCpuUsPerRequest: number }> {
  const service = await startBenchService({ roles: 'api' });
  try {
    const projector = await service.sibling('projector,delivery');
    const lag = projectionLag(service.dataDir);
    const counter: LoadCounter = { n: 0, onAccepted: lag.sample };
    const measured = await load(service.url, { 'x-api-key': service.apiKey }, sellableLead, seconds, warmup, counter, service.pid, [projector.pid]);
    if (measured.result.non2xx > 0) console.error(`first non-2xx answer: ${counter.sample}`);
    const lags = await lag.stop();
    const row = loadResult('POST /functions/leads (api-only process)', measured, service.pid, lags);
    return { ...row, projectorCpuUsPerRequest: Math.round((measured.otherCpuSeconds[0]! * 1e6) / Math.max(1, measured.result.requests.total)) };
  } finally {
    await service.stop();
  }
}

/** The API process alone, and then what its projector spent catching up on what it took. */
export interface ApiAloneResult extends LoadResult {
  /** Leads the projector process made views of per second, from its start to the last lead's view. */
  readonly catchUpPostsPerSecond: number;
  /** The projector process's CPU (every thread, its start included) per lead it caught up. */
  readonly catchUpCpuUsPerPost: number;
}

/**
 * An `api`-only process with nothing beside it but the load client: the post path of an API
 * instance when the projections and the delivery worker run on other machines. Once the load is
 * over, a `projector,delivery` process starts on the same data dir and catches up on every lead
 * posted, warm-up included: how many API machines one projector keeps up with.
 */
export async function benchPostLeadApiAlone(seconds: number, warmup: number): Promise<ApiAloneResult> {
  const service = await startBenchService({ roles: 'api' });
  try {
    let lastLead = 0;
    const counter: LoadCounter = {
      n: 0,
      onAccepted: (body) => {
        lastLead = Math.max(lastLead, Number(/"lead_id":(\d+)/.exec(body)?.[1] ?? 0));
      },
    };
    const measured = await load(service.url, { 'x-api-key': service.apiKey }, sellableLead, seconds, warmup, counter, service.pid);
    if (measured.result.non2xx > 0) console.error(`first non-2xx answer: ${counter.sample}`);
    const row = loadResult('POST /functions/leads (api-only, alone)', measured, service.pid, []);
    const leads = counter.n;
    const readModels = EmbeddedReadModelStore.open(service.dataDir);
    try {
      const started = performance.now();
      const projector = await service.sibling('projector,delivery');
      const collection = collectionName('leads', versionBuild(leadsProjection));
      const deadline = Date.now() + 300_000;
      while (!(await readModels.get(collection, String(lastLead)))) {
        if (Date.now() > deadline) throw new Error(`the projector did not reach lead ${lastLead} in 300 s`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const elapsed = (performance.now() - started) / 1000;
      const cpu = cpuSeconds(projector.pid).all;
      return { ...row, catchUpPostsPerSecond: Math.round(leads / elapsed), catchUpCpuUsPerPost: Math.round((cpu * 1e6) / leads) };
    } finally {
      await readModels.close();
    }
  } finally {
    await service.stop();
  }
}

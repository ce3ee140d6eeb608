import { request } from 'node:https';
import { type Browser, chromium } from 'playwright-core';
import { EmbeddedEventStore } from '../src/event-store/embedded/embedded-event-store.js';
import { CHROMIUM } from '../test/support/chromium.js';
import { runChild } from '../test/support/child.js';
import { seedLeads } from '../test/support/seed-leads.js';
import { BIN, startBenchService } from './post-lead.js';
import { percentile, round } from './stats.js';

// The console on a large store, as an analyst opens it: a store of `leads` leads received over the
// last 30 days, the service started on it, and the console's 30-day report opened in headless
// Chromium, each load in a fresh browser context (nothing cached), then reloaded (its files 304).

const DAY_MS = 86_400_000;

/** One load of the console, as the browser measured it. */
interface ConsoleLoad {
  readonly load: string;
  /** Bytes over the wire: the page, its files and every API answer until the first chart. */
  readonly bytes: number;
  readonly fileBytes: number;
  readonly apiBytes: number;
  readonly requests: number;
  /** From navigation start to both charts drawn. */
  readonly firstChartMs: number;
  /** The slowest request of the load and its time, to say where the time went. */
  readonly slowest: string;
}

interface Measured {
  readonly bytes: number;
  readonly fileBytes: number;
  readonly apiBytes: number;
  readonly requests: number;
  readonly firstChartMs: number;
  readonly timings: Array<{ path: string; startMs: number; ms: number; bytes: number }>;
  readonly received: number;
}

/** GET a JSON answer from the service (its certificate is self-signed). */
function getJson(url: string): Promise<{ status: number; body: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { rejectUnauthorized: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown> }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Waits until /readyz says ready with every projection caught up: nothing behind. */
async function caughtUp(origin: string): Promise<void> {
  for (;;) {
    const { status, body } = await getJson(`${origin}/readyz`);
    const items = (body.checks as { projections?: { items?: Array<{ events_behind: number }> } } | undefined)?.projections?.items ?? [];
    if (status === 200 && items.length > 0 && items.every((item) => item.events_behind === 0)) return;
    await new Promise((r) => setTimeout(r, 1000));
  }
}

/** What the page measured of its own load: run in the browser (this project has no DOM types, so as text). */
const MEASURE = `(() => {
  const navigation = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource').filter((r) => new URL(r.name).origin === location.origin);
  const files = resources.filter((r) => new URL(r.name).pathname.startsWith('/console/'));
  const api = resources.filter((r) => !new URL(r.name).pathname.startsWith('/console/'));
  const sum = (entries) => entries.reduce((s, r) => s + r.transferSize, 0);
  const box = document.getElementById('chart-daily');
  return {
    bytes: navigation.transferSize + sum(resources),
    fileBytes: navigation.transferSize + sum(files),
    apiBytes: sum(api),
    requests: resources.length + 1,
    firstChartMs: performance.getEntriesByName('leadpost:first-chart')[0].startTime,
    timings: [navigation, ...resources].map((r) => ({ path: new URL(r.name).pathname + new URL(r.name).search, startMs: r.startTime, ms: r.responseEnd - r.startTime, bytes: r.transferSize })),
    received: JSON.parse(box.dataset.totals).received,
  };
})()`;

async function openReport(browser: Browser, url: string, apiKey: string, reloads: number): Promise<Measured[]> {
  const context = await browser.newContext({ ignoreHTTPSErrors: true, viewport: { width: 1280, height: 800 } });
  try {
    const page = await context.newPage();
    await page.addInitScript(`sessionStorage.setItem('leadpost.apiKey', ${JSON.stringify(apiKey)})`);
    const loads: Measured[] = [];
    for (let n = 0; n <= reloads; n++) {
      if (n === 0) await page.goto(url);
      else await page.reload();
      await page.locator('#chart-daily[data-totals]').waitFor({ timeout: 600_000 });
      loads.push((await page.evaluate(MEASURE)) as Measured);
    }
    return loads;
  } finally {
    await context.close();
  }
}

/** A request by its path, and for the report its grouping: the report's two calls differ by that alone. */
function requestName(path: string): string {
  const grouping = /[?&](group_by=\w+)/.exec(path)?.[1];
  return `${path.split('?')[0]}${grouping ? `?${grouping}` : ''}`;
}

function row(load: string, m: Measured): ConsoleLoad {
  const slowest = [...m.timings].sort((a, b) => b.ms - a.ms)[0]!;
  return {
    load,
    bytes: m.bytes,
    fileBytes: m.fileBytes,
    apiBytes: m.apiBytes,
    requests: m.requests,
    firstChartMs: Math.round(m.firstChartMs),
    slowest: `${requestName(slowest.path)} ${Math.round(slowest.ms)} ms`,
  };
}

/**
 * `leads` leads written straight into the event store (as the service records them; posting them
 * one by one would take hours), spread evenly over the last 30 UTC days; the read models built by
 * `leadpost replay`, as an operator would after restoring a store; then `serve`, and once every
 * projection has caught up, `loads` cold loads of the console's 30-day report by source.
 */
export async function benchConsole(leads: number, loads: number): Promise<{ rows: ConsoleLoad[]; summary: Record<string, number | string> }> {
  const to = new Date().toISOString().slice(0, 10);
  const from = new Date(Date.parse(`${to}T00:00:00Z`) - 29 * DAY_MS).toISOString().slice(0, 10);
  const start = Date.parse(`${from}T00:00:00Z`);
  const span = Date.now() - 60_000 - start;
  const t0 = performance.now();
  const seconds = () => ((performance.now() - t0) / 1000).toFixed(0);

  const service = await startBenchService({
    role: 'analyst',
    prepare: async (dataDir) => {
      const store = await EmbeddedEventStore.open(dataDir);
      try {
        await seedLeads(store, { leads, shape: { receivedAt: (n) => new Date(start + Math.floor(((n - 1) * span) / leads)), s1: (n) => `click-${n % 1000}` } });
      } finally {
        await store.close();
      }
      console.log(`  seeded ${leads.toLocaleString('en-US')} leads over ${from} to ${to} in ${seconds()} s`);
      const replay = await runChild(['replay'], { LEADPOST_DATA_DIR: dataDir }, { script: BIN });
      if (replay.code !== 0) throw new Error(`leadpost replay failed (${replay.code}): ${replay.stderr}`);
      console.log(`  read models built by leadpost replay at ${seconds()} s`);
    },
  });
  let browser: Browser | undefined;
  try {
    const origin = new URL(service.url).origin;
    await caughtUp(origin);
    console.log(`  serve ready, every projection caught up, at ${seconds()} s`);
    browser = await chromium.launch({ executablePath: CHROMIUM });
    const url = `${origin}/console#/report?${new URLSearchParams({ from, to, tz: 'UTC', group_by: 'sid' })}`;
    const cold: Measured[] = [];
    const warm: Measured[] = [];
    for (let n = 0; n < loads; n++) {
      const [first, again] = await openReport(browser, url, service.apiKey, 1);
      cold.push(first!);
      warm.push(again!);
    }
    // Where the time of a load went: each request's start and end, from navigation start.
    const waterfall = (m: Measured) => m.timings.map((t) => ({ request: requestName(t.path), startMs: Math.round(t.startMs), endMs: Math.round(t.startMs + t.ms), bytes: t.bytes }));
    console.log(`  the last cold load, request by request (first chart at ${Math.round(cold.at(-1)!.firstChartMs)} ms):`);
    console.table(waterfall(cold.at(-1)!));
    const received = new Set(cold.map((m) => m.received));
    if (received.size !== 1 || !received.has(leads)) console.error(`  the chart's received total is ${[...received].join(', ')}, not the ${leads} leads seeded`);
    const rows = [...cold.map((m, i) => row(`cold ${i + 1}`, m)), ...warm.map((m, i) => row(`reload ${i + 1}`, m))];
    const apiTimes = cold.flatMap((m) => m.timings.filter((t) => t.path.startsWith('/functions/')));
    const byRequest = new Map<string, number[]>();
    for (const t of apiTimes) byRequest.set(requestName(t.path), [...(byRequest.get(requestName(t.path)) ?? []), t.ms]);
    return {
      rows,
      summary: {
        leads,
        'cold: bytes (p50)': percentile(cold.map((m) => m.bytes), 50),
        'cold: first chart ms (p50)': round(percentile(cold.map((m) => m.firstChartMs), 50), 0),
        'reload: bytes (p50)': percentile(warm.map((m) => m.bytes), 50),
        'reload: first chart ms (p50)': round(percentile(warm.map((m) => m.firstChartMs), 50), 0),
        ...Object.fromEntries([...byRequest].map(([path, times]) => [`${path} ms (p50 of cold loads)`, round(percentile(times, 50), 0)])),
      },
    };
  } finally {
    await browser?.close();
    await service.stop();
  }
}

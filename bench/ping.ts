import { writeFileSync } from 'node:fs';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { loadOrCreateTls } from '../src/http/tls.js';
import { tempDir } from '../test/support/tmp.js';
import { type LoadCounter, type LoadResult, load, loadResult, startBenchService } from './post-lead.js';

// POST /functions/pings under load: with three static bidders (the ping's own cost: validation,
// the repeat lookup, caps, two durable appends) beside the bare endpoint in the same run, and with
// three webhook bidders that each answer in 20 ms (what a supplier waits for a real auction).

/** A unique ping (its s1 never repeats, so none is answered from an earlier one). */
export const pingBody = (n: number): string => JSON.stringify({ zip: '90210', accident_state: 'CA', sid: 'bench', s1: `click-${n}` });

const bidders = (ping: (i: number) => unknown) =>
  [0, 1, 2].map((i) => ({ id: `bidder-${i}`, price: 20 + i, priority: i + 1, ping: ping(i), caps: [{ period: 'day', max: 100_000_000 }] }));

async function benchPings(name: string, routing: unknown, seconds: number, warmup: number, env: Record<string, string> = {}): Promise<LoadResult> {
  const service = await startBenchService({ routing: { buyers: routing }, env: { PING_RATE_LIMIT_PER_SECOND: '0', ...env } });
  try {
    const counter: LoadCounter = { n: 0 };
    const measured = await load(service.url.replace(/leads$/, 'pings'), { 'x-api-key': service.apiKey }, pingBody, seconds, warmup, counter, service.pid);
    if (measured.result.non2xx > 0) console.error(`first non-2xx answer: ${counter.sample}`);
    return loadResult(name, measured, service.pid, []);
  } finally {
    await service.stop();
  }
}

/** Three static bidders: the service's own work per ping. */
export function benchPingStatic(seconds: number, warmup: number): Promise<LoadResult> {
  return benchPings('POST /functions/pings, 3 static bidders', bidders(() => ({ kind: 'static' })), seconds, warmup);
}

/** Three webhook bidders on a local HTTPS server, each answering its bid after `delayMs`. */
export async function benchPingWebhooks(seconds: number, warmup: number, delayMs = 20): Promise<LoadResult> {
  const dir = tempDir('bench-bidders');
  const tls = await loadOrCreateTls({ dataDir: dir.path });
  const server = createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    req.resume().on('end', () => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{"bid": 30}'), delayMs));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The service trusts the bidders' self-signed certificate as an operator trusts a private CA.
  const ca = join(dir.path, 'bidders-ca.pem');
  writeFileSync(ca, tls.cert);
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/bid`;
  try {
    const routing = bidders((i) => ({ kind: 'webhook', url: `${url}/${i}`, timeout_ms: 500 }));
    return await benchPings(`POST /functions/pings, 3 webhook bidders of ${delayMs} ms`, routing, seconds, warmup, { NODE_EXTRA_CA_CERTS: ca });
  } finally {
    server.closeAllConnections();
    server.close();
    dir.remove();
  }
}

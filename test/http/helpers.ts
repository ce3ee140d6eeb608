// A real HTTPS server around the app with stub collaborators, and a raw request helper: the tests
// see exactly the bytes a supplier would.

import { request as httpRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { Writable } from 'node:stream';
import { createApp, type AppDeps } from '../../src/http/app.js';
import type { DecisionEnvelope } from '../../src/http/envelope.js';
import { createLogger } from '../../src/http/logger.js';
import type { PostLead, PostLeadRequest, PostLeadResult } from '../../src/commands/post-lead/port.js';
import type { Principal } from '../../src/keys/principal.js';
import { startServers, type RunningServers } from '../../src/http/server.js';
import { loadOrCreateTls, type TlsMaterial } from '../../src/http/tls.js';
import { tempDir } from '../support/tmp.js';

export const SUPPLIER_KEY = 'lp_test_supplier_5f2d9c1e7a';
export const SUPPLIER_2_KEY = 'lp_test_supplier_2_0c4be19d77';
export const BUYER_KEY = 'lp_test_buyer_83b1f0aa42';
export const SUPPLIER: Principal = { keyId: 'key-sup-1', role: 'supplier', name: 'supplier-1' };
const SUPPLIER_2: Principal = { keyId: 'key-sup-2', role: 'supplier', name: 'supplier-2' };
const BUYER: Principal = { keyId: 'key-buy-1', role: 'buyer', name: 'buyer-1' };

export const ENVELOPE_FIELDS = [
  'ok', 'trace_id', 'acceptance', 'lead_id', 'lead_status', 'sold', 'revenue', 'currency', 'code', 'message', 'Response',
];

export const SECURITY_HEADERS: Record<string, string> = {
  'strict-transport-security': 'max-age=63072000; includeSubDomains',
  'x-content-type-options': 'nosniff',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
  'referrer-policy': 'no-referrer',
};

const KEYS = new Map([[SUPPLIER_KEY, SUPPLIER], [SUPPLIER_2_KEY, SUPPLIER_2], [BUYER_KEY, BUYER]]);

let sharedTls: Promise<TlsMaterial> | undefined;
/** One certificate for the whole run: generating one per test only costs time. */
export function testTls(): Promise<TlsMaterial> {
  if (!sharedTls) {
    const dir = tempDir('leadpost-tls');
    sharedTls = loadOrCreateTls({ dataDir: dir.path }).finally(() => dir.remove());
  }
  return sharedTls;
}

function soldEnvelope(traceId: string): DecisionEnvelope {
  return {
    ok: true, trace_id: traceId, acceptance: 'accepted', lead_id: 42, lead_status: 'sold', sold: true,
    revenue: 12.5, currency: 'USD', code: 'SOLD', message: 'Lead accepted and sold.', Response: 'Success',
  };
}

/** What the post-lead command answers for a sold lead: the shell renders soldEnvelope from it. */
export function soldResult(traceId: string, replayed = false): PostLeadResult {
  const outcome = { lead_id: 42, code: 'SOLD', lead_status: 'sold', sold: true, revenue: 12.5, currency: 'USD' } as const;
  return { kind: 'recorded', outcome, traceId, replayed };
}

export interface TestServer {
  readonly httpsPort: number;
  readonly httpPort: number;
  /** Every log line so far, parsed. */
  logs(): Array<Record<string, unknown>>;
  /** Raw log text, to search for anything that must never be written. */
  logText(): string;
  readonly calls: PostLeadRequest[];
  /** Replaces the stub command (default: 201 SOLD). */
  respondWith(postLead: PostLead): void;
  close(): Promise<void>;
}

export async function startTestServer(
  options: Partial<Pick<AppDeps, 'limits' | 'rateLimit' | 'now'>> & { trustProxy?: boolean } = {},
): Promise<TestServer> {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      callback();
    },
  });
  const logger = createLogger({ destination, level: 'debug' });
  const calls: PostLeadRequest[] = [];
  let stub: PostLead = async (req) => soldResult(req.traceId);
  const app = createApp({
    authenticate: (key) => KEYS.get(key ?? '') ?? null,
    postLead: (req) => {
      calls.push(req);
      return stub(req);
    },
    logger,
    currency: () => 'USD',
    limits: options.limits,
    rateLimit: options.rateLimit === undefined ? null : options.rateLimit,
    now: options.now,
  });
  const running: RunningServers = await startServers({
    app, tls: await testTls(), port: 0, httpPort: 0, host: '127.0.0.1', trustProxy: options.trustProxy ?? false, logger, currency: () => 'USD',
  });
  return {
    httpsPort: running.httpsPort,
    httpPort: running.httpPort,
    logs: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
    logText: () => lines.join('\n'),
    calls,
    respondWith: (postLead) => {
      stub = postLead;
    },
    close: () => running.close(),
  };
}

export interface Reply {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  json(): Record<string, unknown>;
}

export interface RequestOptions {
  readonly port: number;
  readonly method?: string;
  readonly path?: string;
  readonly headers?: OutgoingHttpHeaders;
  readonly body?: string | Buffer;
  /** Plain HTTP instead of HTTPS. */
  readonly plain?: boolean;
}

/** One request on a fresh connection (no agent), so a server that closes it affects only this test. */
export function send(options: RequestOptions): Promise<Reply> {
  const make = options.plain ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    const req = make(
      {
        host: '127.0.0.1',
        port: options.port,
        method: options.method ?? 'GET',
        path: options.path ?? '/',
        headers: definedOnly(options.headers ?? {}),
        agent: false,
        rejectUnauthorized: false,
      },
      (res) => collect(res, resolve, reject),
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

// Lets a test drop a default header by passing `undefined` for it.
function definedOnly(headers: OutgoingHttpHeaders): OutgoingHttpHeaders {
  return Object.fromEntries(Object.entries(headers).filter(([, value]) => value !== undefined));
}

export function collect(
  res: IncomingMessage,
  resolve: (reply: Reply) => void,
  reject: (error: Error) => void,
): void {
  const chunks: Buffer[] = [];
  res.on('data', (chunk: Buffer) => chunks.push(chunk));
  res.on('error', reject);
  res.on('end', () => {
    const text = Buffer.concat(chunks).toString('utf8');
    resolve({ status: res.statusCode ?? 0, headers: res.headers, text, json: () => JSON.parse(text) as Record<string, unknown> });
  });
}

export const postLeadTo = (port: number, body: string | Buffer, headers: OutgoingHttpHeaders = {}): Promise<Reply> =>
  send({
    port,
    method: 'POST',
    path: '/functions/leads',
    headers: { 'content-type': 'application/json', 'x-api-key': SUPPLIER_KEY, ...headers },
    body,
  });

import { writeFileSync } from 'node:fs';
import { Agent, request } from 'node:https';
import { request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { loadServiceConfig } from '../../src/config.js';
import type { MxResolver } from '../../src/enrichment/email.js';
import { type EventStore, openEventStore } from '../../src/event-store/index.js';
import { createLogger } from '../../src/http/logger.js';
import { type Role, formatKey, issueKey, newKeyMaterial, revokeKey } from '../../src/keys/api-keys.js';
import type { ReadModelStore } from '../../src/read-models/port.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import { type RunningService, startService } from '../../src/service.js';
import { tempDir } from './tmp.js';

// The service as a test sees it: the real HTTPS server on a free port, the real embedded store in
// a fresh data dir, the routing file the test gives. Only what is outside the service is stubbed:
// the clock and DNS.

export interface Reply {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly text: string;
  readonly body: Record<string, unknown>;
}

export interface TestServiceOptions {
  readonly routing?: unknown;
  readonly env?: Record<string, string>;
  readonly now?: () => Date;
  readonly resolver?: MxResolver;
  /** Wraps the embedded store (behind the event codec, as the service opens it), e.g. to make it fail. */
  readonly wrapStore?: (store: EventStore) => EventStore;
  /** Wraps the embedded read-model store, e.g. to make it fail. */
  readonly wrapReadModels?: (store: ReadModelStore) => ReadModelStore;
  readonly dataDir?: string;
  /** false: the service runs no webhook delivery worker (the test runs its own). */
  readonly deliveryWorker?: boolean;
  /** A bidding buyer's self-signed certificate, trusted when the service asks it for a bid. */
  readonly buyerCa?: string;
  /** How often the service's key ring reads the keys stream (its default: 250 ms). */
  readonly keyPollMs?: number;
  /** The service's log level (default info): `trace` to see every line it can write. */
  readonly logLevel?: string;
  /** How long an erasure or access request waits for the read models (the service's default: 30 s). */
  readonly catchUpMs?: number;
}

export const CERT_URL = `https://cert.trustedform.com/${'0123456789abcdef'.repeat(2)}01234567`;

/** Every domain has an MX record, except those named `no-mx.…`, which do not exist. */
const FAKE_DNS: MxResolver = {
  resolveMx: async (domain) => {
    if (domain.startsWith('no-mx.')) throw Object.assign(new Error('no such domain'), { code: 'ENOTFOUND' });
    return [{ exchange: `mx.${domain}`, priority: 10 }];
  },
  resolveAddresses: async (domain) => (domain.startsWith('no-mx.') ? [] : ['192.0.2.10']),
};

export const ALWAYS_OPEN_ROUTING = {
  currency: 'USD',
  strategy: 'highest_price',
  duplicate_window_days: 30,
  buyers: [
    { id: 'acme-law', price: 42.5, priority: 1, states: ['CA', 'NV'], require: { phone: 'pass', email: 'pass' } },
    { id: 'nationwide', price: 12.75, priority: 50 },
  ],
  buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', states: ['TX'] }],
};

/** Exchanges 200–899 without the N11 service codes (211, 311, …, which libphonenumber rejects) and 555. */
const EXCHANGES = Array.from({ length: 700 }, (_, i) => 200 + i).filter((exchange) => exchange % 100 !== 11 && exchange !== 555);

/** The n-th test mobile in Los Angeles (213): valid, and unique for n below 6.2 million. */
export function testMobile(n: number): string {
  return `+1213${EXCHANGES[Math.floor(n / 9000) % EXCHANGES.length]}${1000 + (n % 9000)}`;
}

/** A valid, sellable lead with this e-mail and mobile. */
export function leadWith(email: string, mobile: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    first_name: 'Ada',
    last_name: 'Lovelace',
    email,
    mobile,
    zip: '90210',
    accident_state: 'CA',
    certificate_url: CERT_URL,
    sid: 'src-1',
    s1: 'click-1',
    ...overrides,
  };
}

let counter = 0;
/** A valid lead whose mobile and e-mail are unique to this test run, so it is never a duplicate. */
export function validLead(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  counter += 1;
  const n = (Date.now() % 1_000_000) * 1000 + counter;
  return leadWith(`ada.${n}@example.com`, testMobile(n), overrides);
}

export class TestService {
  private readonly agent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 64 });

  private constructor(
    readonly service: RunningService,
    /** Every log line the service wrote. */
    readonly logs: string[],
    readonly dataDir: string,
    private readonly removeDir: (() => void) | undefined,
    /** Stores the test opened itself (the service leaves stores it was given open). */
    private readonly ownStores: ReadonlyArray<{ close(): Promise<void> }> = [],
  ) {}

  static async start(options: TestServiceOptions = {}): Promise<TestService> {
    const dir = options.dataDir ? undefined : tempDir('service');
    const dataDir = options.dataDir ?? dir!.path;
    const routingFile = join(dataDir, 'routing.json');
    writeFileSync(routingFile, JSON.stringify(options.routing ?? ALWAYS_OPEN_ROUTING));
    const config = loadServiceConfig({
      LEADPOST_DATA_DIR: dataDir,
      LEADPOST_ROUTING_FILE: routingFile,
      PORT: '0',
      HTTP_PORT: '0',
      HOST: '127.0.0.1',
      RATE_LIMIT_PER_SECOND: '0',
      READ_RATE_LIMIT_PER_SECOND: '0',
      ...options.env,
    });
    const logs: string[] = [];
    const logger = createLogger({
      level: options.logLevel ?? 'info',
      destination: new Writable({
        write(chunk: Buffer, _encoding, done) {
          logs.push(chunk.toString('utf8'));
          done();
        },
      }),
    });
    const own: Array<{ close(): Promise<void> }> = [];
    let store: EventStore | undefined;
    if (options.wrapStore) {
      // Opened as the service opens it (the embedded store behind the event codec), so a test's
      // wrapper only adds its faults.
      const inner = await openEventStore({ dataDir });
      own.push(inner);
      store = options.wrapStore(inner);
    }
    let readModels: ReadModelStore | undefined;
    if (options.wrapReadModels) {
      const { EmbeddedReadModelStore } = await import('../../src/read-models/embedded.js');
      const inner = EmbeddedReadModelStore.open(dataDir);
      own.push(inner);
      readModels = options.wrapReadModels(inner);
    }
    const service = await startService(config, {
      logger,
      now: options.now,
      resolver: options.resolver ?? FAKE_DNS,
      ...(options.deliveryWorker === false ? { deliveryWorker: false } : {}),
      ...(options.buyerCa ? { buyerCa: options.buyerCa } : {}),
      ...(options.keyPollMs ? { keyPollMs: options.keyPollMs } : {}),
      ...(options.catchUpMs ? { catchUpMs: options.catchUpMs } : {}),
      ...(store ? { store } : {}),
      ...(readModels ? { readModels } : {}),
    });
    return new TestService(service, logs, dataDir, dir?.remove, own);
  }

  get port(): number {
    return this.service.httpsPort;
  }

  async key(role: Role = 'supplier', name = 'sup-1'): Promise<string> {
    const { id, secret } = newKeyMaterial();
    await changeKeys(this.service.store, (state) => issueKey(state, { role, name, now: Date.now(), id, secret }));
    await this.service.keys.refresh();
    return formatKey(id, secret);
  }

  async revoke(key: string): Promise<void> {
    const id = key.split('_')[1]!;
    await changeKeys(this.service.store, (state) => revokeKey(state, { id, now: Date.now() }));
  }

  /** POST a lead (an object is sent as JSON; a string or Buffer as is). */
  post(body: unknown, headers: Record<string, string> = {}, path = '/functions/leads'): Promise<Reply> {
    const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    return this.request('POST', path, { 'content-type': 'application/json', ...headers }, payload);
  }

  request(method: string, path: string, headers: Record<string, string> = {}, payload?: string | Buffer): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request(
        { host: '127.0.0.1', port: this.port, method, path, headers, agent: this.agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () => resolve(toReply(res.statusCode!, res.headers, Buffer.concat(chunks).toString('utf8'))));
        },
      );
      req.on('error', reject);
      req.end(payload);
    });
  }

  plainHttp(method: string, path: string): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port: this.service.httpPort, method, path }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(toReply(res.statusCode!, res.headers, Buffer.concat(chunks).toString('utf8'))));
      });
      req.on('error', reject);
      req.end();
    });
  }

  async stop(): Promise<void> {
    this.agent.destroy();
    await this.service.close();
    for (const store of this.ownStores) await store.close();
    this.removeDir?.();
  }
}

function toReply(status: number, headers: Reply['headers'], text: string): Reply {
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Left empty: the assertions on the envelope will say what was wrong.
  }
  return { status, headers, text, body };
}

export const ENVELOPE_FIELDS = ['ok', 'trace_id', 'acceptance', 'lead_id', 'lead_status', 'sold', 'revenue', 'currency', 'code', 'message', 'Response'];

import { join, resolve } from 'node:path';
import { pino } from 'pino';
import { DEFAULT_PHONE_REGIONS, isPhoneRegion } from './leads/mobile.js';
import { DEFAULT_PING_RATE_LIMIT, DEFAULT_RATE_LIMIT, DEFAULT_READ_RATE_LIMIT, DEFAULT_TIMEOUTS } from './limits.js';
import { masterKeyFileProblem } from './personal-data/master-key.js';

// Every setting comes from the environment, the same for `leadpost serve` and every CLI command,
// so a command run beside the service opens the very stores the service uses. Each variable is
// checked here, and a bad one stops start-up with a message that names it.

export interface Config {
  readonly dataDir: string;
  readonly eventStoreUrl: string | undefined;
  readonly mongoUrl: string | undefined;
  /** LEADPOST_MASTER_KEY_FILE: the master key of personal data; master.key in the data dir when unset. */
  readonly masterKeyFile: string;
}

/** What a `leadpost serve` process does: serve the API, run the projections, run the webhook delivery worker. */
export const SERVICE_ROLES = ['api', 'projector', 'delivery'] as const;
type ServiceRole = (typeof SERVICE_ROLES)[number];

export interface ServiceConfig extends Config {
  /** LEADPOST_ROLES (or `serve --roles`); every role by default. */
  readonly roles: ReadonlySet<ServiceRole>;
  /**
   * LEADPOST_BACKGROUND_THREAD: a process that serves the API and also projects or delivers runs
   * those on a thread of their own (on by default), so they take the second core, not the API's.
   */
  readonly backgroundThread: boolean;
  readonly port: number;
  readonly httpPort: number;
  readonly host: string | undefined;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  readonly trustProxy: boolean;
  readonly routingFile: string;
  readonly bodyLimitBytes: number;
  /** A client must have sent all request headers within this long, the whole request within the next. */
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  /** Lead posts per API key; null: no limit. */
  readonly rateLimit: { ratePerSecond: number; burst: number } | null;
  /** Read-back requests per API key, a bucket apart from posts; null: no limit. */
  readonly readRateLimit: { ratePerSecond: number; burst: number } | null;
  /** Pings per API key, a bucket apart from posts and reads; null: no limit. */
  readonly pingRateLimit: { ratePerSecond: number; burst: number } | null;
  /** How long a ping's answer stands: its lead must be posted before then. */
  readonly pingTtlSeconds: number;
  /** A ping answers with the bids it has after this long, however many buyers are still silent. */
  readonly pingDeadlineMs: number;
  readonly leadIdBlockSize: number;
  readonly certificateHosts: readonly string[];
  readonly mxLookup: boolean;
  readonly mxTimeoutMs: number;
  readonly mxCanaryDomain: string | null;
  /** ISO 3166 codes of the regions a lead's mobile may be a number of. */
  readonly phoneRegions: readonly string[];
  readonly phoneVerifierUrl: string | undefined;
  readonly emailVerifierUrl: string | undefined;
  /** /readyz says not ready when a projection is further behind than this. */
  readonly readyMaxLagSeconds: number;
  /** PII_RETENTION_DAYS: leads older than this lose their personal data; null (unset): kept. */
  readonly piiRetentionDays: number | null;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const dataDir = resolve(env.LEADPOST_DATA_DIR || './data');
  return {
    dataDir,
    masterKeyFile: env.LEADPOST_MASTER_KEY_FILE ? resolve(env.LEADPOST_MASTER_KEY_FILE) : join(dataDir, 'master.key'),
    eventStoreUrl: optionalUrl(env, 'EVENTSTORE_URL', ['esdb:', 'esdb+discover:']),
    mongoUrl: optionalUrl(env, 'MONGODB_URL', ['mongodb:', 'mongodb+srv:']),
  };
}

/** The routing file the service loads (and `keys create --role buyer` checks buyer ids against). */
export function routingFilePath(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.LEADPOST_ROUTING_FILE || 'config/routing.json');
}

export function loadServiceConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  const problems: string[] = [];
  const check = <T>(read: () => T, fallback: T): T => {
    try {
      return read();
    } catch (error) {
      problems.push((error as Error).message);
      return fallback;
    }
  };
  const base = check(() => loadConfig(env), { dataDir: '', masterKeyFile: '', eventStoreUrl: undefined, mongoUrl: undefined });
  const rate = check(() => integer(env, 'RATE_LIMIT_PER_SECOND', DEFAULT_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
  const pingRate = check(() => integer(env, 'PING_RATE_LIMIT_PER_SECOND', DEFAULT_PING_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
  const readRate = check(() => integer(env, 'READ_RATE_LIMIT_PER_SECOND', DEFAULT_READ_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
  const config: ServiceConfig = {
    ...base,
    roles: check(() => roleList(env, 'LEADPOST_ROLES'), new Set(SERVICE_ROLES)),
    backgroundThread: check(() => flag(env, 'LEADPOST_BACKGROUND_THREAD', true), true),
    port: check(() => integer(env, 'PORT', 8443, 0, 65535), 0),
    httpPort: check(() => integer(env, 'HTTP_PORT', 8080, 0, 65535), 0),
    host: env.HOST || undefined,
    tlsCertFile: env.TLS_CERT_FILE || undefined,
    tlsKeyFile: env.TLS_KEY_FILE || undefined,
    trustProxy: check(() => flag(env, 'TRUST_PROXY', false), false),
    routingFile: routingFilePath(env),
    bodyLimitBytes: check(() => integer(env, 'BODY_LIMIT_BYTES', 65536, 1024, 10 * 1024 * 1024), 0),
    headersTimeoutMs: check(() => integer(env, 'HEADERS_TIMEOUT_MS', DEFAULT_TIMEOUTS.headersMs, 100, 600_000), DEFAULT_TIMEOUTS.headersMs),
    requestTimeoutMs: check(() => integer(env, 'REQUEST_TIMEOUT_MS', DEFAULT_TIMEOUTS.requestMs, 100, 600_000), DEFAULT_TIMEOUTS.requestMs),
    rateLimit: rate === 0 ? null : { ratePerSecond: rate, burst: check(() => integer(env, 'RATE_LIMIT_BURST', rate * 2, 1, 10_000_000), 1) },
    readRateLimit:
      readRate === 0 ? null : { ratePerSecond: readRate, burst: check(() => integer(env, 'READ_RATE_LIMIT_BURST', readRate * 2, 1, 10_000_000), 1) },
    pingRateLimit:
      pingRate === 0 ? null : { ratePerSecond: pingRate, burst: check(() => integer(env, 'PING_RATE_LIMIT_BURST', pingRate * 2, 1, 10_000_000), 1) },
    pingTtlSeconds: check(() => integer(env, 'PING_TTL_SECONDS', 300, 1, 86_400), 300),
    pingDeadlineMs: check(() => integer(env, 'PING_DEADLINE_MS', 1000, 1, 60_000), 1000),
    leadIdBlockSize: check(() => integer(env, 'LEAD_ID_BLOCK_SIZE', 100, 1, 1_000_000), 1),
    certificateHosts: check(() => hostList(env, 'CERTIFICATE_HOSTS', 'cert.trustedform.com,ping.trustedform.com'), []),
    mxLookup: check(() => flag(env, 'MX_LOOKUP', true), true),
    mxTimeoutMs: check(() => integer(env, 'MX_TIMEOUT_MS', 300, 1, 5000), 300),
    mxCanaryDomain: check(() => optionalDomain(env, 'MX_CANARY_DOMAIN', 'gmail.com'), null),
    phoneRegions: check(() => regionList(env, 'PHONE_REGIONS', DEFAULT_PHONE_REGIONS), DEFAULT_PHONE_REGIONS),
    phoneVerifierUrl: check(() => optionalUrl(env, 'PHONE_VERIFIER_URL', ['https:', 'http:']), undefined),
    emailVerifierUrl: check(() => optionalUrl(env, 'EMAIL_VERIFIER_URL', ['https:', 'http:']), undefined),
    readyMaxLagSeconds: check(() => integer(env, 'READY_MAX_LAG_SECONDS', 30, 1, 86_400), 30),
    piiRetentionDays: check(() => (env.PII_RETENTION_DAYS ? integer(env, 'PII_RETENTION_DAYS', 0, 1, 36_500) : null), null),
  };
  const masterKeyProblem = base.masterKeyFile ? masterKeyFileProblem(base.masterKeyFile) : undefined;
  if (masterKeyProblem) problems.push(masterKeyProblem);
  // Read again by the logger (src/http/logger.ts); checked here so that it is reported with every other bad variable.
  check(() => checkLogLevel(env.LOG_LEVEL || 'info'), 'info');
  if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined)) {
    problems.push('TLS_CERT_FILE and TLS_KEY_FILE must be given together');
  }
  // Node refuses a headers timeout longer than the request timeout it is part of.
  if (config.headersTimeoutMs > config.requestTimeoutMs) problems.push('HEADERS_TIMEOUT_MS must not be more than REQUEST_TIMEOUT_MS');
  if (problems.length > 0) throw new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);
  return config;
}

/** Throws, naming LOG_LEVEL, for a level pino does not have (its own message does not say where the value came from). */
export function checkLogLevel(level: string): string {
  if (!Object.hasOwn(pino.levels.values, level) && level !== 'silent') {
    throw new Error(`LOG_LEVEL must be one of ${Object.keys(pino.levels.values).join(', ')} or silent, not '${level}'`);
  }
  return level;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, not '${raw}'`);
  }
  return value;
}

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

// An empty list would reject every consent certificate, so every lead: refused at start instead.
function hostList(env: NodeJS.ProcessEnv, name: string, fallback: string): string[] {
  const raw = env[name] || fallback;
  const hosts = raw.split(',').map((h) => h.trim().toLowerCase()).filter(Boolean);
  const bad = hosts.filter((h) => !HOST_NAME.test(h));
  if (hosts.length === 0 || bad.length > 0) {
    throw new ConfigError(`${name} must be a comma-separated list of host names${bad.length > 0 ? `, not '${bad.join("', '")}'` : ''}`);
  }
  return hosts;
}

/** A domain name (with a dot: one on the public DNS), the fallback when unset, null when set empty. */
function optionalDomain(env: NodeJS.ProcessEnv, name: string, fallback: string): string | null {
  const raw = env[name];
  if (raw === undefined) return fallback;
  const domain = raw.trim().toLowerCase().replace(/\.$/, '');
  if (raw.trim() === '') return null;
  if (!HOST_NAME.test(domain) || !domain.includes('.')) {
    throw new ConfigError(`${name} must be a domain name (e.g. gmail.com), or empty for none, not '${raw}'`);
  }
  return domain;
}

// An empty list would make every mobile invalid, so every lead: refused at start instead.
function regionList(env: NodeJS.ProcessEnv, name: string, fallback: readonly string[]): string[] {
  const raw = env[name];
  if (raw === undefined || raw === '') return [...fallback];
  const codes = [...new Set(raw.split(',').map((c) => c.trim().toUpperCase()).filter(Boolean))];
  const bad = codes.filter((c) => !isPhoneRegion(c));
  if (codes.length === 0 || bad.length > 0) {
    throw new ConfigError(`${name} must be a comma-separated list of ISO 3166 region codes (e.g. US,CA)${bad.length > 0 ? `, not '${bad.join("', '")}'` : ''}`);
  }
  return codes;
}

function roleList(env: NodeJS.ProcessEnv, name: string): Set<ServiceRole> {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return new Set(SERVICE_ROLES);
  const roles = raw.split(',').map((r) => r.trim().toLowerCase()).filter(Boolean);
  const bad = roles.filter((r) => !(SERVICE_ROLES as readonly string[]).includes(r));
  if (roles.length === 0 || bad.length > 0) throw new ConfigError(`${name} must be a comma-separated list of ${SERVICE_ROLES.join(', ')}, not '${raw}'`);
  return new Set(roles as ServiceRole[]);
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be 1 or 0 (true/false, yes/no, on/off), not '${env[name]}'`);
}

function optionalUrl(env: NodeJS.ProcessEnv, name: string, protocols: readonly string[]): string | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  let protocol: string;
  try {
    protocol = new URL(raw).protocol;
  } catch {
    throw new ConfigError(`${name} is not a URL`);
  }
  if (!protocols.includes(protocol)) throw new ConfigError(`${name} must start with ${protocols.join(' or ')}//`);
  return raw;
}

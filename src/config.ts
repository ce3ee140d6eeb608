import { type Stats, accessSync, constants, statSync } from 'node:fs';
import { dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { pino } from 'pino';
import { EVENTS_FILE } from './event-store/embedded/schema.js';
import { MAX_GRACE_SECONDS } from './keys/api-keys.js';
import { DEFAULT_PHONE_REGIONS, isPhoneRegion } from './leads/mobile.js';
import { DEFAULT_PING_RATE_LIMIT, DEFAULT_RATE_LIMIT, DEFAULT_READ_RATE_LIMIT, DEFAULT_TIMEOUTS, MAX_PING_DEADLINE_MS } from './limits.js';
import { kernelFilesystem } from './make-directory.js';
import { masterKeyFileProblem } from './personal-data/master-key.js';

// Every setting comes from the environment, the same for `leadpost serve` and every CLI command,
// so a command run beside the service opens the very stores the service uses. Each variable is
// checked here, and a bad one stops start-up (or the command) with a message that names it: every
// bad one at once, in one ConfigError, whichever of the loaders below reads it.

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

/** Where `leadpost serve` listens, and so where `leadpost health` asks. */
interface ListenerConfig {
  readonly port: number;
  readonly httpPort: number;
  readonly host: string | undefined;
}

export interface ServiceConfig extends Config, ListenerConfig {
  /** LEADPOST_ROLES (or `serve --roles`); every role by default. */
  readonly roles: ReadonlySet<ServiceRole>;
  /**
   * LEADPOST_BACKGROUND_THREAD: a process that serves the API and also projects or delivers runs
   * those on a thread of their own (on by default), so they take the second core, not the API's.
   */
  readonly backgroundThread: boolean;
  readonly tlsCertFile: string | undefined;
  readonly tlsKeyFile: string | undefined;
  readonly trustProxy: boolean;
  readonly routingFile: string;
  /** LEADPOST_ROUTING_WATCH_SECONDS: how often the routing file is looked at for a change, reloaded when it has one; null (unset, 0): only on SIGHUP. */
  readonly routingWatchSeconds: number | null;
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
  /** /readyz says not ready when every append of the instance has failed for this long. */
  readonly readyAppendFailureSeconds: number;
  /** PII_RETENTION_DAYS: leads older than this lose their personal data; null (unset): kept. */
  readonly piiRetentionDays: number | null;
  /** KEY_ROTATION_GRACE_SECONDS: what `keys rotate` gives without --grace; read here so that serve refuses a bad one at start. */
  readonly keyRotationGraceSeconds: number;
}

export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

type Check = <T>(read: () => T, fallback: T) => T;

/**
 * Reads settings with a `check` that keeps going past a bad variable, so that one ConfigError
 * names every bad variable at once (and a fix does not just uncover the next).
 */
function readAll<T>(read: (check: Check, problem: (text: string) => void) => T): T {
  const problems: string[] = [];
  const check: Check = (readOne, fallback) => {
    try {
      return readOne();
    } catch (error) {
      problems.push((error as Error).message);
      return fallback;
    }
  };
  const settings = read(check, (text) => problems.push(text));
  if (problems.length > 0) throw invalid(problems);
  return settings;
}

const invalid = (problems: readonly string[]) => new ConfigError(`invalid configuration:\n  ${problems.join('\n  ')}`);

function storeSettings(env: NodeJS.ProcessEnv, check: Check): Config {
  const dataDir = resolve(env.LEADPOST_DATA_DIR || './data');
  return {
    dataDir,
    masterKeyFile: env.LEADPOST_MASTER_KEY_FILE ? resolve(env.LEADPOST_MASTER_KEY_FILE) : join(dataDir, 'master.key'),
    eventStoreUrl: check(() => optionalUrl(env, 'EVENTSTORE_URL', ['esdb:', 'esdb+discover:']), undefined),
    mongoUrl: check(() => optionalUrl(env, 'MONGODB_URL', ['mongodb:', 'mongodb+srv:']), undefined),
  };
}

function listenerSettings(env: NodeJS.ProcessEnv, check: Check): ListenerConfig {
  return {
    port: check(() => integer(env, 'PORT', 8443, 0, 65535), 0),
    httpPort: check(() => integer(env, 'HTTP_PORT', 8080, 0, 65535), 0),
    host: env.HOST || undefined,
  };
}

/**
 * What a CLI command opens the stores with: the stores' variables, and the places their files go
 * (checkDirectories), so that a bad one stops the command as it stops serve, before any store
 * makes a directory.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config = readAll((check) => storeSettings(env, check));
  checkDirectories(config);
  return config;
}

/**
 * loadConfig for a command that reads or changes what a service has recorded (every command but
 * serve and `keys create`). Opening the embedded stores makes them when missing, which is right
 * for a first start and wrong here: run from another directory than the service's (the default
 * data dir is ./data) or with a mistyped LEADPOST_DATA_DIR, `erase` made a new, empty store and
 * answered that it erased 0 leads, `consumer show` that the consumer has none, `keys list` that
 * there are no keys, each exit 0, while the consumer's leads stayed whole in the real one.
 */
export function loadRecordedConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const config = loadConfig(env);
  if (!config.eventStoreUrl && !isFile(join(config.dataDir, EVENTS_FILE))) {
    throw new ConfigError(
      `LEADPOST_DATA_DIR ${shown(config.dataDir)} holds no ${EVENTS_FILE}: no service has recorded anything there. ` +
        'Set it to the data dir the service runs with (the default, ./data, is relative to the directory the command runs in); nothing was made or changed',
    );
  }
  return config;
}

/** PORT, HTTP_PORT and HOST, checked as serve checks them: for `leadpost health`, which asks the service beside it. */
export function loadListenerConfig(env: NodeJS.ProcessEnv = process.env): ListenerConfig {
  return readAll((check) => listenerSettings(env, check));
}

/** The routing file the service loads (and `keys create --role buyer` checks buyer ids against). */
export function routingFilePath(env: NodeJS.ProcessEnv = process.env): string {
  return resolve(env.LEADPOST_ROUTING_FILE || 'config/routing.json');
}

/**
 * Every variable of `leadpost serve`. The files it names are looked at (the master key, the TLS
 * files), the directories it would make are not: that depends on the machine it runs on as much as
 * on the variables, so serve calls checkDirectories itself, just before it starts.
 */
export function loadServiceConfig(env: NodeJS.ProcessEnv = process.env): ServiceConfig {
  return readAll((check, problem) => {
    const base = storeSettings(env, check);
    const rate = check(() => integer(env, 'RATE_LIMIT_PER_SECOND', DEFAULT_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
    const pingRate = check(() => integer(env, 'PING_RATE_LIMIT_PER_SECOND', DEFAULT_PING_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
    const readRate = check(() => integer(env, 'READ_RATE_LIMIT_PER_SECOND', DEFAULT_READ_RATE_LIMIT.ratePerSecond, 0, 1_000_000), 0);
    // A bucket's size is checked whatever its rate: with the limit off (0) a bad one went unseen,
    // and stopped the service only the day the limit was turned back on, far from the change.
    const limit = (ratePerSecond: number, burstVariable: string) => {
      const burst = check(() => integer(env, burstVariable, ratePerSecond * 2, 1, 10_000_000), 1);
      return ratePerSecond === 0 ? null : { ratePerSecond, burst };
    };
    const config: ServiceConfig = {
      ...base,
      roles: check(() => roleList(env, 'LEADPOST_ROLES'), new Set(SERVICE_ROLES)),
      backgroundThread: check(() => flag(env, 'LEADPOST_BACKGROUND_THREAD', true), true),
      ...listenerSettings(env, check),
      tlsCertFile: env.TLS_CERT_FILE || undefined,
      tlsKeyFile: env.TLS_KEY_FILE || undefined,
      trustProxy: check(() => flag(env, 'TRUST_PROXY', false), false),
      routingFile: routingFilePath(env),
      routingWatchSeconds: check(() => integer(env, 'LEADPOST_ROUTING_WATCH_SECONDS', 0, 0, 3600, 'seconds') || null, null),
      bodyLimitBytes: check(() => integer(env, 'BODY_LIMIT_BYTES', 65536, 1024, 10 * 1024 * 1024), 0),
      headersTimeoutMs: check(() => integer(env, 'HEADERS_TIMEOUT_MS', DEFAULT_TIMEOUTS.headersMs, 100, 600_000), DEFAULT_TIMEOUTS.headersMs),
      requestTimeoutMs: check(() => integer(env, 'REQUEST_TIMEOUT_MS', DEFAULT_TIMEOUTS.requestMs, 100, 600_000), DEFAULT_TIMEOUTS.requestMs),
      rateLimit: limit(rate, 'RATE_LIMIT_BURST'),
      readRateLimit: limit(readRate, 'READ_RATE_LIMIT_BURST'),
      pingRateLimit: limit(pingRate, 'PING_RATE_LIMIT_BURST'),
      pingTtlSeconds: check(() => integer(env, 'PING_TTL_SECONDS', 300, 1, 86_400), 300),
      pingDeadlineMs: check(() => integer(env, 'PING_DEADLINE_MS', 1000, 1, MAX_PING_DEADLINE_MS), 1000),
      leadIdBlockSize: check(() => integer(env, 'LEAD_ID_BLOCK_SIZE', 100, 1, 1_000_000), 1),
      certificateHosts: check(() => hostList(env, 'CERTIFICATE_HOSTS', 'cert.trustedform.com,ping.trustedform.com'), []),
      mxLookup: check(() => flag(env, 'MX_LOOKUP', true), true),
      mxTimeoutMs: check(() => integer(env, 'MX_TIMEOUT_MS', 300, 1, 5000), 300),
      mxCanaryDomain: check(() => optionalDomain(env, 'MX_CANARY_DOMAIN', 'gmail.com'), null),
      phoneRegions: check(() => regionList(env, 'PHONE_REGIONS', DEFAULT_PHONE_REGIONS), DEFAULT_PHONE_REGIONS),
      phoneVerifierUrl: check(() => verifierUrl(env, 'PHONE_VERIFIER_URL'), undefined),
      emailVerifierUrl: check(() => verifierUrl(env, 'EMAIL_VERIFIER_URL'), undefined),
      readyMaxLagSeconds: check(() => integer(env, 'READY_MAX_LAG_SECONDS', 30, 1, 86_400), 30),
      readyAppendFailureSeconds: check(() => integer(env, 'READY_APPEND_FAILURE_SECONDS', 5, 1, 3600), 5),
      piiRetentionDays: check(() => (env.PII_RETENTION_DAYS ? integer(env, 'PII_RETENTION_DAYS', 0, 1, 36_500) : null), null),
      keyRotationGraceSeconds: check(() => keyRotationGraceSeconds(env), DEFAULT_KEY_ROTATION_GRACE_SECONDS),
    };
    // Under no directory, the key is not there yet (nothing to check), or checkDirectories names
    // what is in the way: the data dir, when the key is kept in it.
    const masterKeyProblem = isDirectory(dirname(base.masterKeyFile)) ? masterKeyFileProblem(base.masterKeyFile) : undefined;
    if (masterKeyProblem) problem(masterKeyProblem);
    // Read again by the logger (src/http/logger.ts); checked here so that it is reported with every other bad variable.
    check(() => checkLogLevel(env.LOG_LEVEL || 'info'), 'info');
    if ((config.tlsCertFile === undefined) !== (config.tlsKeyFile === undefined)) {
      problem('TLS_CERT_FILE and TLS_KEY_FILE must be given together');
    } else {
      // Read only once the stores are open: looked at here, so that a missing one is named with the
      // other bad variables before anything starts, not found half-way through start-up.
      for (const [name, file] of [['TLS_CERT_FILE', config.tlsCertFile], ['TLS_KEY_FILE', config.tlsKeyFile]] as const) {
        const unreadable = file === undefined ? undefined : unreadableFile(file);
        if (unreadable) problem(`${name} must be a file this process can read, not ${shown(file!)} (${unreadable})`);
      }
    }
    // Node refuses a headers timeout longer than the request timeout it is part of.
    if (config.headersTimeoutMs > config.requestTimeoutMs) problem('HEADERS_TIMEOUT_MS must not be more than REQUEST_TIMEOUT_MS');
    return config;
  });
}

const DEFAULT_KEY_ROTATION_GRACE_SECONDS = 86_400;

/**
 * How long a rotated key keeps working when `keys rotate` is not given `--grace`:
 * KEY_ROTATION_GRACE_SECONDS, else a day. One reader, so serve at start and `keys rotate` refuse a
 * bad value in the same words.
 */
export function keyRotationGraceSeconds(env: NodeJS.ProcessEnv): number {
  return integer(env, 'KEY_ROTATION_GRACE_SECONDS', DEFAULT_KEY_ROTATION_GRACE_SECONDS, 0, MAX_GRACE_SECONDS, 'seconds');
}

/**
 * Why `path` cannot be made (as a directory, or a file's, by `what`), if it cannot: the nearest part
 * of it that exists must be a directory this process may write, on a filesystem that keeps files
 * (not /proc or /sys: refused by name here, not found out half-way through start-up). Looked at
 * only, never made: a command refused for its usage leaves no directory behind.
 */
function uncreatable(path: string, what: 'directory' | 'file'): string | undefined {
  let existing = path;
  let info: Stats | undefined;
  for (;;) {
    try {
      info = statSync(existing);
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if ((code !== 'ENOENT' && code !== 'ENOTDIR') || dirname(existing) === existing) return `${existing} cannot be read: ${code ?? 'unknown error'}`;
      existing = dirname(existing);
    }
  }
  // A master key file that is there is the master key's to judge (masterKeyFileProblem).
  if (existing === path && what === 'file') return undefined;
  const it = existing === path ? 'it' : existing;
  if (!info.isDirectory()) return `${it} is not a directory`;
  const kernel = kernelFilesystem(existing);
  if (kernel) return `${it === 'it' ? 'it is on' : `${existing} is`} a kernel filesystem, ${kernel}, that keeps no files`;
  try {
    accessSync(existing, constants.W_OK | constants.X_OK);
  } catch (error) {
    return `${it} is not writable: ${(error as NodeJS.ErrnoException).code ?? 'unknown error'}`;
  }
  return undefined;
}

const inside = (dir: string, file: string) => {
  const path = relative(dir, file);
  return path !== '' && !path.startsWith('..') && !isAbsolute(path);
};

/**
 * Throws a ConfigError, as for a bad variable, when a directory the stores or the service would
 * make cannot be made: the data dir, when anything is kept in it (an embedded store, the master
 * key, the self-signed certificate when `config` is serve's and names no TLS files), and the
 * master key file's directory when the file is elsewhere and not there yet. Called just before
 * the stores open, by serve and by each CLI command that opens them (through loadConfig).
 */
export function checkDirectories(config: Config | ServiceConfig): void {
  const problems: string[] = [];
  const masterKeyInDataDir = inside(config.dataDir, config.masterKeyFile);
  const selfSigned = 'tlsCertFile' in config && config.tlsCertFile === undefined;
  if (!config.eventStoreUrl || !config.mongoUrl || masterKeyInDataDir || selfSigned) {
    const problem = uncreatable(config.dataDir, 'directory');
    if (problem) problems.push(`LEADPOST_DATA_DIR must be a directory this process can create or write, not ${shown(config.dataDir)} (${problem})`);
    else problems.push(...unwritableStores(config));
  }
  if (!masterKeyInDataDir) {
    const problem = uncreatable(config.masterKeyFile, 'file');
    if (problem) problems.push(`LEADPOST_MASTER_KEY_FILE must be a file this process can create or read, not ${shown(config.masterKeyFile)} (${problem})`);
  }
  if (problems.length > 0) throw invalid(problems);
}

/**
 * The embedded stores' files already in the data dir that this process cannot read and write.
 * SQLite opens such a file read-only without a word (a restore copied as another user, say), and
 * the service then started, answering every post 503 until restarted with the file put right.
 */
function unwritableStores(config: Config | ServiceConfig): string[] {
  const stores = [...(config.eventStoreUrl ? [] : ['events.db']), ...(config.mongoUrl ? [] : ['readmodels.db', 'keys.db'])];
  const problems: string[] = [];
  for (const file of stores.flatMap((store) => [store, `${store}-wal`, `${store}-shm`]).map((name) => join(config.dataDir, name))) {
    try {
      accessSync(file, constants.R_OK | constants.W_OK);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'unknown error';
      if (code !== 'ENOENT') problems.push(`LEADPOST_DATA_DIR must hold store files this process can read and write, not ${shown(file)} (${code}): give it to the user the service runs as`);
    }
  }
  return problems;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Why `file` cannot be read, if it cannot: its error code, or what it is instead of a file. */
function unreadableFile(file: string): string | undefined {
  try {
    if (!statSync(file).isFile()) return 'it is not a file';
    accessSync(file, constants.R_OK);
    return undefined;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code ?? 'unknown error';
  }
}

const SHOWN_LENGTH = 80;

/**
 * A value as an error message quotes it: on one line and short, whatever was set (a pasted file,
 * a secret, a terminal escape), so the message stays one clear line that is safe to print.
 */
function shown(value: string): string {
  const printable = value.replace(/[^\x20-\x7e]/g, '?');
  return `'${printable.length > SHOWN_LENGTH ? `${printable.slice(0, SHOWN_LENGTH - 1)}…` : printable}'`;
}

/** Throws, naming LOG_LEVEL, for a level pino does not have (its own message does not say where the value came from). */
export function checkLogLevel(level: string): string {
  if (!Object.hasOwn(pino.levels.values, level) && level !== 'silent') {
    throw new Error(`LOG_LEVEL must be one of ${Object.keys(pino.levels.values).join(', ')} or silent, not ${shown(level)}`);
  }
  return level;
}

function integer(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number, unit?: string): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  return wholeNumber(name, raw, min, max, unit);
}

function wholeNumber(name: string, raw: string, min: number, max: number, unit?: string): number {
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || value < min || value > max) {
    throw new ConfigError(`${name} must be a whole number${unit ? ` of ${unit}` : ''} from ${min} to ${max}, not ${shown(raw)}`);
  }
  return value;
}

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * A comma-separated list, each item as `normal` makes it; refused when set to no item at all, or
 * with an item `valid` refuses. The message quotes the bad items, or the value itself when it
 * holds none, as every other variable's does.
 */
function list(raw: string, name: string, what: string, normal: (item: string) => string, valid: (item: string) => boolean): string[] {
  const items = [...new Set(raw.split(',').map((item) => normal(item.trim())).filter(Boolean))];
  const bad = items.filter((item) => !valid(item));
  if (items.length > 0 && bad.length === 0) return items;
  const quoted = bad.length === 0 ? shown(raw) : `${bad.slice(0, 5).map(shown).join(', ')}${bad.length > 5 ? ', …' : ''}`;
  throw new ConfigError(`${name} must be a comma-separated list of ${what}, not ${quoted}`);
}

// An empty list would reject every consent certificate, so every lead: refused at start instead.
// Set but empty is such a list, as for PHONE_REGIONS; only an unset variable gives the default.
function hostList(env: NodeJS.ProcessEnv, name: string, fallback: string): string[] {
  return list(env[name] ?? fallback, name, 'host names', (h) => h.toLowerCase(), (h) => HOST_NAME.test(h));
}

/** A domain name (with a dot: one on the public DNS), the fallback when unset, null when set empty. */
function optionalDomain(env: NodeJS.ProcessEnv, name: string, fallback: string): string | null {
  const raw = env[name];
  if (raw === undefined) return fallback;
  const domain = raw.trim().toLowerCase().replace(/\.$/, '');
  if (raw.trim() === '') return null;
  if (!HOST_NAME.test(domain) || !domain.includes('.')) {
    throw new ConfigError(`${name} must be a domain name (e.g. gmail.com), or empty for none, not ${shown(raw)}`);
  }
  return domain;
}

// An empty list would make every mobile invalid, so every lead: refused at start instead. Set but
// empty is such a list (the README's rule), not the default: only an unset variable is that.
function regionList(env: NodeJS.ProcessEnv, name: string, fallback: readonly string[]): string[] {
  const raw = env[name];
  if (raw === undefined) return [...fallback];
  return list(raw, name, 'ISO 3166 region codes (e.g. US,CA)', (c) => c.toUpperCase(), isPhoneRegion);
}

// Unset or set to nothing: every role, as the README says (a variable set empty is unset, as for
// the other single settings). `serve --roles` given empty never reaches here: bad usage (main.ts).
function roleList(env: NodeJS.ProcessEnv, name: string): Set<ServiceRole> {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return new Set(SERVICE_ROLES);
  const roles = raw.split(',').map((r) => r.trim().toLowerCase()).filter(Boolean);
  const bad = roles.filter((r) => !(SERVICE_ROLES as readonly string[]).includes(r));
  if (roles.length === 0 || bad.length > 0) throw new ConfigError(`${name} must be a comma-separated list of ${SERVICE_ROLES.join(', ')}, not ${shown(raw)}`);
  return new Set(roles as ServiceRole[]);
}

function flag(env: NodeJS.ProcessEnv, name: string, fallback: boolean): boolean {
  const raw = env[name]?.trim().toLowerCase();
  if (raw === undefined || raw === '') return fallback;
  if (['1', 'true', 'yes', 'on'].includes(raw)) return true;
  if (['0', 'false', 'no', 'off'].includes(raw)) return false;
  throw new ConfigError(`${name} must be 1 or 0 (true/false, yes/no, on/off), not ${shown(env[name]!)}`);
}

// A URL's value is never quoted back: it may carry a password.
/**
 * A verification provider is sent each lead's phone number or e-mail address: over https, or over
 * plain http to this machine only (a sidecar), never in clear across a network.
 */
function verifierUrl(env: NodeJS.ProcessEnv, name: string): string | undefined {
  const url = optionalUrl(env, name, ['https:', 'http:']);
  if (url === undefined || new URL(url).protocol === 'https:') return url;
  const host = new URL(url).hostname;
  if (host === 'localhost' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host)) return url;
  throw new ConfigError(`${name} must be https, or http to this machine only (localhost, 127.0.0.1, [::1]): it is sent consumers' phone numbers and e-mail addresses`);
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

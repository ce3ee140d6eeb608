// Built-in e-mail check: a disposable-domain list, the large mailbox providers (no lookup), then a
// lookup of the domain's mail route that is time-boxed and cached so that a slow or unreachable DNS
// costs at most one short wait per domain, not one per lead.
import { Resolver } from 'node:dns/promises';
import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import type { CheckResult } from './check.js';
import { isMailboxProvider } from './mailbox-providers.js';
import type { EmailVerifier } from './verifier.js';

export interface MxRecord {
  readonly exchange: string;
  readonly priority: number;
}

export interface MxResolver {
  resolveMx(domain: string): Promise<Array<MxRecord>>;
  /**
   * The domain's A and AAAA addresses, asked only when it has no MX record: such a domain takes
   * mail at its address (RFC 5321 §5.1). Resolves [] (or rejects with ENODATA/ENOTFOUND) when
   * there is none; rejects with another code when DNS cannot answer.
   */
  resolveAddresses(domain: string): Promise<string[]>;
}

export interface EmailVerifierOptions {
  readonly resolver?: MxResolver;
  /** Time box of one domain's lookup (its MX, then its addresses when it has no MX). */
  readonly mxTimeoutMs?: number;
  /** How long a found mail route is trusted. */
  readonly cacheTtlMs?: number;
  /**
   * How long "no mail route" is trusted: minutes, not hours, so that a domain just set up, or a
   * resolver's passing failure, stops rejecting leads soon.
   */
  readonly negativeTtlMs?: number;
  /** How long a timeout or DNS error is remembered; short, so a recovered DNS is noticed soon. */
  readonly errorTtlMs?: number;
  readonly maxCacheEntries?: number;
  readonly now?: () => number;
  /** A domain known to have MX records, looked up to tell a real NXDOMAIN from a resolver that denies everything; null: trust every answer. */
  readonly canaryDomain?: string | null;
}

const LOOKUPS_OFF = 'LOOKUPS_OFF';
const lookupsOff = () => Promise.reject(Object.assign(new Error('mail route lookups are switched off'), { code: LOOKUPS_OFF }));
/**
 * The resolver of a service told to make no DNS lookups (`MX_LOOKUP=0`, a machine without DNS):
 * the check says unknown at once, with the detail `lookup_off`, not a DNS error: nothing failed.
 */
export const NO_LOOKUPS: MxResolver = { resolveMx: lookupsOff, resolveAddresses: lookupsOff };

/** Defaults of the cache: a found route an hour, no route 5 minutes, a DNS error 30 s. */
const MX_CACHE_TTL_MS = 60 * 60 * 1000;
const MX_NEGATIVE_TTL_MS = 5 * 60 * 1000;
const MX_ERROR_TTL_MS = 30 * 1000;
/** How long the canary's verdict on DNS is kept. */
const CANARY_TTL_MS = 60 * 1000;

const DISPOSABLE: ReadonlySet<string> = disposableEmailBlocklistSet();

/** True when the domain or any parent domain (short of the bare TLD) is on the disposable list. */
export function isDisposableDomain(domain: string): boolean {
  const labels = domain.toLowerCase().replace(/\.$/, '').split('.');
  for (let i = 0; i <= labels.length - 2; i++) {
    if (DISPOSABLE.has(labels.slice(i).join('.'))) return true;
  }
  return false;
}

/** The production resolver: its own timeout and a single try, so it never outlives the verifier's time box by much. */
function createDnsMxResolver(options: { timeoutMs?: number; servers?: readonly string[] } = {}): MxResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 300, tries: 1 });
  if (options.servers) resolver.setServers([...options.servers]);
  return {
    resolveMx: (domain) => resolver.resolveMx(domain),
    resolveAddresses: async (domain) => {
      const answers = await Promise.allSettled([resolver.resolve4(domain), resolver.resolve6(domain)]);
      const addresses = answers.flatMap((a) => (a.status === 'fulfilled' ? a.value : []));
      if (addresses.length > 0) return addresses;
      // No address of either kind; an error other than "none" means DNS could not say.
      const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected' && !NO_RECORD_CODES.has(errorCode(a.reason) ?? ''));
      if (failed) throw failed.reason;
      return [];
    },
  };
}

const MX = 'dns-mx';
const TIMED_OUT = Symbol('timeout');
// Codes saying the name has no record of the kind asked for, as opposed to DNS being unable to answer.
const NO_RECORD_CODES = new Set(['ENOTFOUND', 'ENODATA']);

const errorCode = (err: unknown): string | undefined => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

const result = (outcome: CheckResult['result'], detail: string): CheckResult => ({ result: outcome, provider: MX, detail });

interface Cached {
  readonly result: CheckResult;
  readonly expiresAt: number;
}

export function createEmailVerifier(options: EmailVerifierOptions = {}): EmailVerifier {
  const mxTimeoutMs = options.mxTimeoutMs ?? 300;
  const resolver = options.resolver ?? createDnsMxResolver({ timeoutMs: mxTimeoutMs });
  const ttl = {
    pass: options.cacheTtlMs ?? MX_CACHE_TTL_MS,
    fail: options.negativeTtlMs ?? MX_NEGATIVE_TTL_MS,
    unknown: options.errorTtlMs ?? MX_ERROR_TTL_MS,
  } as const;
  const maxEntries = options.maxCacheEntries ?? 10_000;
  const now = options.now ?? Date.now;
  // A Map iterates in insertion order, so its first key is the oldest entry.
  const cache = new Map<string, Cached>();
  const inFlight = new Map<string, Promise<CheckResult>>();
  const canary = options.canaryDomain ?? null;
  let canaryVerdict: { healthy: Promise<boolean>; expiresAt: number } | undefined;

  // Some resolvers (sandboxes, captive networks) answer "no such domain" for every name. Before a
  // negative answer fails a lead, a domain known to take mail is looked up (once a minute at most,
  // one lookup shared by every lead waiting on it): if it has no mail route either, DNS is what is
  // broken, and the check is unknown rather than a failure.
  function dnsTellsTheTruth(): Promise<boolean> {
    if (canary === null) return Promise.resolve(true);
    if (!canaryVerdict || canaryVerdict.expiresAt <= now()) {
      canaryVerdict = { healthy: lookup(canary).then((r) => r.result === 'pass'), expiresAt: now() + CANARY_TTL_MS };
    }
    return canaryVerdict.healthy;
  }

  function remember(domain: string, checked: CheckResult): void {
    cache.delete(domain);
    cache.set(domain, { result: checked, expiresAt: now() + ttl[checked.result] });
    while (cache.size > maxEntries) {
      const oldest = cache.keys().next();
      if (oldest.done) break;
      cache.delete(oldest.value);
    }
  }

  /** The domain's mail route: its MX records, else (RFC 5321 §5.1) its address. */
  async function mailRoute(domain: string): Promise<CheckResult> {
    let records: MxRecord[];
    try {
      records = await resolver.resolveMx(domain);
    } catch (err) {
      const code = errorCode(err);
      if (code === 'ENOTFOUND') return result('fail', 'no_such_domain');
      if (code !== 'ENODATA') throw err;
      records = [];
    }
    // A null MX (RFC 7505, exchange "." which node reports as "") says the domain takes no mail,
    // and forbids falling back to its address.
    if (records.some((r) => r.exchange !== '' && r.exchange !== '.')) return result('pass', 'mx_found');
    if (records.length > 0) return result('fail', 'null_mx');
    let addresses: string[];
    try {
      addresses = await resolver.resolveAddresses(domain);
    } catch (err) {
      if (!NO_RECORD_CODES.has(errorCode(err) ?? '')) throw err;
      addresses = [];
    }
    return addresses.length > 0 ? result('pass', 'address_found') : result('fail', 'no_mail_route');
  }

  async function lookup(domain: string): Promise<CheckResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), mxTimeoutMs);
    });
    try {
      const answer = await Promise.race([Promise.resolve().then(() => mailRoute(domain)), timeout]);
      return answer === TIMED_OUT ? result('unknown', 'timeout') : answer;
    } catch (err) {
      const code = errorCode(err);
      return result('unknown', code === 'ETIMEOUT' ? 'timeout' : code === LOOKUPS_OFF ? 'lookup_off' : 'dns_error');
    } finally {
      clearTimeout(timer);
    }
  }

  /** A negative answer counts only when the canary shows DNS answers honestly; when the domain is the canary, its own failure says DNS does not. */
  async function trusted(domain: string, checked: CheckResult): Promise<CheckResult> {
    if (checked.result !== 'fail') return checked;
    const honest = domain === canary ? false : await dnsTellsTheTruth();
    return honest ? checked : result('unknown', 'dns_unreliable');
  }

  function checkMx(domain: string): Promise<CheckResult> {
    const cached = cache.get(domain);
    if (cached && cached.expiresAt > now()) return Promise.resolve(cached.result);
    if (cached) cache.delete(domain);
    const pending = inFlight.get(domain);
    if (pending) return pending;
    const started = lookup(domain)
      .then((checked) => trusted(domain, checked))
      .then((checked) => {
        inFlight.delete(domain);
        remember(domain, checked);
        return checked;
      });
    inFlight.set(domain, started);
    return started;
  }

  return {
    name: MX,
    // The signal is not passed on: a lookup is shared by every lead of the domain and time-boxed anyway.
    verify: async (email) => {
      const at = email.lastIndexOf('@');
      const domain = email.slice(at + 1).trim().toLowerCase().replace(/\.$/, '');
      if (at < 1 || domain === '') return { result: 'fail', provider: 'syntax', detail: 'invalid_address' };
      if (isDisposableDomain(domain)) return { result: 'fail', provider: 'disposable-list', detail: 'disposable_domain' };
      if (isMailboxProvider(domain)) return { result: 'pass', provider: 'mailbox-providers', detail: 'well_known_provider' };
      return checkMx(domain);
    },
  };
}

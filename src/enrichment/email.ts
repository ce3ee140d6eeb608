// Built-in e-mail check: a disposable-domain list, then an MX lookup that is time-boxed and cached
// so that a slow or unreachable DNS costs at most one short wait per domain, not one per lead.
import { Resolver } from 'node:dns/promises';
import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import type { CheckResult } from './check.js';
import type { EmailVerifier } from './verifier.js';

export interface MxRecord {
  readonly exchange: string;
  readonly priority: number;
}

export interface MxResolver {
  resolveMx(domain: string): Promise<Array<MxRecord>>;
}

export interface EmailVerifierOptions {
  readonly resolver?: MxResolver;
  readonly mxTimeoutMs?: number;
  /** How long a definite answer (MX found, no MX) is trusted. */
  readonly cacheTtlMs?: number;
  /** How long a timeout or DNS error is remembered; short, so a recovered DNS is noticed soon. */
  readonly errorTtlMs?: number;
  readonly maxCacheEntries?: number;
  readonly now?: () => number;
  /** A domain known to have MX records, looked up to tell a real NXDOMAIN from a resolver that denies everything; null: trust every answer. */
  readonly canaryDomain?: string | null;
}

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
export function createDnsMxResolver(options: { timeoutMs?: number; servers?: readonly string[] } = {}): MxResolver {
  const resolver = new Resolver({ timeout: options.timeoutMs ?? 300, tries: 1 });
  if (options.servers) resolver.setServers([...options.servers]);
  return { resolveMx: (domain) => resolver.resolveMx(domain) };
}

const MX = 'dns-mx';
const TIMED_OUT = Symbol('timeout');
// Codes saying the domain has no mail route, as opposed to DNS being unable to answer.
const NO_MX_CODES = new Set(['ENOTFOUND', 'ENODATA']);

interface Cached {
  readonly result: CheckResult;
  readonly expiresAt: number;
}

export function createEmailVerifier(options: EmailVerifierOptions = {}): EmailVerifier {
  const mxTimeoutMs = options.mxTimeoutMs ?? 300;
  const resolver = options.resolver ?? createDnsMxResolver({ timeoutMs: mxTimeoutMs });
  const cacheTtlMs = options.cacheTtlMs ?? 60 * 60 * 1000;
  const errorTtlMs = options.errorTtlMs ?? 30 * 1000;
  const maxEntries = options.maxCacheEntries ?? 10_000;
  const now = options.now ?? Date.now;
  // A Map iterates in insertion order, so its first key is the oldest entry.
  const cache = new Map<string, Cached>();
  const inFlight = new Map<string, Promise<CheckResult>>();
  const canary = options.canaryDomain ?? null;
  let canaryChecked: { ok: boolean; expiresAt: number } | undefined;

  // Some resolvers (sandboxes, captive networks) answer "no such domain" for every name. Before an
  // NXDOMAIN fails a lead, a domain known to take mail is looked up (once a minute at most): if it
  // too has "no MX", DNS is what is broken, and the check is unknown rather than a failure.
  async function dnsTellsTheTruth(): Promise<boolean> {
    if (canary === null) return true;
    if (!canaryChecked || canaryChecked.expiresAt <= now()) {
      const result = await lookup(canary);
      canaryChecked = { ok: result.result === 'pass', expiresAt: now() + 60_000 };
    }
    return canaryChecked.ok;
  }

  function remember(domain: string, result: CheckResult): void {
    const ttl = result.result === 'unknown' ? errorTtlMs : cacheTtlMs;
    cache.delete(domain);
    cache.set(domain, { result, expiresAt: now() + ttl });
    while (cache.size > maxEntries) {
      const oldest = cache.keys().next();
      if (oldest.done) break;
      cache.delete(oldest.value);
    }
  }

  async function lookup(domain: string): Promise<CheckResult> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
      timer = setTimeout(() => resolve(TIMED_OUT), mxTimeoutMs);
    });
    try {
      const answer = await Promise.race([Promise.resolve().then(() => resolver.resolveMx(domain)), timeout]);
      if (answer === TIMED_OUT) return { result: 'unknown', provider: MX, detail: 'timeout' };
      // A null MX (RFC 7505, exchange "." which node reports as "") says the domain takes no mail.
      const routes = answer.filter((r) => r.exchange !== '' && r.exchange !== '.');
      return routes.length > 0
        ? { result: 'pass', provider: MX, detail: 'mx_found' }
        : { result: 'fail', provider: MX, detail: 'no_mx' };
    } catch (err) {
      const code = (err as { code?: unknown } | null)?.code;
      if (typeof code === 'string' && NO_MX_CODES.has(code)) return { result: 'fail', provider: MX, detail: 'no_mx' };
      return { result: 'unknown', provider: MX, detail: code === 'ETIMEOUT' ? 'timeout' : 'dns_error' };
    } finally {
      clearTimeout(timer);
    }
  }

  function checkMx(domain: string): Promise<CheckResult> {
    const cached = cache.get(domain);
    if (cached && cached.expiresAt > now()) return Promise.resolve(cached.result);
    if (cached) cache.delete(domain);
    const pending = inFlight.get(domain);
    if (pending) return pending;
    const started = lookup(domain).then(async (result) =>
      result.result === 'fail' && domain !== canary && !(await dnsTellsTheTruth())
        ? ({ result: 'unknown', provider: MX, detail: 'dns_unreliable' } as const)
        : result,
    ).then((result) => {
      inFlight.delete(domain);
      remember(domain, result);
      return result;
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
      return checkMx(domain);
    },
  };
}

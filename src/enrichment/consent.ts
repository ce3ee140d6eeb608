// Built-in consent check: the certificate URL rules of the lead fields, shared with the lead validator.
import type { CheckResult } from './check.js';
import type { ConsentVerifier } from './verifier.js';

export const DEFAULT_CERTIFICATE_HOSTS: readonly string[] = Object.freeze([
  'cert.trustedform.com',
  'ping.trustedform.com',
]);

export type CertificateUrlParse =
  | { readonly ok: true; readonly certificateId: string }
  | { readonly ok: false; readonly reason: 'invalid_url' | 'not_https' | 'host_not_allowed' | 'no_certificate_id' };

const CERTIFICATE_ID = /^[0-9a-f]{40}$/i;
/**
 * A URL is printable ASCII (RFC 3986): a space, a control character, a lone surrogate or a letter
 * sent unencoded would be taken by the WHATWG parser (which encodes it), yet stored and sent to
 * buyers as posted, where a strict parser may refuse it.
 */
const NOT_IN_A_URL = /[^\x21-\x7e]/;
/**
 * Printable ASCII that RFC 3986 still does not allow in a URI (`|`, `{`, `}`, `^`, `` ` ``, `<`,
 * `>`, `"`, `\`, brackets outside an IPv6 host, which a certificate host is not), a `%` that does
 * not start an escape, or a second `#`: the documented `format: uri` of the field, which buyers
 * validate deliveries against, refuses them.
 */
const NOT_A_URI = /[^A-Za-z0-9\-._~:/?#@!$&'()*+,;=%]|%(?![0-9A-Fa-f]{2})|#.*#/;
/**
 * The start of the URL as written, read as RFC 3986 reads it: `https://`, then a host of letters,
 * digits, dots and hyphens and an optional port, then the path, query, fragment or the end. The
 * WHATWG parser forgives what strict parsers do not: it reads `\` as `/` (so `host\@evil.com/…`
 * is the allowed host to it, while curl and most HTTP clients of buyers send it to evil.com), a
 * scheme without `//`, and a percent-encoded host. The link is stored and sent as posted, so the
 * host the check approves must be the host any reader of it finds.
 */
const PLAIN_AUTHORITY = /^https:\/\/([A-Za-z0-9.-]+)(?::\d{1,5})?(?=[/?#]|$)/i;

export function parseCertificateUrl(url: string, allowedHosts: readonly string[] = DEFAULT_CERTIFICATE_HOSTS): CertificateUrlParse {
  let parsed: URL;
  if (NOT_IN_A_URL.test(url.trim()) || NOT_A_URI.test(url.trim())) return { ok: false, reason: 'invalid_url' };
  try {
    parsed = new URL(url.trim());
  } catch {
    return { ok: false, reason: 'invalid_url' };
  }
  if (parsed.protocol !== 'https:') return { ok: false, reason: 'not_https' };
  // Credentials in the URL are never part of a certificate link and can disguise the real host to a reader.
  if (parsed.username !== '' || parsed.password !== '') return { ok: false, reason: 'invalid_url' };
  const written = PLAIN_AUTHORITY.exec(url.trim());
  if (!written || url.includes('\\') || written[1]!.toLowerCase() !== parsed.hostname) return { ok: false, reason: 'invalid_url' };
  // `host` keeps a non-default port, so `cert.trustedform.com:8443` is not mistaken for the allowed host.
  const allowed = allowedHosts.some((h) => h.toLowerCase() === parsed.host);
  if (!allowed) return { ok: false, reason: 'host_not_allowed' };
  const segments = parsed.pathname.replace(/\/$/, '').split('/');
  const last = segments[segments.length - 1] ?? '';
  if (!CERTIFICATE_ID.test(last)) return { ok: false, reason: 'no_certificate_id' };
  return { ok: true, certificateId: last.toLowerCase() };
}

export function createConsentVerifier(options: { allowedHosts?: readonly string[] } = {}): ConsentVerifier {
  const allowedHosts = options.allowedHosts ?? DEFAULT_CERTIFICATE_HOSTS;
  return {
    name: 'certificate-rules',
    verify: async (url): Promise<CheckResult> => {
      const parsed = parseCertificateUrl(url, allowedHosts);
      return parsed.ok
        ? { result: 'pass', provider: 'certificate-rules', detail: 'certificate_format_ok' }
        : { result: 'fail', provider: 'certificate-rules', detail: parsed.reason };
    },
  };
}

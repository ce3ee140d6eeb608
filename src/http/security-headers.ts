// The API serves JSON only, to machines: nothing may be framed, sniffed, cached or referred.

const COMMON: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'Cache-Control': 'no-store',
  'Content-Security-Policy': "default-src 'none'; frame-ancestors 'none'",
  'Referrer-Policy': 'no-referrer',
};

export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'Strict-Transport-Security': 'max-age=63072000; includeSubDomains',
  ...COMMON,
};

/** RFC 6797 §7.2: HSTS must not be sent over plain HTTP (clients ignore it there anyway). */
export const PLAIN_HTTP_SECURITY_HEADERS = COMMON;

export const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

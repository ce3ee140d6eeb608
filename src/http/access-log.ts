import type { Logger } from 'pino';

export interface AccessEntry {
  readonly traceId: string;
  readonly method: string | undefined;
  /** The route pattern; null when none matched. Never the raw URL: paths and queries carry PII. */
  readonly route: string | null;
  readonly status: number;
  /** `performance.now()` when the request arrived. */
  readonly started: number;
  readonly keyId: string | null;
}

/** One line per request, and only these fields: no key, body, headers or query string. */
export function logAccess(logger: Logger, entry: AccessEntry): void {
  logger.info(
    {
      trace_id: entry.traceId,
      method: entry.method,
      route: entry.route,
      status: entry.status,
      latency_ms: Math.round((performance.now() - entry.started) * 1000) / 1000,
      key_id: entry.keyId,
    },
    'request',
  );
}

// Adapter for an external verification service: whatever goes wrong on its side becomes `unknown`,
// never an error for the lead.
import type { CheckOutcome, CheckResult } from './check.js';
import type { Verifier } from './verifier.js';

export interface HttpVerifierOptions {
  readonly name: string;
  readonly url: string;
  readonly timeoutMs?: number;
}

const OUTCOMES: ReadonlySet<unknown> = new Set<CheckOutcome>(['pass', 'fail', 'unknown']);
// The detail ends up in events and read models, in clear, so only a short word of letters gets
// through (`mobile`, `toll_free`, `mx-missing`): no digits, dots or @, which is how a provider
// echoing what it checked (a number, an e-mail's local part or domain) would carry personal data.
const SAFE_DETAIL = /^[a-z][a-z_-]{0,31}$/i;

/** An answer is a few dozen bytes; one far larger is not an answer, and is not held in memory to find out. */
const MAX_ANSWER_BYTES = 16 * 1024;

/** The body as text, or null once it passes MAX_ANSWER_BYTES: leaving the loop cancels the rest. */
async function boundedText(res: Response): Promise<string | null> {
  if (!res.body) return '';
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of res.body) {
    size += chunk.byteLength;
    if (size > MAX_ANSWER_BYTES) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export function createHttpVerifier(options: HttpVerifierOptions): Verifier<string> {
  const endpoint = new URL(options.url);
  const provider = `http:${endpoint.host}`;
  const timeoutMs = options.timeoutMs ?? 1000;
  const unknown = (detail: string): CheckResult => ({ result: 'unknown', provider, detail });

  return {
    name: options.name,
    verify: async (value, signal) => {
      const ownTimeout = AbortSignal.timeout(timeoutMs);
      try {
        const res = await fetch(endpoint, {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json' },
          body: JSON.stringify({ value }),
          // The body is a consumer's phone or e-mail: a redirect would send it on to wherever the
          // provider, or whoever answers for it, points. A 3xx is not followed; it is a provider error.
          redirect: 'manual',
          signal: AbortSignal.any([signal, ownTimeout]),
        });
        if (!res.ok) {
          await res.body?.cancel().catch(() => undefined);
          return unknown('provider_error');
        }
        const text = await boundedText(res);
        if (text === null) return unknown('provider_error');
        const body: unknown = JSON.parse(text);
        if (typeof body !== 'object' || body === null) return unknown('provider_error');
        const { result, detail } = body as { result?: unknown; detail?: unknown };
        if (!OUTCOMES.has(result)) return unknown('provider_error');
        if (detail !== undefined && typeof detail !== 'string') return unknown('provider_error');
        const safeDetail = detail !== undefined && SAFE_DETAIL.test(detail) ? detail.toLowerCase() : 'unspecified';
        return { result: result as CheckOutcome, provider, detail: safeDetail };
      } catch {
        return unknown(ownTimeout.aborted ? 'timeout' : 'provider_error');
      }
    },
  };
}

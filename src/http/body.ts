// The request body, read by hand rather than with koa-bodyparser: co-body decodes with replacement
// characters (invalid UTF-8 passes), maps an empty body to {}, accepts arrays in strict mode and
// answers an unexpected Content-Type by skipping the parse instead of 415. Each of those is a
// contract row here, so the few lines below are simpler than bending the parser.

import type { IncomingMessage } from 'node:http';
import type { Middleware } from 'koa';
import { requestTimedOut } from './client-error.js';
import { ShellError } from './errors.js';
import type { ShellState } from './state.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Is the media type `application/json` (any case), whatever its parameters? */
function isJsonType(header: string): boolean {
  return header.split(';', 1)[0]!.trim().toLowerCase() === 'application/json';
}

/** No charset, or a UTF-8 one (RFC 8259 allows no other for JSON). */
function isUtf8Charset(header: string): boolean {
  const [, ...parameters] = header.split(';');
  return parameters.every((parameter) => {
    const [name = '', value = ''] = parameter.split('=', 2);
    if (name.trim().toLowerCase() !== 'charset') return true;
    const charset = value.trim().replace(/^"(.*)"$/, '$1').toLowerCase();
    return charset === 'utf-8' || charset === 'utf8';
  });
}

export function requireJson(): Middleware<ShellState> {
  return (ctx, next) => {
    const type = ctx.get('Content-Type');
    if (!isJsonType(type)) throw new ShellError('UNSUPPORTED_MEDIA_TYPE');
    // Told that the type is wrong, a client sending application/json in UTF-16 would look in vain.
    if (!isUtf8Charset(type)) {
      throw new ShellError('UNSUPPORTED_MEDIA_TYPE', {}, 'charset', undefined, 'The body must be JSON in UTF-8: send Content-Type application/json with no charset, or charset=utf-8.');
    }
    // A compressed body is not read as JSON: refused for what it is, not as malformed JSON.
    const encoding = ctx.get('Content-Encoding').trim().toLowerCase();
    if (encoding !== '' && encoding !== 'identity') {
      throw new ShellError('UNSUPPORTED_MEDIA_TYPE', {}, 'content encoding', undefined, 'Content-Encoding is not accepted: send the JSON body uncompressed.');
    }
    return next();
  };
}

/** A request without a body needs no Content-Type; one with a body must send JSON, as requireJson says. */
const sendsBody = (req: IncomingMessage): boolean => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
export const jsonWhenSent: Middleware<ShellState> = (ctx, next) => (sendsBody(ctx.req) ? requireJson()(ctx, next) : next());

/** The body of a route whose body is optional (after jsonWhenSent): none is an empty object. */
export async function readOptionalJsonBody(req: IncomingMessage, limit: number): Promise<{ body: Record<string, unknown>; repeated: string[] }> {
  const raw = await readBody(req, limit);
  return raw.length === 0 ? { body: {}, repeated: [] } : parseJsonBody(raw);
}

// The rest of an oversized body is left unread; closing the connection stops the client from
// streaming it into a keep-alive socket we would otherwise have to drain.
const tooLarge = (): ShellError => new ShellError('PAYLOAD_TOO_LARGE', { Connection: 'close' });

/**
 * Reads at most `limit` bytes. A declared Content-Length over the limit is refused before a byte is
 * read; a chunked body is refused as soon as it passes the limit, and what follows is discarded.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const finish = (outcome: () => void): void => {
      req.off('data', onData).off('end', onEnd).off('error', onAbort).off('close', onAbort);
      outcome();
    };
    const onData = (chunk: Buffer): void => {
      size += chunk.length;
      if (size > limit) {
        finish(() => reject(tooLarge()));
        req.resume();
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => finish(() => resolve(Buffer.concat(chunks, size)));
    // Cut off at REQUEST_TIMEOUT_MS (the client has its 408 already) or abandoned by the client.
    const onAbort = (): void =>
      finish(() =>
        reject(requestTimedOut(req.socket) ? new ShellError('REQUEST_TIMEOUT', {}, 'the request body did not arrive in time') : new ShellError('MALFORMED_JSON', {}, 'the request body ended early')),
      );
    req.on('data', onData).on('end', onEnd).on('error', onAbort).on('close', onAbort);
  });
}

/**
 * One JSON.parse, then every object in the result gets a null prototype, so keys like `__proto__`
 * and `constructor` stay inert own data (the lead validator rejects them as unknown fields) and no
 * inherited member is ever read as if the client had sent it. The walk is iterative: a 64 KiB body
 * can nest tens of thousands of levels, which would overflow a recursive walk or a reviver.
 * With it, the names its object has more than once: JSON.parse keeps the last of them without a
 * word, while a proxy, a log or the client's own code may have read the first, so a route refuses
 * such a member rather than decide on one of two values.
 */
export function parseJsonBody(raw: Buffer): { body: Record<string, unknown>; repeated: string[] } {
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(raw);
    parsed = JSON.parse(text);
  } catch {
    throw new ShellError('MALFORMED_JSON');
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new ShellError('MALFORMED_JSON');
  const pending: object[] = [parsed];
  for (let value = pending.pop(); value !== undefined; value = pending.pop()) {
    if (!Array.isArray(value)) Object.setPrototypeOf(value, null);
    for (const child of Object.values(value)) {
      if (typeof child === 'object' && child !== null) pending.push(child);
    }
  }
  return { body: parsed as Record<string, unknown>, repeated: namesGivenTwice(raw, Object.keys(parsed).length) };
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const isJsonSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/**
 * The member names of the outermost object that occur more than once, in valid JSON text whose
 * value is an object that has `distinct` members once parsed. Every post passes here: the names are
 * first only counted, which makes nothing, and made and compared only when there are more of them
 * than the parsed object has, which happens when one is repeated.
 */
function namesGivenTwice(raw: Buffer, distinct: number): string[] {
  if (memberNames(raw) === distinct) return [];
  const seen = new Set<string>();
  const twice = new Set<string>();
  memberNames(raw, (name) => (seen.has(name) ? twice : seen).add(name));
  return [...twice];
}

/**
 * How many member names the outermost object has, each passed to `each` (decoded, escapes and all).
 * A string at depth 1 followed by a colon is a member name; one pass, no recursion, so the deepest
 * nesting a body can hold costs nothing more. It reads the UTF-8 bytes, not the decoded text: every
 * byte of a multi-byte character is 0x80 or more, so none is taken for a quote, a brace or a colon.
 */
function memberNames(raw: Buffer, each?: (name: string) => void): number {
  let count = 0;
  let depth = 0;
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === QUOTE) {
      const start = i;
      for (i++; raw[i] !== QUOTE; i++) if (raw[i] === BACKSLASH) i++;
      if (depth !== 1) continue;
      let next = i + 1;
      while (isJsonSpace(raw[next]!)) next++;
      if (raw[next] !== COLON) continue;
      count++;
      each?.(JSON.parse(utf8.decode(raw.subarray(start, i + 1))) as string);
    } else if (c === 0x7b || c === 0x5b) {
      depth++;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return count;
}

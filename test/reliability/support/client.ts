// A client of a server on any port (a child process or in-process), and a raw TLS exchange for the
// requests a well-behaved HTTP client refuses to send (bad framing, wrong Content-Length, slow bytes).

import { Agent, request } from 'node:https';
import { connect } from 'node:tls';
import type { Reply } from '../../support/service.js';

export type { Reply };

export function toReply(status: number, headers: Reply['headers'], text: string): Reply {
  let body: Record<string, unknown> = {};
  try {
    body = JSON.parse(text) as Record<string, unknown>;
  } catch {
    // Left empty: the assertions on the envelope say what was wrong.
  }
  return { status, headers, text, body };
}

export class Client {
  private readonly agent: Agent;

  constructor(maxSockets = 64) {
    this.agent = new Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets });
  }

  request(port: number, method: string, path: string, headers: Record<string, string | string[]> = {}, payload?: string | Buffer): Promise<Reply> {
    return new Promise((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method, path, headers, agent: this.agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve(toReply(res.statusCode!, res.headers, Buffer.concat(chunks).toString('utf8'))));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(payload);
    });
  }

  /** POST a lead: an object goes as JSON, a string or Buffer as it is. */
  post(port: number, body: unknown, headers: Record<string, string | string[]> = {}, path = '/functions/leads'): Promise<Reply> {
    const payload = typeof body === 'string' || Buffer.isBuffer(body) ? body : JSON.stringify(body);
    return this.request(port, 'POST', path, { 'content-type': 'application/json', ...headers }, payload);
  }

  destroy(): void {
    this.agent.destroy();
  }
}

export interface RawResponse {
  readonly status: number;
  /** Lower-cased names; a repeated header keeps its last value. */
  readonly headers: Record<string, string>;
  readonly text: string;
}

export interface RawExchange {
  readonly responses: RawResponse[];
  /** Bytes after the last complete response (a response cut short). */
  readonly trailing: string;
  /** The server closed the connection (rather than our time limit ending it). */
  readonly closedByServer: boolean;
  readonly elapsedMs: number;
}

/** Splits a byte stream into the HTTP/1.1 responses in it (each framed by its Content-Length). */
function parseResponses(data: Buffer): { responses: RawResponse[]; trailing: string } {
  const responses: RawResponse[] = [];
  let offset = 0;
  for (;;) {
    const headEnd = data.indexOf('\r\n\r\n', offset);
    if (headEnd < 0) break;
    const head = data.subarray(offset, headEnd).toString('latin1').split('\r\n');
    const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
    if (!status) break;
    const headers: Record<string, string> = {};
    for (const line of head.slice(1)) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    // An interim response (100 Continue) has no body; a final one without a length runs to the close.
    const interim = Number(status[1]) < 200;
    const length = interim ? 0 : headers['content-length'] === undefined ? data.length - headEnd - 4 : Number(headers['content-length']);
    if (headEnd + 4 + length > data.length) break;
    responses.push({ status: Number(status[1]), headers, text: data.subarray(headEnd + 4, headEnd + 4 + length).toString('utf8') });
    offset = headEnd + 4 + length;
  }
  return { responses, trailing: data.subarray(offset).toString('latin1') };
}

export interface RawOptions {
  /** Give up (and close) after this long. Default 10 s. */
  readonly timeoutMs?: number;
  /** Written one after another, `gapMs` apart (a slow client). */
  readonly gapMs?: number;
  /** Each part after the first is written once the server has answered every part before it (a keep-alive client). */
  readonly afterAnswer?: boolean;
  /** Half-close after the last write. Default false: a client that keeps its side open. */
  readonly end?: boolean;
  /** Called once the TLS connection is open (the server has accepted it), before the first write. */
  readonly onOpen?: () => void;
}

/**
 * Opens a TLS connection, writes `parts` (gapMs apart), and reads until the server closes it or
 * the time is up. Every response the server wrote is returned, parsed.
 */
export function rawExchange(port: number, parts: ReadonlyArray<string | Buffer>, options: RawOptions = {}): Promise<RawExchange> {
  const started = Date.now();
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let closedByServer = true;
    let timer: NodeJS.Timeout | undefined;
    let writer: NodeJS.Timeout | undefined;
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      options.onOpen?.();
      let index = 0;
      const writeNext = (): void => {
        if (socket.destroyed) return;
        const part = parts[index++];
        if (part === undefined) {
          if (options.end) socket.end();
          return;
        }
        socket.write(part);
        if (options.afterAnswer) awaitingAnswers = index;
        else if (options.gapMs) writer = setTimeout(writeNext, options.gapMs);
        else writeNext();
      };
      next = writeNext;
      writeNext();
    });
    let awaitingAnswers = 0;
    let next: (() => void) | undefined;
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      if (awaitingAnswers > 0 && parseResponses(Buffer.concat(chunks)).responses.length >= awaitingAnswers) {
        awaitingAnswers = 0;
        next?.();
      }
    });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      clearTimeout(writer);
      resolve({ ...parseResponses(Buffer.concat(chunks)), closedByServer, elapsedMs: Date.now() - started });
    });
    timer = setTimeout(() => {
      closedByServer = false;
      socket.destroy();
    }, options.timeoutMs ?? 10_000);
  });
}

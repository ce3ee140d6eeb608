import type { ClientRequest } from 'node:http';
import { request } from 'node:https';
import type { WireResult } from './attempt.js';
import { type BuyerConnections, staleConnection } from './buyer-agent.js';

// One POST to a buyer's endpoint, time-boxed as a whole: a buyer that accepts the connection and
// then trickles bytes must not hold a delivery slot longer than its `timeout_ms`. The answer
// counts once its status line arrives; the body is read only to keep the connection, at most
// MAX_ANSWER_BYTES of it: a longer one (a file, an endless stream) closes the connection, else it
// was downloaded for the whole of the buyer's time box, at a core's worth of CPU. The box (and
// the latency) starts when the request has a connection: a wait for one of the agent's sockets is
// this process's, not the buyer's, and must not be judged a timeout of a request never sent.

export interface WebhookPost {
  readonly url: string;
  readonly body: string;
  readonly headers: Record<string, string>;
  readonly timeoutMs: number;
  readonly agent: BuyerConnections;
  /** Cuts the POST short (the worker stopping): it ends as a connection error, retried later. */
  readonly signal?: AbortSignal;
}

/** The most of an answer's body read before its connection is closed instead. */
export const MAX_ANSWER_BYTES = 64 * 1024;

export function postWebhook(post: WebhookPost): Promise<WireResult> {
  let started = performance.now();
  const elapsed = () => performance.now() - started;
  return new Promise((resolve) => {
    let settled = false;
    const settle = (result: WireResult) => {
      if (settled) return;
      settled = true;
      // After a response the deadline still guards the body, until the response closes.
      if (result.kind !== 'response') clearTimeout(deadline);
      resolve(result);
    };
    let deadline: NodeJS.Timeout | undefined;
    // Sent once more, on a new connection, when the kept one it went out on turns out closed by the
    // buyer (see buyer-agent.ts); only the request in flight may settle the POST.
    let current: ClientRequest | undefined;
    const giveUp = () => {
      settle({ kind: 'timeout', latencyMs: elapsed() });
      current?.destroy();
    };
    const send = (retried: boolean) => {
      let answered = false;
      const req = request(
        post.url,
        {
          method: 'POST',
          agent: post.agent,
          headers: { ...post.headers, 'Content-Length': String(Buffer.byteLength(post.body)) },
          timeout: post.timeoutMs,
          signal: post.signal,
        },
        (res) => {
          answered = true;
          const retryAfter = res.headers['retry-after'] ?? null;
          settle({ kind: 'response', status: res.statusCode ?? 0, latencyMs: elapsed(), retryAfter });
          res.on('error', () => {});
          res.on('close', () => clearTimeout(deadline));
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_ANSWER_BYTES) res.destroy();
          });
        },
      );
      current = req;
      // The box starts with the first request's connection and holds for a request sent again:
      // an attempt never takes longer than the buyer's timeout_ms (and the wait for a socket).
      req.once('socket', () => {
        if (deadline !== undefined) return;
        started = performance.now();
        deadline = setTimeout(giveUp, post.timeoutMs);
      });
      req.on('timeout', () => {
        if (req === current) giveUp();
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (req !== current) return;
        if (!retried && !answered && !settled && !post.signal?.aborted && staleConnection(req, error)) {
          post.agent.sentAgain?.();
          return send(true);
        }
        settle({ kind: 'connection_error', latencyMs: elapsed(), code: error.code ?? null });
      });
      req.on('close', () => {
        if (req === current) settle({ kind: 'connection_error', latencyMs: elapsed(), code: null });
      });
      req.end(post.body);
    };
    try {
      send(false);
    } catch (error) {
      // A URL the routing file let through but Node will not send to: as good as unreachable.
      resolve({ kind: 'connection_error', latencyMs: 0, code: (error as NodeJS.ErrnoException).code ?? null });
    }
  });
}

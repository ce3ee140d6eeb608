// `leadpost health`: asks the service on this machine whether it is up, for a container
// HEALTHCHECK (the slim image has no curl). It reads PORT and HOST like `serve`, so it asks the
// instance beside it. The certificate is not verified: the check is whether the process answers,
// and a self-signed or real certificate never names 127.0.0.1 anyway.

import { request } from 'node:https';
import { loadListenerConfig } from '../config.js';
import type { CliIo } from './io.js';
import { UsageError, readArgs, wholeNumberOption } from './usage.js';

const USAGE = `usage: leadpost health [--ready] [--timeout MS]

Asks the service on this machine (https://HOST:PORT, from the same environment as serve) for
/healthz, or /readyz with --ready. Exit 0 when it answers 200, 1 otherwise, printing what the
answer says (not ready: which check, and why); made for a container HEALTHCHECK. --timeout: how
long to wait for the answer, 1 to 86400000 milliseconds (default 3000).`;

/** A day: longer than any health check waits, and within what a socket timeout takes. */
const MAX_TIMEOUT_MS = 86_400_000;

export async function runHealthCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let values;
  let timeoutMs = 3000;
  try {
    ({ values } = readArgs(args, { ready: { type: 'boolean' }, timeout: { type: 'string' }, help: { type: 'boolean', short: 'h' } }));
    if (values.timeout !== undefined) timeoutMs = wholeNumberOption('--timeout', String(values.timeout), 1, MAX_TIMEOUT_MS, 'milliseconds');
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost health: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  const path = values.ready ? '/readyz' : '/healthz';
  // Checked as serve checks them: a bad PORT would be asked as port NaN, which Node takes for 443.
  const listener = loadListenerConfig(env);
  const host = !listener.host || listener.host === '0.0.0.0' || listener.host === '::' ? '127.0.0.1' : listener.host;
  const port = listener.port;
  let said = '';
  const status = await new Promise<number | string>((resolve) => {
    const req = request({ host, port, path, method: 'GET', rejectUnauthorized: false, timeout: timeoutMs }, (res) => {
      // What the answer says, for an engineer reading why it is not ready ("not ready: key_store …").
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (chunk: Buffer) => {
        size += chunk.length;
        if (size <= MAX_ANSWER_BYTES) chunks.push(chunk);
      });
      res.on('error', () => resolve(res.statusCode ?? 0));
      res.on('end', () => {
        said = envelopeMessage(Buffer.concat(chunks).toString('utf8'));
        resolve(res.statusCode ?? 0);
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', (error) => resolve(error.message));
    req.end();
  });
  if (status === 200) {
    io.out.write(`ok: ${path} answered 200\n`);
    return 0;
  }
  io.err.write(`leadpost health: https://${host}:${port}${path} ${typeof status === 'number' ? `answered ${status}${said ? `: ${said}` : ''}` : `failed: ${status}`}\n`);
  return 1;
}

/** The service's answers are small envelopes; anything longer is not one. */
const MAX_ANSWER_BYTES = 64 * 1024;

/** The envelope's message, on one line; '' when the body is not an envelope. */
function envelopeMessage(text: string): string {
  try {
    const message = (JSON.parse(text) as { message?: unknown }).message;
    return typeof message === 'string' ? message.replace(/[\r\n]+/g, ' ').slice(0, 500) : '';
  } catch {
    return '';
  }
}

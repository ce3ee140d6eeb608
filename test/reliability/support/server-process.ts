// `leadpost serve` as an operator runs it: its own process (so it can be killed with SIGKILL and its
// RSS read on its own), the embedded stores in a data dir the test owns, keys made by the CLI.

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ChildResult, type RunningChild, runChild } from '../../support/child.js';

export const BIN = fileURLToPath(new URL('../../../../bin/leadpost.js', import.meta.url));

const START_TIMEOUT_MS = 30_000;

export interface ServerStartOptions {
  readonly dataDir: string;
  readonly routingFile: string;
  /** Added to (and overriding) the defaults: free ports, loopback, no DNS, no rate limit. */
  readonly env?: Record<string, string>;
  /** Node flags, e.g. START_NODE_ARGS to run under the heap cap of `npm start`. */
  readonly nodeArgs?: readonly string[];
}

/** The environment every reliability child runs with: the embedded stores, whatever the parent has set. */
export function childEnv(dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return { LEADPOST_DATA_DIR: dataDir, EVENTSTORE_URL: '', MONGODB_URL: '', ...extra };
}

export class ServerProcess {
  private constructor(
    readonly child: RunningChild,
    readonly httpsPort: number,
    readonly httpPort: number,
  ) {}

  static async start(options: ServerStartOptions): Promise<ServerProcess> {
    const env = childEnv(options.dataDir, {
      LEADPOST_ROUTING_FILE: options.routingFile,
      PORT: '0',
      HTTP_PORT: '0',
      HOST: '127.0.0.1',
      MX_LOOKUP: '0',
      RATE_LIMIT_PER_SECOND: '0',
      READ_RATE_LIMIT_PER_SECOND: '0',
      ...options.env,
    });
    const child = runChild(['serve'], env, { script: BIN, nodeArgs: [...(options.nodeArgs ?? [])] });
    const started = Date.now();
    let exited: ChildResult | undefined;
    void child.then((result) => (exited = result));
    for (;;) {
      const line = child.lines.find((l) => l.includes('"leadpost listening"'));
      if (line) {
        const listening = JSON.parse(line) as { https_port: number; http_port: number };
        return new ServerProcess(child, listening.https_port, listening.http_port);
      }
      if (exited) throw new Error(`leadpost serve exited (${exited.code ?? exited.signal}) before listening: ${exited.stderr}`);
      if (Date.now() - started > START_TIMEOUT_MS) {
        child.process.kill('SIGKILL');
        throw new Error(`leadpost serve did not listen within ${START_TIMEOUT_MS} ms: ${child.lines.slice(-5).join('\n')}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  get pid(): number {
    return this.child.process.pid!;
  }

  /** Every line the server printed (its JSON logs). */
  get lines(): string[] {
    return this.child.lines;
  }

  /** The server's resident set in KiB, read from /proc; null where there is no /proc. */
  rssKb(): number | null {
    const file = `/proc/${this.pid}/status`;
    if (!existsSync(file)) return null;
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(readFileSync(file, 'utf8'));
    return match ? Number(match[1]) : null;
  }

  /** kill -9: no handler runs, nothing is flushed or closed. */
  async kill(): Promise<ChildResult> {
    this.child.process.kill('SIGKILL');
    return this.child;
  }

  /** SIGTERM: the clean stop. */
  async stop(): Promise<ChildResult> {
    if (this.child.process.exitCode === null && this.child.process.signalCode === null) this.child.process.kill('SIGTERM');
    return this.child;
  }
}

export interface CreatedKey {
  readonly id: string;
  readonly key: string;
}

/** `leadpost keys create --json`, run as an operator would, in its own process. */
export async function createKey(dataDir: string, role: string, name: string): Promise<CreatedKey> {
  const result = await runChild(['keys', 'create', '--role', role, '--name', name, '--json'], childEnv(dataDir), { script: BIN });
  if (result.code !== 0) throw new Error(`keys create exited ${result.code}: ${result.stderr}`);
  const line = result.lines.find((l) => l.startsWith('{'));
  if (!line) throw new Error(`keys create printed no JSON line: ${result.lines.join('\n')}`);
  return JSON.parse(line) as CreatedKey;
}

/** Writes a routing file into the data dir and returns its path. */
export function writeRouting(dataDir: string, routing: unknown): string {
  const file = join(dataDir, 'routing.json');
  writeFileSync(file, JSON.stringify(routing));
  return file;
}

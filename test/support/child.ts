import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface ChildResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly lines: string[];
  readonly stderr: string;
}

export interface RunningChild extends Promise<ChildResult> {
  readonly process: ChildProcess;
  /** Lines printed so far. */
  readonly lines: string[];
  /** Resolves when the child prints `ready`; `go()` writes a line to its stdin. */
  readonly ready: Promise<{ go(): void }>;
  /** Resolves when the child has printed `count` lines starting with `prefix`. */
  until(prefix: string, count: number): Promise<void>;
}

/** The node flags of `npm start` (the heap cap among them), for a child that runs the service as it is started. */
export const START_NODE_ARGS: readonly string[] = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } }).scripts.start
  .split(' ')
  .filter((word) => word.startsWith('--'));

const APPEND_CHILD = fileURLToPath(new URL('../event-store/append-child.js', import.meta.url));

/** Runs `append-child.js` (or another script) in a separate node process, line by line. */
export function runChild(args: string[], env: NodeJS.ProcessEnv, options: { script?: string; nodeArgs?: string[] } = {}): RunningChild {
  const child = spawn(process.execPath, ['--enable-source-maps', ...(options.nodeArgs ?? []), options.script ?? APPEND_CHILD, ...args], {
    // The embedded stores of its data dir unless the test names a server: EVENTSTORE_URL and
    // MONGODB_URL, set for a whole `npm test` to run the contract suites, are not inherited.
    env: { ...process.env, EVENTSTORE_URL: '', MONGODB_URL: '', ...env },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  const waiters: Array<{ prefix: string; count: number; resolve(): void }> = [];
  let stderr = '';
  let buffered = '';
  let readyResolve: (value: { go(): void }) => void = () => {};
  const ready = new Promise<{ go(): void }>((resolve) => (readyResolve = resolve));
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    buffered += chunk;
    let newline: number;
    while ((newline = buffered.indexOf('\n')) >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      lines.push(line);
      if (line === 'ready') readyResolve({ go: () => child.stdin!.end('go\n') });
      for (const waiter of [...waiters]) {
        if (lines.filter((l) => l.startsWith(waiter.prefix)).length >= waiter.count) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    }
  });
  child.stderr!.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<ChildResult>((resolve) => {
    child.on('exit', (code, signal) => resolve({ code, signal, lines, stderr }));
  });
  return Object.assign(done, {
    process: child,
    lines,
    ready,
    until: (prefix: string, count: number) =>
      new Promise<void>((resolve, reject) => {
        waiters.push({ prefix, count, resolve });
        void done.then((result) => reject(new Error(`child exited (${result.code ?? result.signal}) before ${count} '${prefix}' lines: ${result.stderr}`)));
      }),
  });
}

import { readFileSync } from 'node:fs';

// The release this process runs, as package.json names it: what an operator quotes when reporting
// a problem, so the start-up line logs it, /metrics exports it and `leadpost version` prints it.

let version: string | undefined;

export function releaseVersion(): string {
  version ??= String((JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version?: unknown }).version);
  return version;
}

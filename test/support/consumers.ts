import { expect } from 'chai';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { runEventsCommand } from '../../src/cli/events.js';
import type { RecordedEvent } from '../../src/event-store/index.js';
import { testMobile } from './service.js';

// Consumers for the personal-data tests, and the byte scan that looks for them in files: what
// would give a consumer away, in every encoding a file or a log might hold it.

export interface Consumer {
  readonly first_name: string;
  readonly last_name: string;
  readonly email: string;
  readonly mobile: string;
  /** The mobile's national number (E.164 without +1). */
  readonly national: string;
}

/** Consumers with these names, and an e-mail and mobile unique to this run (`run`: a number apart per suite). */
export function consumers(run: number, names: ReadonlyArray<readonly [string, string]>): Consumer[] {
  return names.map(([first_name, last_name], i) => {
    const mobile = testMobile(run * 10 + i);
    return { first_name, last_name, email: `${first_name.toLowerCase()}.${run}@example.com`, mobile, national: mobile.slice(2) };
  });
}

/** Every byte sequence that would give a consumer away: each value in UTF-8, UTF-16LE and UTF-16BE. */
function needles(consumer: Consumer): Array<{ what: string; bytes: Buffer }> {
  return (['first_name', 'last_name', 'email', 'mobile', 'national'] as const).flatMap((field) => [
    { what: `${field} (UTF-8)`, bytes: Buffer.from(consumer[field], 'utf8') },
    { what: `${field} (UTF-16LE)`, bytes: Buffer.from(consumer[field], 'utf16le') },
    { what: `${field} (UTF-16BE)`, bytes: Buffer.from(consumer[field], 'utf16le').swap16() },
  ]);
}

/** Every file under `dir`, in every folder. */
export function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath, entry.name));
}

/** What of `consumer` is found in the contents (a file's, a log's): empty when nothing. */
export function found(contents: Array<{ where: string; bytes: Buffer }>, consumer: Consumer): string[] {
  return needles(consumer).flatMap(({ what, bytes }) => contents.filter((c) => c.bytes.includes(bytes)).map((c) => `${what} in ${c.where}`));
}

/** The files' contents, for `found`. */
export const contentsOf = (files: string[]) => files.filter(existsSync).map((file) => ({ where: file, bytes: readFileSync(file) }));

/** `leadpost events STREAM --json` on the data dir, parsed. */
export async function eventsJson(dataDir: string, stream: string): Promise<RecordedEvent[]> {
  let out = '';
  const io = { out: { write: (t: string) => (out += t) }, err: { write: () => true } };
  expect(await runEventsCommand([stream, '--json'], io, { LEADPOST_DATA_DIR: dataDir })).to.equal(0);
  return out
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as RecordedEvent);
}

import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { KEY_BYTES } from '../src/personal-data/aes-gcm.js';
import { EmbeddedKeyStore } from '../src/personal-data/embedded-key-store.js';
import { PersonalDataKeys } from '../src/personal-data/index.js';
import { tempDir } from '../test/support/tmp.js';
import { type LoadResult, load, loadResult, sellableLead, startBenchService } from './post-lead.js';

// What encryption of personal data costs a post: the service as it runs, and the same service
// whose codec seals nothing (serve-in-clear.ts), alternated under the same load, so that a slow
// spell of a shared machine does not land on one side only.

const IN_CLEAR = fileURLToPath(new URL('./serve-in-clear.js', import.meta.url));

async function once(name: string, script: string | undefined, seconds: number, warmup: number): Promise<LoadResult> {
  const service = await startBenchService({ script });
  try {
    const measured = await load(service.url, { 'x-api-key': service.apiKey }, sellableLead, seconds, warmup, { n: 0 }, service.pid);
    return loadResult(name, measured, service.pid, []);
  } finally {
    await service.stop();
  }
}

export interface EncryptionCost {
  readonly rounds: LoadResult[];
  /** Server CPU per post, encrypted over in clear, from the means of the rounds. */
  readonly cpuRatio: number;
}

export async function benchEncryption(seconds: number, warmup: number, rounds = 4): Promise<EncryptionCost> {
  const results: LoadResult[] = [];
  const encrypted = () => once('personal data encrypted (as served)', undefined, seconds, warmup);
  const clear = () => once('personal data in clear (codec seals nothing)', IN_CLEAR, seconds, warmup);
  // Each goes first in turn, so that a machine slowing down within a round favours neither.
  for (let round = 0; round < rounds; round++) {
    for (const run of round % 2 === 0 ? [encrypted, clear] : [clear, encrypted]) results.push(await run());
  }
  const mean = (prefix: string) => {
    const of = results.filter((r) => r.case.startsWith(prefix)).map((r) => r.serverCpuUsPerRequest);
    return of.reduce((a, b) => a + b, 0) / of.length;
  };
  return { rounds: results, cpuRatio: mean('personal data encrypted') / mean('personal data in clear') };
}

export interface KeyMakingSlice {
  readonly 'keys in the store before': number;
  readonly 'CPU µs per key': number;
  readonly 'wall µs per key': number;
}

/**
 * What taking a new lead's data key costs as the key store grows: the pool's batches (random
 * bytes, wrapping, a durable commit to keys.db), measured a slice at a time. A bench of posts
 * starts from an empty store; a store a year old holds millions of keys.
 */
export async function benchKeyMaking(totalKeys: number, slices = 4): Promise<KeyMakingSlice[]> {
  const dir = tempDir('bench-keys');
  const keys = new PersonalDataKeys(EmbeddedKeyStore.open(dir.path), randomBytes(KEY_BYTES));
  const perSlice = Math.floor(totalKeys / slices);
  const rows: KeyMakingSlice[] = [];
  try {
    for (let slice = 0; slice < slices; slice++) {
      const cpu = process.cpuUsage();
      const started = performance.now();
      for (let i = 0; i < perSlice; i++) {
        const key = keys.take();
        if (key instanceof Promise) await key;
      }
      const used = process.cpuUsage(cpu);
      rows.push({
        'keys in the store before': slice * perSlice,
        'CPU µs per key': Math.round(((used.user + used.system) / perSlice) * 10) / 10,
        'wall µs per key': Math.round(((performance.now() - started) * 1000 / perSlice) * 10) / 10,
      });
    }
  } finally {
    await keys.close();
    dir.remove();
  }
  return rows;
}

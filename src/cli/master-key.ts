import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { loadRecordedConfig } from '../config.js';
import { openKeyStore } from '../personal-data/index.js';
import { createMasterKey, loadMasterKey } from '../personal-data/master-key.js';
import { rotateMasterKey, surveyKeyStore } from '../personal-data/master-key-rotation.js';
import { openReadModelStore } from '../read-models/index.js';
import type { CliIo } from './io.js';
import { holdServiceLeases } from './service-leases.js';
import { UsageError, readArgs } from './usage.js';

// `leadpost master-key rotate --to NEW_FILE`: a new master key, and every data key and secret of
// the key store wrapped under it (src/personal-data/master-key-rotation.ts), with the service stopped.

const USAGE = `usage: leadpost master-key rotate --to NEW_FILE [--json]

With every instance of the service stopped: makes a new master key in NEW_FILE (32 random bytes,
mode 0600; a file that exists is refused) and wraps every data key and secret of the key store
under it, each opened with the master key in use (LEADPOST_MASTER_KEY_FILE). Destroyed keys stay
destroyed. A rotation that stopped part-way is finished by running it again with the same --to:
NEW_FILE is then accepted because entries already open with it. Afterwards point
LEADPOST_MASTER_KEY_FILE at NEW_FILE on every instance, then start them; a start with the old key
is refused.
--json: the outcome as one JSON object.`;

export async function runMasterKeyCommand(args: string[], io: CliIo = { out: process.stdout, err: process.stderr }, env = process.env): Promise<number> {
  let values;
  try {
    const parsed = readArgs(args, { to: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean', short: 'h' } }, { positionals: true });
    values = parsed.values;
    if (!values.help) {
      if (parsed.positionals.length !== 1 || parsed.positionals[0] !== 'rotate') throw new UsageError(parsed.positionals.length === 0 ? 'say what to do: rotate' : 'the only subcommand is rotate');
      if (typeof values.to !== 'string' || values.to === '') throw new UsageError('--to NEW_FILE is required');
    }
  } catch (error) {
    if (!(error instanceof UsageError)) throw error;
    io.err.write(`leadpost master-key: ${error.message}\n\n${USAGE}\n`);
    return 2;
  }
  if (values.help) {
    io.out.write(`${USAGE}\n`);
    return 0;
  }
  const fail = (message: string): number => {
    io.err.write(`leadpost master-key rotate: ${message}\n`);
    return 1;
  };
  const config = loadRecordedConfig(env);
  const target = resolve(String(values.to));
  if (target === resolve(config.masterKeyFile)) return fail(`--to names the master key file in use (LEADPOST_MASTER_KEY_FILE); name a new file`);
  const oldKey = await loadMasterKey(config.masterKeyFile);

  const closers: Array<() => Promise<void>> = [];
  try {
    const readModels = await openReadModelStore(config);
    closers.unshift(() => readModels.close());
    const leases = await holdServiceLeases(readModels, closers);
    if (leases.heldBy) return fail(`a service is running on this data dir (${leases.heldBy}): stop every instance of it, then run this again`);
    const store = await openKeyStore(config);
    closers.unshift(() => store.close());

    const resumed = existsSync(target);
    let newKey: Buffer;
    if (resumed) {
      // A --to that is no key is the argument's fault, not the key in use's: named as --to.
      newKey = await loadMasterKey(target, '--to');
      const survey = await surveyKeyStore(store, oldKey, newKey);
      if (survey.underNew === 0) return fail(`${target} exists and no entry of the key store opens with it, so it is not this key store's rotation left half-done: name a file that does not exist, or remove it if it is the key of a rotation stopped before it wrapped anything (nothing was changed)`);
      if (survey.neither.length > 0) return fail(unopened(survey.neither));
    } else {
      const survey = await surveyKeyStore(store, oldKey, oldKey);
      if (survey.neither.length > 0) return fail(unopened(survey.neither));
      newKey = await createMasterKey(target, '--to');
    }
    // From here NEW_FILE is kept whatever happens: entries may be wrapped under it already.
    let counts;
    try {
      counts = await rotateMasterKey(store, oldKey, newKey);
    } finally {
      oldKey.fill(0);
      newKey.fill(0);
    }
    // A service that started while the keys were wrapped anew has cached keys under the old master key: say so rather than report success.
    await leases.stillHeld(
      (holder, lease) => `${holder} took the ${lease} lease while the keys were wrapped anew: a service started; stop it, run this again with the same --to, then start the instances with the new key`,
    );

    if (values.json) io.out.write(`${JSON.stringify({ data_keys: counts.dataKeys, secrets: counts.secrets, master_key_file: target, resumed })}\n`);
    else {
      io.out.write(`${resumed ? 'finished the rotation: ' : ''}wrapped ${counts.dataKeys} data key(s) and ${counts.secrets} secret(s) under the new master key in ${target}\n`);
      io.out.write(`next, on every instance: point LEADPOST_MASTER_KEY_FILE at ${target} (or move it over ${config.masterKeyFile}), then start it; a start with the old key is refused\n`);
      io.out.write('then destroy the old master key file, and the master keys of backups taken before now as your policy says: those backups open only with the old key\n');
    }
    return 0;
  } finally {
    for (const close of closers) await close();
  }
}

const unopened = (entries: readonly string[]) =>
  `${entries.length} entr${entries.length === 1 ? 'y' : 'ies'} of the key store open with neither master key (${entries.slice(0, 5).join(', ')}${entries.length > 5 ? ', …' : ''}): ` +
  'is LEADPOST_MASTER_KEY_FILE the key this key store was wrapped with? Nothing was changed';

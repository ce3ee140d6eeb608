import { expect } from 'chai';
import { chmodSync, existsSync, mkdirSync, readFileSync, renameSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig, loadServiceConfig } from '../../src/config.js';
import { openEventStore } from '../../src/event-store/index.js';
import { type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import { openLead } from '../../src/events/codec/index.js';
import { MasterKeyError, openPersonalDataKeys } from '../../src/personal-data/index.js';
import { loadOrCreateMasterKey } from '../../src/personal-data/master-key.js';
import { ContactHashes } from '../../src/personal-data/contact-hashes.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';
import { rejection } from '../support/rejection.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('the master key (LEADPOST_MASTER_KEY_FILE)', function () {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('master-key')));
  afterEach(() => dir.remove());

  it('is made on the first start in the data dir: 32 random bytes, mode 0600, the same afterwards', async function () {
    const file = join(dir.path, 'master.key');
    expect(loadConfig({ LEADPOST_DATA_DIR: dir.path }).masterKeyFile).to.equal(file);
    const key = await loadOrCreateMasterKey(file);
    expect(key.length).to.equal(32);
    expect(statSync(file).mode & 0o777).to.equal(0o600);
    expect((await loadOrCreateMasterKey(file)).equals(key)).to.equal(true);
    expect(readFileSync(file).equals(key)).to.equal(true);
  });

  it('two processes starting at once end with one key', async function () {
    const file = join(dir.path, 'nested', 'master.key');
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateMasterKey(file)));
    for (const key of keys) expect(key.equals(keys[0]!)).to.equal(true);
  });

  it('a file of the wrong size, readable by others, not a file, or unreadable is refused, never replaced', async function () {
    const short = join(dir.path, 'short.key');
    writeFileSync(short, Buffer.alloc(31), { mode: 0o600 });
    expect((await rejection(loadOrCreateMasterKey(short))).message).to.equal(
      `the master key file ${short} (LEADPOST_MASTER_KEY_FILE) must hold exactly 32 bytes, not 31`,
    );
    expect(readFileSync(short).length).to.equal(31);

    const shared = join(dir.path, 'shared.key');
    writeFileSync(shared, Buffer.alloc(32), { mode: 0o600 });
    chmodSync(shared, 0o640);
    const error = await rejection(loadOrCreateMasterKey(shared));
    expect(error).to.be.instanceOf(MasterKeyError);
    expect(error.message).to.equal(`the master key file ${shared} (LEADPOST_MASTER_KEY_FILE) may be read or written by others than its owner (mode 0640): make it 0600 or 0400`);

    const folder = join(dir.path, 'folder.key');
    mkdirSync(folder);
    expect((await rejection(loadOrCreateMasterKey(folder))).message).to.match(/folder\.key \(LEADPOST_MASTER_KEY_FILE\) is not a file$/);

    const under = join(short, 'master.key');
    expect((await rejection(loadOrCreateMasterKey(under))).message).to.match(/short\.key\/master\.key \(LEADPOST_MASTER_KEY_FILE\) cannot be read \(ENOTDIR\)$/);
  });

  it('is checked with the other settings: a bad one stops `leadpost serve` with its message, exit 1', async function () {
    const file = join(dir.path, 'elsewhere.key');
    writeFileSync(file, Buffer.alloc(32), { mode: 0o644 });
    chmodSync(file, 0o644);
    const env = { LEADPOST_DATA_DIR: dir.path, LEADPOST_MASTER_KEY_FILE: file, PORT: 'eighty' };
    const error = (() => {
      try {
        loadServiceConfig(env);
        return null;
      } catch (e) {
        return e as Error;
      }
    })();
    expect(error).to.be.instanceOf(ConfigError);
    expect(error!.message).to.contain('PORT must be a whole number').and.contain(`the master key file ${file} (LEADPOST_MASTER_KEY_FILE) may be read or written by others`);

    const served = await runChild(['serve'], { ...env, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, { script: BIN });
    expect(served.code).to.equal(1);
    expect(served.stderr).to.contain(`the master key file ${file} (LEADPOST_MASTER_KEY_FILE) may be read or written by others than its owner (mode 0644)`);
    expect(served.stderr).to.not.contain('    at ');
  });

  it('another master key than the data dir was made with stops `leadpost serve` with its message, exit 1, never a hang', async function () {
    const keys = await openPersonalDataKeys({ dataDir: dir.path });
    const store = await openEventStore({ dataDir: dir.path }, { personalData: keys });
    await ContactHashes.open(keys, store);
    await store.close();
    await keys.close();
    const other = join(dir.path, 'other.key');
    writeFileSync(other, Buffer.alloc(32, 7), { mode: 0o600 });
    const child = runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, LEADPOST_MASTER_KEY_FILE: other, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, { script: BIN });
    // It once printed its line and then ran on for ever, listening on nothing: the stores opened
    // before the failing step kept their threads.
    const deadline = setTimeout(() => child.process.kill('SIGKILL'), 20_000);
    const served = await child.finally(() => clearTimeout(deadline));
    expect(served.signal).to.equal(null);
    expect(served.code).to.equal(1);
    expect(served.stderr.trim()).to.equal(
      `leadpost: the secret contact-hashes does not open with the master key in ${other} (LEADPOST_MASTER_KEY_FILE is not the key it was stored with; ` +
        'after `leadpost master-key rotate` it must name the new key file that command wrote)',
    );
  });

  it('missing beside a key store that holds keys (a restore without it) stops `leadpost serve` and the commands, naming it, and none is made', async function () {
    const keys = await openPersonalDataKeys({ dataDir: dir.path });
    const store = await openEventStore({ dataDir: dir.path }, { personalData: keys });
    await ContactHashes.open(keys, store);
    await store.close();
    await keys.close();
    const file = join(dir.path, 'master.key');
    renameSync(file, join(dir.path, 'kept-elsewhere.key'));
    const env = { LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' };
    // A new key made in its place opened none of the stored ones: start-up then failed on the
    // contact-hashes secret, naming no missing file, and the new key stayed where the real one belongs.
    const expected =
      `leadpost: the master key file ${file} (LEADPOST_MASTER_KEY_FILE) does not exist, while ${join(dir.path, 'keys.db')} holds data keys wrapped by the master key they were stored with: ` +
      'put that key back (from a backup taken with --with-master-key, or the secret store you keep it in); a new one would open none of them, so none was made';
    for (const args of [['serve'], ['consumer', 'show', '--email', 'ada@example.com']]) {
      const result = await runChild(args, env, { script: BIN });
      expect([result.code, result.stderr.trim()], args.join(' ')).to.deep.equal([1, expected]);
      expect(existsSync(file), `${args.join(' ')} made no master key`).to.equal(false);
    }
  });

  it('wraps the data keys: the key store opened with another master key reads no lead, and says why', async function () {
    const store = await openEventStore({ dataDir: dir.path });
    await store.append(leadStream(1), [{ type: 'LeadReceived', data: receivedData(), metadata: {} }]);
    await store.close();
    const other = join(dir.path, 'other.key');
    writeFileSync(other, Buffer.alloc(32, 7), { mode: 0o600 });
    const wrong = await openEventStore({ dataDir: dir.path, masterKeyFile: other });
    const wrongKeys = await openPersonalDataKeys({ dataDir: dir.path, masterKeyFile: other });
    try {
      const [event] = await wrong.readStream(leadStream(1));
      const error = await rejection(Promise.resolve().then(() => openLead(wrongKeys, 1, (event!.data as LeadReceived['data']).lead!)));
      expect(error.message).to.match(/^data key [0-9a-f]{32} does not open with the master key in \S+other\.key \(LEADPOST_MASTER_KEY_FILE is not the key it was stored with; after `leadpost master-key rotate` it must name the new key file that command wrote\)$/);
    } finally {
      await wrongKeys.close();
      await wrong.close();
    }
  });
});

function receivedData() {
  const lead = {
    first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com', mobile: '+12135550143', mobile_national: '2135550143',
    zip: '90210', zip4: null, accident_state: 'CA', certificate_url: 'https://cert.trustedform.com/x', certificate_id: 'x', sid: 's', s1: null, test: false,
  };
  return { lead_id: 1, supplier: 'sup-1', key_id: 'k', sid: 's', s1: null, accident_state: 'CA', test: false, lead, received_at: '2026-01-05T17:00:00.000Z' };
}

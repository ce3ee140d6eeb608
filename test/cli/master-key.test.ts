import { expect } from 'chai';
import { chmodSync, existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KEYS_FILE } from '../../src/personal-data/embedded-key-store.js';
import { openKeyStore } from '../../src/personal-data/index.js';
import type { DataKeyStore } from '../../src/personal-data/key-store.js';
import { createMasterKey, loadMasterKey } from '../../src/personal-data/master-key.js';
import { rotateMasterKey, surveyKeyStore } from '../../src/personal-data/master-key-rotation.js';
import { runChild } from '../support/child.js';
import { TestService, validLead } from '../support/service.js';
import { storedKeyRows } from '../support/key-rows.js';
import { tempDir } from '../support/tmp.js';

// `leadpost master-key rotate`, in a process of its own as an operator runs it, on a data dir a
// real service posted leads into: afterwards a service started with the new key reads every lead
// whole, an erased lead stays erased and duplicates are still caught; one started with the old key
// is refused, naming the key file.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const rotate = (to: string, env: Record<string, string>, json = true) => runChild(['master-key', 'rotate', '--to', to, ...(json ? ['--json'] : [])], env, { script: BIN });

interface Posted {
  readonly leadId: number;
  readonly email: string;
  readonly mobile: string;
}

describe('leadpost master-key rotate', function () {
  this.timeout(120_000);
  let dir: ReturnType<typeof tempDir>;
  let posted: Posted[];
  let erased: Posted;
  beforeEach(async function () {
    dir = tempDir('master-key-rotate');
    const svc = await TestService.start({ dataDir: dir.path });
    try {
      const supplier = await svc.key('supplier', 'sup-1');
      const admin = await svc.key('admin', 'root');
      posted = [];
      for (let i = 0; i < 6; i++) {
        const lead = validLead();
        const reply = await svc.post(lead, { 'x-api-key': supplier });
        expect(reply.status, reply.text).to.equal(201);
        posted.push({ leadId: reply.body.lead_id as number, email: String(lead.email), mobile: String(lead.mobile) });
      }
      erased = posted.pop()!;
      const erasure = await svc.post({ email: erased.email }, { 'x-api-key': admin }, '/functions/erasures');
      expect(erasure.status, erasure.text).to.equal(201);
    } finally {
      await svc.stop();
    }
  });
  afterEach(() => dir.remove());

  /** A service on the data dir with `masterKeyFile`: every lead reads back whole, the erased one erased, a repeat is a duplicate. */
  async function readsEveryLead(masterKeyFile: string): Promise<void> {
    const svc = await TestService.start({ dataDir: dir.path, env: { LEADPOST_MASTER_KEY_FILE: masterKeyFile } });
    try {
      const admin = await svc.key('admin', 'root-2');
      const supplier = await svc.key('supplier', 'sup-1');
      for (const lead of posted) {
        const view = await svc.request('GET', `/functions/leads/${lead.leadId}`, { 'x-api-key': admin });
        expect(view.status, view.text).to.equal(200);
        const fields = (view.body.lead as { lead: Record<string, unknown> }).lead;
        expect(fields, `lead ${lead.leadId}`).to.include({ email: lead.email, first_name: 'Ada', last_name: 'Lovelace' });
        expect(fields).to.not.have.property('erased');
      }
      const gone = await svc.request('GET', `/functions/leads/${erased.leadId}`, { 'x-api-key': admin });
      expect(gone.status, gone.text).to.equal(200);
      const goneFields = (gone.body.lead as { lead: Record<string, unknown> }).lead;
      expect(goneFields).to.include({ erased: true });
      expect(gone.text).to.not.include(erased.email);
      // The contact-hashes secret is the same one: a repeat of a lead is still caught.
      const repeat = await svc.post(validLead({ email: posted[0]!.email }), { 'x-api-key': supplier });
      expect([repeat.status, repeat.body.code], repeat.text).to.deep.equal([409, 'DUPLICATE']);
    } finally {
      await svc.stop();
    }
  }

  it('wraps every data key and secret under a new key file; a service with it reads every lead, one with the old key is refused', async function () {
    const before = storedKeyRows(dir.path);
    const oldFile = join(dir.path, 'master.key');
    const oldKey = readFileSync(oldFile);
    const newFile = join(dir.path, 'rotated.key');
    const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path });
    expect(result.code, result.stderr).to.equal(0);
    const secrets = [...before.keys()].filter((name) => name.startsWith('secret ')).length;
    expect(result.lines.map((line) => JSON.parse(line) as unknown)).to.deep.equal([{ data_keys: before.size - secrets, secrets, master_key_file: newFile, resumed: false }]);
    expect(secrets).to.be.greaterThan(0);
    expect(statSync(newFile).mode & 0o777).to.equal(0o600);
    const newKey = readFileSync(newFile);
    expect(newKey.length).to.equal(32);
    expect(newKey.equals(oldKey)).to.equal(false);
    expect(readFileSync(oldFile).equals(oldKey), 'the old key file is left to the operator').to.equal(true);

    const after = storedKeyRows(dir.path);
    expect([...after.keys()].sort()).to.deep.equal([...before.keys()].sort());
    const onDisk = [KEYS_FILE, `${KEYS_FILE}-wal`].map((f) => join(dir.path, f)).filter(existsSync).map((f) => readFileSync(f));
    for (const [name, wrapped] of before) {
      expect(after.get(name)!.equals(wrapped), `${name} wrapped anew`).to.equal(false);
      expect(onDisk.some((bytes) => bytes.includes(wrapped)), `${name}'s old wrapping is gone from keys.db`).to.equal(false);
    }

    const served = runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, { script: BIN });
    const deadline = setTimeout(() => served.process.kill('SIGKILL'), 30_000);
    const refused = await served.finally(() => clearTimeout(deadline));
    expect([refused.code, refused.signal]).to.deep.equal([1, null]);
    expect(refused.stderr.trim()).to.equal(
      `leadpost: the secret contact-hashes does not open with the master key in ${oldFile} (LEADPOST_MASTER_KEY_FILE is not the key it was stored with; ` +
        'after `leadpost master-key rotate` it must name the new key file that command wrote)',
    );

    await readsEveryLead(newFile);
  });

  it('says what it did and what to do next, naming no personal data', async function () {
    const newFile = join(dir.path, 'rotated.key');
    const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path }, false);
    expect(result.code, result.stderr).to.equal(0);
    const text = result.lines.join('\n');
    expect(text).to.match(new RegExp(`^wrapped \\d+ data key\\(s\\) and \\d+ secret\\(s\\) under the new master key in ${newFile}\n`));
    expect(text).to.contain(`next, on every instance: point LEADPOST_MASTER_KEY_FILE at ${newFile} (or move it over ${join(dir.path, 'master.key')}), then start it`);
    expect(text).to.contain('then destroy the old master key file, and the master keys of backups taken before now');
    for (const lead of [...posted, erased]) expect(text).to.not.contain(lead.email).and.not.contain(lead.mobile);
  });

  it('a rotation stopped part-way is finished by running it again with the same --to; a --to that exists and opens nothing is refused', async function () {
    // Stopped part-way: the new key made, some entries wrapped under it (as a killed run on
    // MongoDB, which has no transaction here, leaves them).
    const newFile = join(dir.path, 'rotated.key');
    const newKey = await createMasterKey(newFile);
    const oldKey = await loadMasterKey(join(dir.path, 'master.key'));
    const store = await openKeyStore({ dataDir: dir.path });
    let turn = 0;
    const halfway: DataKeyStore = Object.assign(Object.create(store) as DataKeyStore, {
      rewrap: (rewrap: Parameters<DataKeyStore['rewrap']>[0]) => store.rewrap((entry) => (turn++ % 2 === 0 ? rewrap(entry) : undefined)),
    });
    await rotateMasterKey(halfway, oldKey, newKey);
    const mixed = await surveyKeyStore(store, oldKey, newKey);
    await store.close();
    expect(mixed.underOld).to.be.greaterThan(0);
    expect(mixed.underNew).to.be.greaterThan(0);

    const unrelated = join(dir.path, 'unrelated.key');
    await createMasterKey(unrelated);
    const refusedBefore = storedKeyRows(dir.path);
    const refused = await rotate(unrelated, { LEADPOST_DATA_DIR: dir.path });
    expect(refused.code).to.equal(1);
    expect(refused.stderr.trim()).to.equal(
      `leadpost master-key rotate: ${unrelated} exists and no entry of the key store opens with it, so it is not this key store's rotation left half-done: name a file that does not exist, or remove it if it is the key of a rotation stopped before it wrapped anything (nothing was changed)`,
    );
    const unchanged = storedKeyRows(dir.path);
    for (const [name, wrapped] of refusedBefore) expect(unchanged.get(name)!.equals(wrapped), name).to.equal(true);

    const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path });
    expect(result.code, result.stderr).to.equal(0);
    const dataKeys = [...refusedBefore.keys()].filter((name) => !name.startsWith('secret ')).length;
    expect(JSON.parse(result.lines[0]!)).to.deep.equal({ data_keys: dataKeys, secrets: refusedBefore.size - dataKeys, master_key_file: newFile, resumed: true });
    expect(readFileSync(newFile).equals(newKey), 'the half-done rotation\'s key is kept').to.equal(true);
    await readsEveryLead(newFile);
  });

  it('is refused while a service runs on the data dir, making no key file', async function () {
    const svc = await TestService.start({ dataDir: dir.path });
    try {
      const newFile = join(dir.path, 'rotated.key');
      const before = storedKeyRows(dir.path);
      const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path });
      expect(result.code).to.equal(1);
      expect(result.stderr).to.match(/^leadpost master-key rotate: a service is running on this data dir \(.+ holds the projector-leads-v\d+ lease\): stop every instance of it, then run this again\n$/);
      expect(existsSync(newFile)).to.equal(false);
      const after = storedKeyRows(dir.path);
      for (const [name, wrapped] of before) expect(after.get(name)!.equals(wrapped), name).to.equal(true);
    } finally {
      await svc.stop();
    }
  });

  it('is refused while an instance serving only the API runs, which holds none of the role leases', async function () {
    const svc = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'api' } });
    const newFile = join(dir.path, 'rotated.key');
    try {
      const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path });
      expect(result.code).to.equal(1);
      expect(result.stderr).to.match(/^leadpost master-key rotate: a service is running on this data dir \(instance .+:\d+:[0-9a-f]+ is running\): stop every instance of it, then run this again\n$/);
      expect(existsSync(newFile)).to.equal(false);
    } finally {
      await svc.stop();
    }
    // Stopped, it gave its lease up: the rotation runs at once.
    const result = await rotate(newFile, { LEADPOST_DATA_DIR: dir.path });
    expect(result.code, result.stderr).to.equal(0);
  });

  it('a --to that exists and is no master key is named as --to, not as the LEADPOST_MASTER_KEY_FILE in use (exit 1), changing nothing', async function () {
    const before = storedKeyRows(dir.path);
    const short = join(dir.path, 'short.key');
    writeFileSync(short, 'ten bytes!', { mode: 0o600 });
    const shared = join(dir.path, 'shared.key');
    writeFileSync(shared, Buffer.alloc(32, 7), { mode: 0o644 });
    chmodSync(shared, 0o644);
    const folder = join(dir.path, 'folder.key');
    mkdirSync(folder);
    const cases: Array<[string, string]> = [
      [folder, 'is not a file'],
      [short, 'must hold exactly 32 bytes, not 10'],
      [shared, 'may be read or written by others than its owner (mode 0644): make it 0600 or 0400'],
    ];
    for (const [to, why] of cases) {
      const result = await rotate(to, { LEADPOST_DATA_DIR: dir.path });
      expect(result.code, to).to.equal(1);
      expect(result.stderr, to).to.equal(`leadpost: the master key file ${to} (--to) ${why}\n`);
    }
    const after = storedKeyRows(dir.path);
    for (const [name, wrapped] of before) expect(after.get(name)!.equals(wrapped), name).to.equal(true);
  });

  it('refuses bad usage (exit 2) and a --to naming the key in use (exit 1), changing nothing', async function () {
    for (const args of [['master-key'], ['master-key', 'rotate'], ['master-key', 'turn', '--to', 'x.key'], ['master-key', 'rotate', '--to', 'a', '--to', 'b']]) {
      const result = await runChild(args, { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      expect(result.code, args.join(' ')).to.equal(2);
      expect(result.stderr, args.join(' ')).to.match(/^leadpost master-key: .+\n\nusage: leadpost master-key rotate --to NEW_FILE/);
    }
    const same = await rotate(join(dir.path, 'master.key'), { LEADPOST_DATA_DIR: dir.path });
    expect(same.code).to.equal(1);
    expect(same.stderr).to.equal('leadpost master-key rotate: --to names the master key file in use (LEADPOST_MASTER_KEY_FILE); name a new file\n');
  });
});

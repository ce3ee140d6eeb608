import { expect } from 'chai';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runKeysCommand } from '../../src/cli/keys.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { KeyRing } from '../../src/keys/key-ring.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

const CHILD = fileURLToPath(new URL('./keys-cli-child.js', import.meta.url));
const KEY = /^lp_([0-9a-z]{12})_[A-Za-z0-9_-]{43}$/;

interface Run {
  code: number;
  out: string[];
  err: string;
}

describe('leadpost keys', function () {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('keys-cli')));
  afterEach(() => dir.remove());

  async function keys(args: string[], env: NodeJS.ProcessEnv = {}): Promise<Run> {
    let out = '';
    let err = '';
    const io = { out: { write: (t: string) => (out += t) }, err: { write: (t: string) => (err += t) } };
    const code = await runKeysCommand(args, io, { LEADPOST_DATA_DIR: dir.path, ...env });
    return { code, out: out.split('\n').slice(0, -1), err };
  }
  const json = <T>(run: Run): T => {
    expect(run.out, run.err).to.have.length(1);
    return JSON.parse(run.out[0]!) as T;
  };

  it('create --json prints exactly one line {id, key, role, name}, and warns on stderr', async function () {
    const run = await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']);
    expect(run.code).to.equal(0);
    const created = json<Record<string, string>>(run);
    expect(Object.keys(created)).to.deep.equal(['id', 'key', 'role', 'name']);
    expect(created.key).to.match(KEY);
    expect(KEY.exec(created.key!)![1]).to.equal(created.id);
    expect(created).to.include({ role: 'supplier', name: 'acme' });
    expect(run.err).to.contain('will not be shown again');
  });

  it('create without --json prints the key once with the warning', async function () {
    const run = await keys(['create', '--role=analyst', '--name=bi.team']);
    expect(run.code).to.equal(0);
    const keyLines = run.out.filter((l) => /lp_[0-9a-z]{12}_/.test(l));
    expect(keyLines).to.have.length(1);
    expect(keyLines[0]!.trim()).to.match(KEY);
    expect(run.out.join('\n')).to.contain('will not be shown again');
  });

  it('list shows id, role, name, status and issued_at, never the key or its hash', async function () {
    const a = json<{ id: string; key: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    const b = json<{ id: string; key: string }>(await keys(['create', '--role', 'admin', '--name', 'ops', '--json']));
    expect((await keys(['revoke', b.id])).code).to.equal(0);
    const rotated = json<{ id: string }>(await keys(['rotate', a.id, '--json']));

    const listed = await keys(['list', '--json']);
    const rows = json<Array<Record<string, unknown>>>(listed);
    expect(rows.map((r) => [r.id, r.role, r.name, r.status])).to.deep.equal([
      [a.id, 'supplier', 'acme', 'expiring'],
      [b.id, 'admin', 'ops', 'revoked'],
      [rotated.id, 'supplier', 'acme', 'active'],
    ]);
    for (const row of rows) expect(row.issued_at).to.match(/^\d{4}-\d\d-\d\dT.*Z$/);
    expect(rows[0]).to.include({ replaced_by: rotated.id });
    const store = await EmbeddedEventStore.open(dir.path);
    const hashes = (await store.readStream('api-keys')).flatMap((e) => ((e.data as { hash?: string }).hash ? [(e.data as { hash: string }).hash] : []));
    await store.close();
    expect(hashes).to.have.length(3);
    const table = await keys(['list']);
    expect(table.out[0]).to.match(/^ID\s+ROLE\s+NAME\s+STATUS\s+ISSUED_AT/);
    expect(table.out).to.have.length(4);
    for (const text of [listed.out.join('\n'), table.out.join('\n')]) {
      for (const secret of [a.key, b.key, ...hashes]) expect(text).not.to.contain(secret);
      expect(text).not.to.contain('lp_');
    }
  });

  it('revoke twice succeeds; an unknown id exits 1 naming it', async function () {
    const { id } = json<{ id: string }>(await keys(['create', '--role', 'buyer', '--name', 'acme-law', '--json']));
    expect(await keys(['revoke', id])).to.deep.include({ code: 0, out: [`Revoked buyer key ${id} for acme-law.`] });
    expect(await keys(['revoke', id])).to.deep.include({ code: 0, out: [`Key ${id} was already revoked.`] });
    const unknown = await keys(['revoke', '000000000000']);
    expect(unknown.code).to.equal(1);
    expect(unknown.err).to.contain("no key with id '000000000000'");
    expect((await keys(['rotate', '000000000000'])).code).to.equal(1);
  });

  it('rotate with a bad --grace (negative, not a number, a fraction, too large, empty) says what --grace takes, in one line, exit 2, and rotates nothing', async function () {
    const a = json<{ id: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    const before = await keys(['list', '--json']);
    for (const grace of ['-1', '-1.5', '-0', 'abc', '1.5x', '1.5', '1e3', '0x10', '+5', ' 5', '', '31536001', '99999999999999999999']) {
      for (const args of [['rotate', a.id, '--grace', grace], ['rotate', a.id, `--grace=${grace}`, '--json']]) {
        const run = await keys(args);
        expect(run.code, JSON.stringify(args)).to.equal(2);
        expect(run.err.split('\n')[0], JSON.stringify(args)).to.equal('leadpost keys: --grace must be a whole number of seconds from 0 to 31536000');
        expect(run.out).to.deep.equal([]);
      }
    }
    expect(await keys(['list', '--json'])).to.deep.equal(before);
    // The bounds themselves are taken.
    expect((await keys(['rotate', a.id, '--grace', '31536000'])).code).to.equal(0);
  });

  it('rotate --json adds `replaces`; the grace comes from --grace, else KEY_ROTATION_GRACE_SECONDS', async function () {
    const a = json<{ id: string; key: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    const run = await keys(['rotate', a.id, '--json'], { KEY_ROTATION_GRACE_SECONDS: '0' });
    const rotated = json<Record<string, string>>(run);
    expect(Object.keys(rotated)).to.deep.equal(['id', 'key', 'role', 'name', 'replaces']);
    expect(rotated).to.include({ role: 'supplier', name: 'acme', replaces: a.id });
    expect(rotated.key).to.match(KEY);
    expect(rotated.id).not.to.equal(a.id);

    const b = json<{ id: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    const before = Date.now();
    expect((await keys(['rotate', b.id, '--grace', '3600'], { KEY_ROTATION_GRACE_SECONDS: '0' })).code).to.equal(0);
    const rows = json<Array<{ id: string; status: string; expires_at: string }>>(await keys(['list', '--json']));
    const byId = new Map(rows.map((r) => [r.id, r]));
    expect(byId.get(a.id)!.status).to.equal('expired');
    expect(byId.get(b.id)!.status).to.equal('expiring');
    expect(Date.parse(byId.get(b.id)!.expires_at) - before).to.be.within(3_599_000, 3_601_000);

    const c = json<{ id: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    expect((await keys(['rotate', c.id])).code).to.equal(0);
    const defaulted = json<Array<{ id: string; expires_at: string }>>(await keys(['list', '--json'])).find((r) => r.id === c.id)!;
    expect(Date.parse(defaulted.expires_at) - Date.now()).to.be.within(86_390_000, 86_400_000);
  });

  it('bad usage exits 2 with a message naming the problem, and touches no store', async function () {
    const data = join(dir.path, 'untouched');
    const cases: Array<[string[], string, NodeJS.ProcessEnv?]> = [
      [[], 'missing command'],
      [['frobnicate'], 'unknown command: the commands are create, list, revoke and rotate'],
      [['create', '--name', 'acme'], '--role'],
      [['create', '--role', 'supplier'], '--name'],
      [['create', '--role', 'root', '--name', 'acme'], '--role must be one of supplier, buyer, analyst, admin'],
      [['create', '--role', 'supplier', '--name', 'has space'], '--name'],
      [['create', '--role', 'supplier', '--name', 'x'.repeat(65)], '--name'],
      [['create', '--role', 'supplier', '--name', 'acme', '--colour'], 'unknown option --colour'],
      [['create', '--role', 'supplier', '--name', 'acme', 'extra'], 'create takes no argument besides its options'],
      [['list', '--role', 'admin'], 'unknown option --role'],
      [['revoke'], 'exactly one key ID'],
      [['revoke', 'aaaaaaaaaaaa', 'bbbbbbbbbbbb'], 'exactly one key ID'],
      [['revoke', 'NOT-AN-ID'], 'ID must be a key ID (12 lower-case letters or digits)'],
      [['rotate', 'aaaaaaaaaaaa', '--grace', 'soon'], '--grace'],
      [['rotate', 'aaaaaaaaaaaa', '--grace', '-5'], '--grace'],
      [['rotate', 'aaaaaaaaaaaa'], 'KEY_ROTATION_GRACE_SECONDS', { KEY_ROTATION_GRACE_SECONDS: '1.5' }],
    ];
    for (const [args, message, env] of cases) {
      const run = await keys(args, { LEADPOST_DATA_DIR: data, ...env });
      expect(run.code, args.join(' ')).to.equal(2);
      expect(run.err, args.join(' ')).to.contain(message);
      // Named, never quoted (a value may be a contact pasted in the wrong place), then the usage.
      expect(run.err, args.join(' ')).to.not.contain('frobnicate').and.not.contain('extra').and.not.contain('NOT-AN-ID');
      expect(run.err, args.join(' ')).to.match(/^leadpost keys: .+\n\nusage: leadpost keys <command>\n/);
      expect(run.out).to.deep.equal([]);
    }
    expect(existsSync(data)).to.equal(false);
  });

  describe('create --role buyer checks the buyer id against the routing file', function () {
    let routingFile: string;
    beforeEach(() => {
      routingFile = join(dir.path, 'routing.json');
      writeFileSync(routingFile, JSON.stringify({ buyers: [{ id: 'acme-law', price: 10 }, { id: 'lone-star', price: 5 }], buckets: [{ id: 'unsold', default: true }] }));
    });

    it('an id the file does not have exits 1 naming the known buyer ids, and creates nothing', async function () {
      const data = join(dir.path, 'untouched');
      const run = await keys(['create', '--role', 'buyer', '--name', 'acme-lawyers', '--json'], { LEADPOST_DATA_DIR: data, LEADPOST_ROUTING_FILE: routingFile });
      expect(run.code).to.equal(1);
      expect(run.out).to.deep.equal([]);
      expect(run.err).to.contain("no buyer 'acme-lawyers'").and.to.contain(routingFile).and.to.contain('acme-law, lone-star').and.to.contain('--force');
      expect(existsSync(data), 'no data dir made').to.equal(false);
    });

    it('an id the file has is created; --force creates one it does not have yet', async function () {
      const env = { LEADPOST_ROUTING_FILE: routingFile };
      expect(json<{ role: string; name: string }>(await keys(['create', '--role', 'buyer', '--name', 'lone-star', '--json'], env))).to.include({ role: 'buyer', name: 'lone-star' });
      expect(json<{ role: string; name: string }>(await keys(['create', '--role', 'buyer', '--name', 'new-buyer', '--force', '--json'], env))).to.include({ name: 'new-buyer' });
      // Only buyer ids are checked: a supplier id is the supplier's own choice.
      expect((await keys(['create', '--role', 'supplier', '--name', 'anyone', '--json'], env)).code).to.equal(0);
      const rows = json<Array<{ name: string }>>(await keys(['list', '--json']));
      expect(rows.map((r) => r.name)).to.deep.equal(['lone-star', 'new-buyer', 'anyone']);
    });

    it('without LEADPOST_ROUTING_FILE the default config/routing.json is read; an unreadable file exits 1 pointing at --force', async function () {
      const unset = await keys(['create', '--role', 'buyer', '--name', 'nobody-by-that-name']);
      expect(unset.code).to.equal(1);
      expect(unset.err).to.contain(join('config', 'routing.json')).and.to.contain('nationwide-leads');
      const missing = join(dir.path, 'no-such-routing.json');
      const run = await keys(['create', '--role', 'buyer', '--name', 'acme-law'], { LEADPOST_ROUTING_FILE: missing });
      expect(run.code).to.equal(1);
      expect(run.err).to.contain(missing).and.to.contain('cannot read the file').and.to.contain('--force');
      expect((await keys(['create', '--role', 'buyer', '--name', 'acme-law', '--force'], { LEADPOST_ROUTING_FILE: missing })).code).to.equal(0);
    });
  });

  it('a pasted whole key is refused without echoing it', async function () {
    const { key } = json<{ key: string }>(await keys(['create', '--role', 'supplier', '--name', 'acme', '--json']));
    const run = await keys(['revoke', key]);
    expect(run.code).to.equal(2);
    expect(run.err).to.contain("not the key itself");
    expect(run.err).not.to.contain(key.slice(16));
  });

  it('--help prints the usage and exits 0', async function () {
    for (const args of [['--help'], ['-h'], ['help'], ['create', '--help']]) {
      const run = await keys(args);
      expect(run.code).to.equal(0);
      expect(run.out.join('\n')).to.contain('usage: leadpost keys').and.to.contain('rotate ID [--grace SECONDS]').and.to.contain('--force');
    }
  });

  describe('from another process', function () {
    it('a key created and then revoked by the CLI takes effect in an open KeyRing within 1 s', async function () {
      const store = await EmbeddedEventStore.open(dir.path);
      const ring = await KeyRing.open(store);
      const env = { LEADPOST_DATA_DIR: dir.path, EVENTSTORE_URL: '' };
      try {
        const child = runChild(['create', '--role', 'supplier', '--name', 'acme', '--json'], env, { script: CHILD });
        await child.until('{', 1);
        const created = JSON.parse(child.lines[0]!) as { id: string; key: string };
        const since = Date.now();
        while (ring.authenticate(created.key) === null && Date.now() - since < 1000) await new Promise((r) => setTimeout(r, 10));
        expect(ring.authenticate(created.key)).to.deep.equal({ keyId: created.id, role: 'supplier', name: 'acme' });
        expect(Date.now() - since).to.be.below(1000);
        expect((await child).code).to.equal(0);

        const revoke = runChild(['revoke', created.id], env, { script: CHILD });
        await revoke.until('Revoked', 1);
        const revokedAt = Date.now();
        while (ring.authenticate(created.key) !== null && Date.now() - revokedAt < 1000) await new Promise((r) => setTimeout(r, 10));
        expect(ring.authenticate(created.key)).to.equal(null);
        expect(Date.now() - revokedAt).to.be.below(1000);
        expect((await revoke).code).to.equal(0);
      } finally {
        await ring.close();
        await store.close();
      }
    });

    it('exits with the command code: 2 for bad usage, 1 for an unknown id', async function () {
      const env = { LEADPOST_DATA_DIR: dir.path, EVENTSTORE_URL: '' };
      const bad = await runChild(['create', '--role', 'nobody', '--name', 'x'], env, { script: CHILD });
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.contain('--role must be one of');
      // A store a service has recorded in (revoke refuses a data dir without one).
      expect((await runChild(['create', '--role', 'supplier', '--name', 'x'], env, { script: CHILD })).code).to.equal(0);
      const unknown = await runChild(['revoke', 'ffffffffffff'], env, { script: CHILD });
      expect(unknown.code).to.equal(1);
      expect(unknown.stderr).to.contain("no key with id 'ffffffffffff'");
    });
  });
});

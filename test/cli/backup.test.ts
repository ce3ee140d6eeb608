import { expect } from 'chai';
import Database from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import sinon from 'sinon';
import { runBackupCommand } from '../../src/cli/backup.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { deliveryRouting } from '../delivery/harness.js';
import { runChild } from '../support/child.js';
import { type Reply, TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// `leadpost backup` against a service under posts, in a process of its own (as an operator runs
// it): a service started on a copy of the backup serves every lead answered before the backup
// began, personal data included, and each lead answered meanwhile whole or not at all.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const backup = (args: string[], env: Record<string, string>) => runChild(['backup', ...args], env, { script: BIN });

interface Posted {
  readonly leadId: number;
  readonly email: string;
}

describe('leadpost backup', function () {
  this.timeout(120_000);

  it('copies the embedded stores while leads are posted; a service on the copy has every lead answered before, with its personal data', async function () {
    const live = tempDir('backup-live');
    const target = join(tempDir('backup-target').path, 'copy');
    const restored = tempDir('backup-restored');
    let svc: TestService | undefined = await TestService.start({ dataDir: live.path });
    try {
      const supplier = await svc.key('supplier', 'sup-1');
      const admin = await svc.key('admin', 'root');
      const post = async (into: Posted[]) => {
        const lead = validLead();
        const reply: Reply = await svc!.post(lead, { 'x-api-key': supplier });
        expect(reply.status, reply.text).to.equal(201);
        into.push({ leadId: reply.body.lead_id as number, email: String(lead.email) });
      };
      const before: Posted[] = [];
      for (let i = 0; i < 20; i++) await post(before);

      // Posts go on, several at a time, for as long as the backup runs.
      const during: Posted[] = [];
      let copying = true;
      const posting = Promise.all(Array.from({ length: 4 }, async () => {
        while (copying) await post(during);
      }));
      const run = backup(['--to', target, '--with-master-key', '--json'], { LEADPOST_DATA_DIR: live.path });
      const result = await run.finally(() => (copying = false));
      await posting;
      expect(result.code, result.stderr).to.equal(0);
      const report = JSON.parse(result.lines.join('')) as { files: Array<{ file: string }>; events_head_commit: number; unused_keys_left_out: number };
      expect(report.files.map((f) => f.file)).to.deep.equal(['readmodels.db', 'events.db', 'keys.db', 'master.key']);
      expect(during.length, 'posts were answered while the backup ran').to.be.greaterThan(0);

      // One file a store, no WAL beside it, readable by the owner alone.
      expect(readdirSync(target).sort()).to.deep.equal(['events.db', 'keys.db', 'master.key', 'readmodels.db']);
      for (const file of readdirSync(target)) expect(statSync(join(target, file)).mode & 0o777, file).to.equal(0o600);
      const events = new Database(join(target, 'events.db'), { readonly: true });
      expect(events.pragma('integrity_check', { simple: true })).to.equal('ok');
      expect(events.prepare('SELECT max(position) FROM commits').pluck().get()).to.equal(report.events_head_commit);
      events.close();

      // The data keys of the copy's leads only: the pool's keys, stored ahead of use, are the keys
      // of leads posted after the backup, which the copy (and the master key) must never open.
      const keysCopy = new Database(join(target, 'keys.db'), { readonly: true });
      const copiedKeys = new Set(keysCopy.prepare('SELECT id FROM data_keys').pluck().all() as string[]);
      keysCopy.close();
      expect(report.unused_keys_left_out, 'the pool of unused keys').to.be.greaterThan(0);
      const later: Posted[] = [];
      await post(later);
      const keyOf = async (leadId: number) => ((await svc!.service.store.readStream(`lead-${leadId}`))[0]!.data as { lead: { pii: { key: string } } }).lead.pii.key;
      const laterKey = await keyOf(later[0]!.leadId);
      expect(copiedKeys.has(laterKey), 'the key of a lead posted after the backup').to.equal(false);
      for (const { leadId } of before) expect(copiedKeys.has(await keyOf(leadId)), `the key of lead ${leadId}`).to.equal(true);

      await svc.stop();
      svc = undefined;
      for (const file of readdirSync(target)) copyFileSync(join(target, file), join(restored.path, file));
      svc = await TestService.start({ dataDir: restored.path });
      await svc.service.projections.waitFor(await svc.service.store.headPosition());

      const found = async ({ leadId, email }: Posted) => {
        const view = await svc!.request('GET', `/functions/leads/${leadId}`, { 'x-api-key': supplier });
        if (view.status === 404) return false;
        expect(view.status, view.text).to.equal(200);
        const lookup = await svc!.post({ email }, { 'x-api-key': admin }, '/functions/consumers/lookup');
        expect(lookup.status, lookup.text).to.equal(200);
        const items = lookup.body.items as Array<Record<string, unknown>>;
        expect(items.map((item) => item.lead_id), `lead ${leadId}`).to.deep.equal([leadId]);
        // The lead's data key came with it: its personal data reads back in clear.
        expect(JSON.stringify(items[0]), `lead ${leadId}`).to.include(email);
        const stream = await svc!.service.store.readStream(`lead-${leadId}`);
        expect(stream.map((e) => e.type), `lead ${leadId} is whole`).to.include.members(['LeadReceived', 'LeadSold']);
        return true;
      };
      for (const lead of before) expect(await found(lead), `lead ${lead.leadId} answered before the backup`).to.equal(true);
      // A lead answered while the copy was taken is in it whole (found() checks) or not at all.
      for (const lead of during) await found(lead);
    } finally {
      await svc?.stop();
      for (const dir of [live, restored]) dir.remove();
    }
  });

  it('a service restored from the backup gives no lead id the live service may have given after it: the copy reserves the next ids', async function () {
    const live = tempDir('backup-ids-live');
    const target = join(tempDir('backup-ids-target').path, 'copy');
    const restored = tempDir('backup-ids-restored');
    // Blocks of 5 ids: the live service reserves new blocks after the backup, as any busy one does.
    const env = { LEAD_ID_BLOCK_SIZE: '5' };
    let svc: TestService | undefined = await TestService.start({ dataDir: live.path, env });
    try {
      const supplier = await svc.key('supplier', 'sup-ids');
      const postedIds = async (count: number) => {
        const ids: number[] = [];
        for (let i = 0; i < count; i++) {
          const reply = await svc!.post(validLead(), { 'x-api-key': supplier });
          expect(reply.status, reply.text).to.equal(201);
          ids.push(reply.body.lead_id as number);
        }
        return ids;
      };
      await postedIds(3);
      const run = await backup(['--to', target, '--with-master-key', '--json'], { LEADPOST_DATA_DIR: live.path });
      expect(run.code, run.stderr).to.equal(0);
      const report = JSON.parse(run.lines.join('')) as { restored_lead_ids_from: number };
      // Given after the backup, sold, maybe delivered: these ids are the live service's for good.
      const afterBackup = await postedIds(12);
      await svc.stop();
      svc = undefined;

      for (const file of readdirSync(target)) copyFileSync(join(target, file), join(restored.path, file));
      svc = await TestService.start({ dataDir: restored.path, env });
      const [first] = await postedIds(1);
      expect(first).to.equal(report.restored_lead_ids_from);
      expect(first).to.be.greaterThan(Math.max(...afterBackup));
      // The copy's events are whole: the restored store reads its leads and its reservations.
      expect((await svc.service.store.readStream('lead-1')).map((e) => e.type)).to.include('LeadReceived');
    } finally {
      await svc?.stop();
      for (const dir of [live, restored]) dir.remove();
    }
  });

  it('with --with-master-key, refuses a master key that does not open the keys.db it copied, and says a missing one before copying anything', async function () {
    const live = tempDir('backup-key-live');
    const targets = tempDir('backup-key-targets');
    const svc = await TestService.start({ dataDir: live.path });
    try {
      const supplier = await svc.key('supplier', 'sup-key');
      expect((await svc.post(validLead(), { 'x-api-key': supplier })).status).to.equal(201);
      // The old key left in a backup job's environment after a rotation: 32 bytes, owner-only, not the store's.
      const wrong = join(targets.path, 'old.key');
      writeFileSync(wrong, randomBytes(32), { mode: 0o600 });
      const mismatch = await backup(['--to', join(targets.path, 'a'), '--with-master-key'], { LEADPOST_DATA_DIR: live.path, LEADPOST_MASTER_KEY_FILE: wrong });
      expect(mismatch.code).to.equal(1);
      expect(mismatch.stderr).to.match(/^leadpost backup: the master key in .*old\.key \(LEADPOST_MASTER_KEY_FILE\) does not open the keys\.db it copied/);
      expect(readdirSync(join(targets.path, 'a')).every((file) => file.endsWith('.partial'))).to.equal(true);

      const missing = await backup(['--to', join(targets.path, 'b'), '--with-master-key'], { LEADPOST_DATA_DIR: live.path, LEADPOST_MASTER_KEY_FILE: join(targets.path, 'gone.key') });
      expect(missing.code).to.equal(1);
      expect(missing.stderr).to.match(/^leadpost backup: the master key file .*gone\.key \(LEADPOST_MASTER_KEY_FILE\)/).and.not.match(/ENOENT/);
      expect(readdirSync(join(targets.path, 'b')), 'nothing copied').to.deep.equal([]);

      // The key that goes with the store: a backup.
      const right = await backup(['--to', join(targets.path, 'c'), '--with-master-key'], { LEADPOST_DATA_DIR: live.path });
      expect(right.code, right.stderr).to.equal(0);
    } finally {
      await svc.stop();
      for (const dir of [live, targets]) dir.remove();
    }
  });

  it('an erasure made after the backup, repeated with leadpost erase before the restored service starts, keeps the consumer from its buyer', async function () {
    // The backup holds the consumer's lead whole and its webhook delivery pending: a restored
    // service started first sends the buyer the lead, personal data included, after the buyer was
    // told it was erased. Repeated first, as the restore steps say, the erasure cancels it.
    let buyerUp = false;
    const endpoint = await BuyerEndpoint.start(() => (buyerUp ? 200 : 503), { keepIdleConnections: true });
    const live = tempDir('backup-erased-live');
    const copies = tempDir('backup-erased-target');
    const target = join(copies.path, 'copy');
    const restored = tempDir('backup-erased-restored');
    const routing = deliveryRouting(endpoint.url, { max_attempts: 20 });
    let svc: TestService | undefined = await TestService.start({ dataDir: live.path, routing, buyerCa: endpoint.cert });
    try {
      const supplier = await svc.key('supplier', 'sup-1');
      const admin = await svc.key('admin', 'root');
      const sold = async () => {
        const lead = validLead({ zip: '90210' });
        const reply = await svc!.post(lead, { 'x-api-key': supplier });
        expect(reply.body.code, reply.text).to.equal('SOLD');
        return { leadId: reply.body.lead_id as number, email: String(lead.email) };
      };
      const erased = await sold();
      const kept = await sold();
      const taken = await backup(['--to', target, '--with-master-key'], { LEADPOST_DATA_DIR: live.path });
      expect(taken.code, taken.stderr).to.equal(0);
      const erasure = await svc.post({ email: erased.email }, { 'x-api-key': admin }, '/functions/erasures');
      expect(erasure.status, erasure.text).to.equal(201);
      await svc.stop();
      svc = undefined;

      for (const file of readdirSync(target)) copyFileSync(join(target, file), join(restored.path, file));
      const routingFile = join(restored.path, 'routing.json');
      writeFileSync(routingFile, JSON.stringify(routing));
      const repeated = await runChild(['erase', '--email', erased.email], { LEADPOST_DATA_DIR: restored.path, LEADPOST_ROUTING_FILE: routingFile }, { script: BIN });
      expect(repeated.code, repeated.stderr).to.equal(0);

      const sentBefore = endpoint.received.length;
      buyerUp = true;
      svc = await TestService.start({ dataDir: restored.path, routing, buyerCa: endpoint.cert });
      // Both leads were pending in the backup: wait until each is settled, delivered or cancelled.
      const deliveryOf = async (leadId: number) => {
        const view = await svc!.request('GET', `/functions/leads/${leadId}`, { 'x-api-key': admin });
        return ((view.body.lead as { delivery?: { status?: string } } | undefined)?.delivery?.status) ?? 'none';
      };
      const started = Date.now();
      while (Date.now() - started < 30_000) {
        const statuses = [await deliveryOf(kept.leadId), await deliveryOf(erased.leadId)];
        if (statuses.every((status) => status === 'delivered' || status === 'cancelled')) break;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      expect(await deliveryOf(erased.leadId)).to.equal('cancelled');
      const sentAfter = endpoint.received.slice(sentBefore);
      expect(sentAfter.map((r) => r.body.lead_id), 'the other lead, pending in the backup, is delivered').to.include(kept.leadId);
      const view = await svc.request('GET', `/functions/leads/${erased.leadId}`, { 'x-api-key': admin });
      expect((view.body.lead as Record<string, unknown>).personal_data_erased, view.text).to.equal(true);
      for (const request of sentAfter) expect(request.text, 'no request after the restore carries the erased e-mail').not.to.include(erased.email);
    } finally {
      await svc?.stop();
      await endpoint.stop();
      for (const dir of [live, copies, restored]) dir.remove();
    }
  });

  it('a key revoked after the backup works again on the restored service until it is revoked again, which the restore steps do before the start', async function () {
    const live = tempDir('backup-revoked-live');
    const copies = tempDir('backup-revoked-target');
    const target = join(copies.path, 'copy');
    const restored = tempDir('backup-revoked-restored');
    let svc: TestService | undefined = await TestService.start({ dataDir: live.path });
    try {
      const leaked = await svc.key('supplier', 'sup-1');
      const taken = await backup(['--to', target, '--with-master-key'], { LEADPOST_DATA_DIR: live.path });
      expect(taken.code, taken.stderr).to.equal(0);
      await svc.revoke(leaked);
      await svc.service.keys.refresh();
      expect((await svc.request('GET', '/functions/me', { 'x-api-key': leaked })).status).to.equal(401);
      await svc.stop();
      svc = undefined;

      for (const file of readdirSync(target)) copyFileSync(join(target, file), join(restored.path, file));
      svc = await TestService.start({ dataDir: restored.path });
      expect((await svc.request('GET', '/functions/me', { 'x-api-key': leaked })).status, 'the revocation went with the restore').to.equal(200);
      await svc.stop();
      svc = undefined;

      const revoked = await runChild(['keys', 'revoke', leaked.split('_')[1]!], { LEADPOST_DATA_DIR: restored.path }, { script: BIN });
      expect(revoked.code, revoked.stderr).to.equal(0);
      svc = await TestService.start({ dataDir: restored.path });
      expect((await svc.request('GET', '/functions/me', { 'x-api-key': leaked })).status).to.equal(401);
    } finally {
      await svc?.stop();
      for (const dir of [live, copies, restored]) dir.remove();
    }
  });

  it('writes each copy owner-only from its first byte, also into an empty directory others may enter', async function () {
    const live = tempDir('backup-private');
    const target = tempDir('backup-open-dir');
    // Whatever the directory and the umask let others do, the copies hold sealed leads and wrapped keys.
    chmodSync(target.path, 0o777);
    const umask = process.umask(0);
    // The mode of each copy just after SQLite wrote it, before the command's own chmod.
    const modes: Record<string, number> = {};
    const prepare = sinon.stub(Database.prototype, 'prepare').callsFake(function (this: Database.Database, sql: string) {
      const statement = prepare.wrappedMethod.call(this, sql);
      if (!sql.startsWith('VACUUM INTO')) return statement;
      return { run: (destination: string) => Object.assign(statement.run(destination), { mode: (modes[destination.split('/').at(-1)!.replace(/\.partial$/, '')] = statSync(destination).mode & 0o777) }) } as unknown as Database.Statement;
    });
    try {
      const svc = await TestService.start({ dataDir: live.path });
      await svc.stop();
      const out: string[] = [];
      const io = { out: { write: (text: string) => out.push(text) }, err: { write: (text: string) => out.push(text) } };
      expect(await runBackupCommand(['--to', target.path], io, { LEADPOST_DATA_DIR: live.path }), out.join('')).to.equal(0);
      expect(modes).to.deep.equal({ 'readmodels.db': 0o600, 'events.db': 0o600, 'keys.db': 0o600 });
    } finally {
      prepare.restore();
      process.umask(umask);
      target.remove();
      live.remove();
    }
  });

  it('a backup that fails half-way leaves no file under a store\'s name, so no torn set is restored as a backup', async function () {
    // Killed or failed after events.db but before keys.db, it left events.db and readmodels.db: a
    // service restored from them made a new, empty key store, every lead unreadable.
    const live = tempDir('backup-torn');
    const target = tempDir('backup-torn-target');
    const prepare = sinon.stub(Database.prototype, 'prepare').callsFake(function (this: Database.Database, sql: string) {
      const statement = prepare.wrappedMethod.call(this, sql);
      if (!sql.startsWith('VACUUM INTO')) return statement;
      return {
        run: (destination: string) => {
          if (destination.includes('keys.db')) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
          return statement.run(destination);
        },
      } as unknown as Database.Statement;
    });
    try {
      const svc = await TestService.start({ dataDir: live.path });
      await svc.stop();
      const out: string[] = [];
      const io = { out: { write: (text: string) => out.push(text) }, err: { write: (text: string) => out.push(text) } };
      const failed = await runBackupCommand(['--to', target.path, '--with-master-key'], io, { LEADPOST_DATA_DIR: live.path }).then(() => null, (error: Error) => error);
      expect(failed?.message).to.equal(`the copy of ${join(live.path, 'keys.db')} to ${join(target.path, 'keys.db.partial')} failed: database or disk is full`);
      const left = readdirSync(target.path);
      expect(left.filter((file) => ['events.db', 'readmodels.db', 'keys.db', 'master.key'].includes(file)), left.join(' ')).to.deep.equal([]);
      expect(left).to.include.members(['readmodels.db.partial', 'events.db.partial']);
    } finally {
      prepare.restore();
      target.remove();
      live.remove();
    }
  });

  it('refuses a directory that is not empty, without writing to it, and says what a store on a server needs', async function () {
    const live = tempDir('backup-refused');
    try {
      const svc = await TestService.start({ dataDir: live.path });
      await svc.stop();
      const full = join(live.path, 'elsewhere');
      const target = tempDir('backup-full');
      writeFileSync(join(target.path, 'old.txt'), 'an earlier backup');
      const refused = await backup(['--to', target.path], { LEADPOST_DATA_DIR: live.path });
      expect(refused.code).to.equal(1);
      expect(refused.stderr).to.contain('is not empty');
      expect(readdirSync(target.path)).to.deep.equal(['old.txt']);
      target.remove();

      const usage = await backup([], { LEADPOST_DATA_DIR: live.path });
      expect(usage.code).to.equal(2);
      expect(usage.stderr.split('\n')[0]).to.equal('leadpost backup: --to DIR is required');

      const servers = await backup(['--to', full], { LEADPOST_DATA_DIR: live.path, EVENTSTORE_URL: 'esdb://127.0.0.1:1?tls=false', MONGODB_URL: 'mongodb://127.0.0.1:1' });
      expect(servers.code).to.equal(1);
      expect(servers.stderr).to.contain('nothing here is embedded');
      expect(readdirSync(live.path)).not.to.include('elsewhere');
    } finally {
      live.remove();
    }
  });
});

import { expect } from 'chai';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Consumer, consumers } from '../support/consumers.js';
import { runChild } from '../support/child.js';
import { TestService, leadWith } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// `leadpost erase --stdin` and `leadpost consumer show --stdin` take the consumer's contacts from
// standard input: given as --email and --mobile, they are on the command line, which every user of
// the machine reads (ps, /proc) and the shell keeps in its history, long after the erasure.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

const run = (Date.now() % 100_000) + 600_000;
const [CONSUMER] = consumers(run, [['Anastasia', 'Fotheringay']]) as [Consumer];

describe('leadpost erase and consumer show --stdin', function () {
  this.timeout(90_000);
  const dir = tempDir('erase-stdin');
  let svc: TestService;

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path });
  });

  after(async function () {
    await svc?.stop().catch(() => {});
    dir.remove();
  });

  /** The command with `input` on its standard input. */
  const withInput = (args: string[], input: string) => {
    const child = runChild(args, { LEADPOST_DATA_DIR: dir.path, LEADPOST_ROUTING_FILE: `${dir.path}/routing.json` }, { script: BIN });
    child.process.stdin!.end(input);
    return child;
  };

  it('shows and erases the consumer named on standard input, whose contacts are on no command line', async function () {
    const supplier = await svc.key();
    const posted = await svc.post(leadWith(CONSUMER.email, CONSUMER.mobile, { first_name: CONSUMER.first_name, last_name: CONSUMER.last_name }), { 'x-api-key': supplier });
    expect(posted.status, posted.text).to.equal(201);
    const contacts = JSON.stringify({ email: CONSUMER.email, mobile: CONSUMER.national });
    const shown = await withInput(['consumer', 'show', '--stdin', '--json'], contacts);
    expect(shown.code, shown.stderr).to.equal(0);
    expect(shown.lines.map((line) => (JSON.parse(line) as { lead: Record<string, unknown> }).lead)).to.deep.equal([
      (((await svc.request('GET', `/functions/leads/${posted.body.lead_id as number}`, { 'x-api-key': await svc.key('admin', 'root') })).body.lead as { lead: unknown }).lead),
    ]);
    const erased = await withInput(['erase', '--stdin', '--suppress', '--json'], contacts);
    expect(erased.code, erased.stderr).to.equal(0);
    expect(JSON.parse(erased.lines[0]!)).to.include({ created: true, suppressed: true, leads_erased: 1 });
    const again = await svc.post(leadWith(CONSUMER.email, CONSUMER.mobile), { 'x-api-key': supplier });
    expect(again.body.code, again.text).to.equal('SUPPRESSED');
  });

  it('refuses what is not one JSON object of e-mail and mobile (exit 2), never repeating it', async function () {
    const sent = [
      [`${CONSUMER.email}\n`, '--stdin takes one JSON object'],
      [`{"email": "${CONSUMER.email}"`, '--stdin takes one JSON object'],
      [JSON.stringify({ email: CONSUMER.email, [CONSUMER.mobile]: 1 }), '--stdin: a field named with other characters'],
      [JSON.stringify({ email: `${CONSUMER.first_name}-at-nowhere` }), '--stdin: email is not a valid e-mail address'],
      ['{}', '--stdin: "email" or "mobile" is required'],
    ] as const;
    for (const [input, said] of sent) {
      const refused = await withInput(['erase', '--stdin'], input);
      expect(refused.code, input).to.equal(2);
      expect(refused.stderr, input).to.include(`leadpost erase: ${said}`);
      for (const value of [CONSUMER.email, CONSUMER.mobile, CONSUMER.national, CONSUMER.first_name]) expect(refused.stderr, input).not.to.include(value);
    }
    const both = await withInput(['consumer', 'show', '--stdin', '--email', CONSUMER.email], '{}');
    expect(both.code).to.equal(2);
    expect(both.stderr).to.include('--stdin takes the e-mail and mobile from standard input').and.not.include(CONSUMER.email);
  });

  it('keys.db held locked by another process: an erasure exits 1 naming the file and what to do, not SQLite\'s bare "database is locked"; showing the consumer needs no lock', async function () {
    // A consumer with a lead: erasing it destroys a key.
    const [held] = consumers(run + 1, [['Bartholomew', 'Quarrington']]) as [Consumer];
    const posted = await svc.post(leadWith(held.email, held.mobile), { 'x-api-key': await svc.key() });
    expect(posted.status, posted.text).to.equal(201);
    const other = new Database(join(dir.path, 'keys.db'));
    try {
      other.exec('BEGIN IMMEDIATE');
      const contacts = JSON.stringify({ email: held.email });
      const [erasing, showing] = await Promise.all([withInput(['erase', '--stdin'], contacts), withInput(['consumer', 'show', '--stdin'], contacts)]);
      // Showing a consumer only reads keys (the contact-hashing secret, made before): the lock does not stop it.
      expect(showing.code, showing.stderr).to.equal(0);
      // Erasing destroys keys: that needs the lock.
      expect(erasing.code, erasing.stderr).to.equal(1);
      expect(erasing.stderr).to.equal(`leadpost: ${join(dir.path, 'keys.db')} is locked by another process (database is locked): try again once it is free\n`);
      expect(erasing.lines).to.deep.equal([]);
    } finally {
      other.close();
    }
    const shown = await withInput(['consumer', 'show', '--stdin'], JSON.stringify({ email: CONSUMER.email }));
    expect(shown.code, shown.stderr).to.equal(0);
  });
});

import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost CLI', function () {
  it('--help lists every command and exits 0', async function () {
    const result = await runChild(['--help'], {}, { script: BIN });
    expect(result.code).to.equal(0);
    const help = result.lines.join('\n');
    for (const command of ['serve', 'keys create', 'keys list', 'keys revoke', 'keys rotate']) expect(help).to.contain(command);
  });

  it('an unknown command says so and exits 2 (bad usage), never quoting the word given (it may be a contact typed in the wrong place)', async function () {
    const result = await runChild(['ada@example.com'], {}, { script: BIN });
    expect(result.code).to.equal(2);
    expect(result.stderr).to.match(/^leadpost: unknown command: the commands are listed below\n\nusage:/);
    expect(result.stderr).to.not.contain('ada@example.com');
    const routing = await runChild(['routing', 'ada@example.com'], {}, { script: BIN });
    expect(routing.code).to.equal(2);
    expect(routing.stderr).to.contain('unknown subcommand: the one subcommand is check').and.not.contain('ada@example.com');
  });

  it('serve listens on HTTPS with the embedded store in LEADPOST_DATA_DIR and stops cleanly on SIGTERM', async function () {
    const dir = tempDir('cli');
    const child = runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, { script: BIN });
    try {
      // The default routing file's webhook buyer names a secret that is not set here: said first.
      await child.until('{', 2);
      const [warning, listening] = child.lines.slice(0, 2).map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(warning).to.include({ level: 40, buyer: 'acme-law', secret_env: 'ACME_WEBHOOK_SECRET' });
      expect(listening).to.include({ msg: 'leadpost listening', store: 'embedded', data_dir: dir.path, self_signed: true });
      child.process.kill('SIGTERM');
      expect((await child).code).to.equal(0);
    } finally {
      child.process.kill('SIGKILL');
      dir.remove();
    }
  });

  it('a bad setting or routing file stops start-up with a message naming it', async function () {
    const dir = tempDir('cli');
    try {
      const badPort = await runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, PORT: 'eighty' }, { script: BIN });
      expect(badPort.code).to.equal(1);
      expect(badPort.stderr).to.contain("PORT must be a whole number from 0 to 65535, not 'eighty'");
      const routing = join(dir.path, 'routing.json');
      writeFileSync(routing, JSON.stringify({ buyers: [{ id: 'a', price: 1, caps: [{ period: 'day', max: 5, tz: 'Mars/Olympus' }] }] }));
      const badRouting = await runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, LEADPOST_ROUTING_FILE: routing }, { script: BIN });
      expect(badRouting.code).to.equal(1);
      expect(badRouting.stderr).to.contain("buyers[0].caps[0].tz: unknown time zone 'Mars/Olympus'");
      expect(badRouting.stderr).to.not.contain('    at ');
    } finally {
      dir.remove();
    }
  });
});

describe('leadpost events', function () {
  it("prints a lead's events in order, as text and as JSON lines; a missing stream exits 1", async function () {
    const dir = tempDir('cli-events');
    try {
      const { EmbeddedEventStore } = await import('../../src/event-store/embedded/embedded-event-store.js');
      const store = await EmbeddedEventStore.open(dir.path);
      await store.append('lead-7', [
        { type: 'LeadReceived', data: { lead_id: 7 }, metadata: { trace_id: 'abc' } },
        { type: 'LeadRejected', data: { lead_id: 7, code: 'INVALID' } },
      ]);
      await store.close();
      const text = await runChild(['events', 'lead-7'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      expect(text.code).to.equal(0);
      expect(text.lines[0]).to.match(/^#0 LeadReceived \d{4}-/);
      expect(text.lines.join('\n')).to.contain('"code":"INVALID"').and.to.contain('"trace_id":"abc"');
      const json = await runChild(['events', 'lead-7', '--json'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      expect(json.lines.filter(Boolean).map((l) => (JSON.parse(l) as { type: string; revision: number }).type)).to.deep.equal(['LeadReceived', 'LeadRejected']);
      const missing = await runChild(['events', 'lead-8'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
      expect(missing.code).to.equal(1);
      expect(missing.stderr).to.contain("stream 'lead-8' has no events");
      expect((await runChild(['events'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN })).code).to.equal(2);
    } finally {
      dir.remove();
    }
  });
});

import { expect } from 'chai';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runRoutingCommand } from '../../src/cli/routing.js';
import { loadRoutingConfig } from '../../src/routing/load-config.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

// `leadpost routing check`: an edit is checked as serve and a reload check it, before it is put in
// force, and read back in words, with the version LeadRouted will record.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

function captured() {
  const out: string[] = [];
  const err: string[] = [];
  return { io: { out: { write: (t: string) => out.push(t) }, err: { write: (t: string) => err.push(t) } }, out: () => out.join(''), err: () => err.join('') };
}

describe('leadpost routing check', function () {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('routing-check')));
  afterEach(() => dir.remove());

  it('says what the file holds and its version, and names a secret_env not set here as a warning', async function () {
    const file = join(dir.path, 'routing.json');
    writeFileSync(
      file,
      JSON.stringify({
        currency: 'USD',
        buyers: [
          { id: 'acme', name: 'Acme Law', price: 42.5, states: ['CA'], caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }], delivery: { kind: 'webhook', url: 'https://buyer.example/leads', secret_env: 'ACME_SECRET' } },
          { id: 'paused', price: 10, active: false },
        ],
      }),
    );
    const run = captured();
    expect(await runRoutingCommand(['check', file], run.io, {})).to.equal(0);
    const version = loadRoutingConfig(file).version;
    expect(run.out()).to.include(`${file}: version ${version}`);
    expect(run.out()).to.include('acme (Acme Law): 42.5 USD, priority 100; states CA; at most 100 per day (America/Los_Angeles); webhook https://buyer.example/leads, 8 attempts; returns within 7 days');
    expect(run.out()).to.include('paused: 10 USD, priority 100; PAUSED (active: false); pull');
    expect(run.err()).to.equal('warning: buyer acme: secret_env ACME_SECRET is not set here, so its deliveries would go unsigned\n');

    const json = captured();
    expect(await runRoutingCommand(['check', file, '--json'], json.io, { ACME_SECRET: 'set' })).to.equal(0);
    expect(JSON.parse(json.out())).to.deep.include({ valid: true, version, unset_secrets: [] });
    expect(json.err()).to.equal('');
  });

  it('a file that does not load: every problem, by its path in the file, and exit 1 through the real binary', async function () {
    const file = join(dir.path, 'routing.json');
    writeFileSync(file, JSON.stringify({ buyers: [{ id: 'a', price: -1, caps: [{ period: 'day', max: 1 }, { period: 'day', max: 2 }] }] }));
    const result = await runChild(['routing', 'check'], { LEADPOST_ROUTING_FILE: file }, { script: BIN });
    expect(result.code).to.equal(1);
    expect(result.stderr).to.include(`${file} does not load (2 problems)`);
    expect(result.stderr).to.include(`${file}: buyers[0].price: must be >= 0`);
    expect(result.stderr).to.include(`${file}: buyers[0].caps[1].period: a second 'day' cap`);

    const json = captured();
    expect(await runRoutingCommand(['check', file, '--json'], json.io, {})).to.equal(1);
    const answer = JSON.parse(json.out()) as { valid: boolean; problems: Array<{ path: string }> };
    expect(answer.valid).to.equal(false);
    expect(answer.problems.map((p) => p.path)).to.deep.equal(['buyers[0].price', 'buyers[0].caps[1].period']);
  });

  it('a timeout_ms over its maximum, on a delivery and on a ping, is refused with each path, exit 1', async function () {
    const file = join(dir.path, 'routing.json');
    const url = 'https://buyer.example/leads';
    writeFileSync(file, JSON.stringify({ buyers: [{ id: 'a', price: 30, delivery: { kind: 'webhook', url, timeout_ms: 3000000000 }, ping: { kind: 'webhook', url, timeout_ms: 3000000000 } }] }));
    const run = captured();
    expect(await runRoutingCommand(['check', file], run.io, {})).to.equal(1);
    expect(run.err()).to.include(`${file}: buyers[0].delivery.timeout_ms: must be at most 60000 (a minute), got 3000000000`);
    expect(run.err()).to.include(`${file}: buyers[0].ping.timeout_ms: must be at most 60000`);
  });

  it('the example file with "active": false added to a buyer that already says "active": true: refused by the repeated key, not shown as buying', async function () {
    const example = readFileSync(fileURLToPath(new URL('../../../config/routing.json', import.meta.url)), 'utf8');
    const file = join(dir.path, 'routing.json');
    writeFileSync(file, example.replace('"id": "acme-law",', '"id": "acme-law",\n      "active": false,'));
    const run = captured();
    expect(await runRoutingCommand(['check', file], run.io, {})).to.equal(1);
    expect(run.err()).to.equal(`leadpost routing check: ${file} does not load (1 problem):\n${file}: buyers[0].active: given twice\n`);
    expect(run.out()).to.equal('');
  });

  it('a usage mistake exits 2 with the usage', async function () {
    for (const args of [[], ['frob'], ['check', 'a.json', 'b.json'], ['check', '--bogus']]) {
      const run = captured();
      expect(await runRoutingCommand(args, run.io, {}), args.join(' ')).to.equal(2);
      expect(run.err()).to.include('usage: leadpost routing check [FILE] [--json]');
    }
  });
});

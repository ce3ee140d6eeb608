import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { tempDir } from '../support/tmp.js';

// The dependency rule of .dependency-cruiser.cjs, run by dependency-cruiser itself: the domain
// never imports src/http. The rule is also run on a small tree that breaks it, so a rule that
// stopped matching anything (a renamed folder, a parser that reads nothing) fails here too.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLI = join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const exec = promisify(execFile);

interface CruiseResult {
  summary: { violations: Array<{ from: string; to: string; rule: { name: string } }>; totalCruised: number };
}

async function cruise(cwd: string): Promise<CruiseResult> {
  // depcruise exits non-zero when it finds violations; its JSON report is on stdout either way.
  const run = await exec(process.execPath, [CLI, 'src', '--config', join(ROOT, '.dependency-cruiser.cjs'), '--output-type', 'json'], { cwd, maxBuffer: 64 * 1024 * 1024 }).catch(
    (error: { stdout?: string }) => ({ stdout: error.stdout ?? '' }),
  );
  return JSON.parse(run.stdout) as CruiseResult;
}

describe('layers', function () {
  this.timeout(60_000);

  it('no domain module (commands, events, leads, routing, enrichment, projections, read models, keys, delivery) imports src/http', async () => {
    const result = await cruise(ROOT);
    expect(result.summary.totalCruised, 'the source was read').to.be.greaterThan(100);
    expect(result.summary.violations.map((v) => `${v.from} → ${v.to}`)).to.deep.equal([]);
  });

  it('the rule catches a domain module that imports HTTP, also by a type-only import', async () => {
    const dir = tempDir('layers');
    try {
      for (const folder of ['src/http', 'src/commands', 'src/leads']) mkdirSync(join(dir.path, folder), { recursive: true });
      writeFileSync(join(dir.path, 'src/http/envelope.ts'), 'export interface Envelope { ok: boolean }\nexport const status = 201;\n');
      writeFileSync(join(dir.path, 'src/commands/decide.ts'), "import { status } from '../http/envelope.js';\nexport const s = status;\n");
      writeFileSync(join(dir.path, 'src/leads/outcome.ts'), "import type { Envelope } from '../http/envelope.js';\nexport type E = Envelope;\n");
      const result = await cruise(dir.path);
      expect(result.summary.violations.map((v) => `${v.rule.name}: ${v.from} → ${v.to}`).sort()).to.deep.equal([
        'domain-knows-no-http: src/commands/decide.ts → src/http/envelope.ts',
        'domain-knows-no-http: src/leads/outcome.ts → src/http/envelope.ts',
      ]);
    } finally {
      dir.remove();
    }
  });
});

describe('one write path', () => {
  // Every append of the service is decided on what its stream holds, and retried on a conflict, by
  // the command handler. Only the event store's own decorators (the codec, the counting of appends)
  // pass an append through to the store beneath.
  const PASS_THROUGH = new Set(['src/commands/handler.ts', 'src/events/codec/coded-event-store.ts', 'src/ops/counting-event-store.ts']);

  it('no module outside the event store appends except through handleCommand', () => {
    const appending = readdirSync(join(ROOT, 'src'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.ts') && !file.startsWith('event-store/'))
      .map((file) => `src/${file}`)
      .filter((file) => !PASS_THROUGH.has(file) && /\.append\(/.test(readFileSync(join(ROOT, file), 'utf8')));
    expect(appending).to.deep.equal([]);
    for (const file of PASS_THROUGH) expect(readFileSync(join(ROOT, file), 'utf8'), `${file} still appends`).to.match(/\.append\(/);
  });
});

describe('dead code', function () {
  this.timeout(120_000);

  it('knip finds no unused file and no export or type used only in its own file', async () => {
    const knip = join(ROOT, 'node_modules/knip/bin/knip.js');
    const run = await exec(process.execPath, [knip, '--include', 'exports,types,files', '--no-progress'], { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 }).catch(
      (error: { stdout?: string; stderr?: string; code?: number }) => ({ stdout: `${error.stdout ?? ''}${error.stderr ?? ''}`, failed: error.code }),
    );
    expect(run.stdout.trim(), 'knip.json says what knip reads').to.equal('');
  });
});

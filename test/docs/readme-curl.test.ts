import { expect } from 'chai';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { OUTCOMES, type OutcomeCode } from '../../src/http/envelope.js';
import { TestService } from '../support/service.js';

// The supplier guide's "Every outcome with curl" block, run line by line with curl and bash
// against the service with the example routing file: each line must cause the outcome its
// comment promises, so the guide cannot drift from what the service does.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
// Asynchronous: the service answering curl runs in this very process.
const exec = promisify(execFile);

function curlBlock(): { setup: string[]; examples: Array<{ line: string; status: number; code: OutcomeCode }> } {
  const readme = readFileSync(`${ROOT}README.md`, 'utf8');
  const section = readme.slice(readme.indexOf('### Every outcome with curl'));
  const start = section.indexOf('```sh\n') + '```sh\n'.length;
  const lines = section.slice(start, section.indexOf('```\n', start)).split('\n').filter((l) => l.trim());
  return {
    setup: lines.filter((l) => !l.includes('# →')),
    examples: lines
      .filter((l) => l.includes('# →'))
      .map((line) => {
        const [, status, code] = /# → (\d{3}) ([A-Z_]+)$/.exec(line) ?? [];
        return { line, status: Number(status), code: code as OutcomeCode };
      }),
  };
}

describe('README: every outcome with curl', function () {
  this.timeout(120_000);
  let svc: TestService | undefined;
  after(async () => svc?.stop());

  it('each line causes the outcome its comment names', async function () {
    const missing = ['curl', 'bash'].filter((tool) => spawnSync(tool, ['--version'], { stdio: 'ignore' }).status !== 0);
    if (missing.length > 0) {
      console.warn(`      skipped: ${missing.join(' and ')} not installed`);
      this.skip();
    }
    const { setup, examples } = curlBlock();
    expect(examples.length).to.be.greaterThan(12);
    const routing: unknown = JSON.parse(readFileSync(`${ROOT}config/routing.json`, 'utf8'));
    // A rate limit under the default 50 a second: the README's 400 parallel posts overrun the
    // default only when they are sent within 6 s, which a machine busy with other work may not
    // manage. At 20 (a burst of 40) they do within 18 s, and the lines before them, one post at a
    // time, stay under it.
    svc = await TestService.start({ routing, env: { RATE_LIMIT_PER_SECOND: '20' } });
    const env = {
      ...process.env,
      KEY: await svc.key('supplier', 'my-supplier'),
      ANALYST_KEY: await svc.key('analyst', 'ann'),
    };
    const local = (text: string) =>
      text.replaceAll('https://localhost:8443', `https://127.0.0.1:${svc!.port}`).replaceAll('http://localhost:8080', `http://127.0.0.1:${svc!.service.httpPort}`);

    for (const { line, status, code } of examples) {
      expect(OUTCOMES[code]?.status === status || code === 'IDEMPOTENCY_CONFLICT', line).to.equal(true);
      const run = await exec('bash', ['-c', local([...setup, line].join('\n'))], { env, encoding: 'utf8', maxBuffer: 1 << 24, timeout: 30_000 });
      const out = run.stdout.trim();
      if (code === 'RATE_LIMITED') {
        expect(out, line).to.match(/^\d+ RATE_LIMITED$/);
        continue;
      }
      const answered = / (\d{3})$/.exec(out);
      expect(answered?.[1], `${line}\n${out}\n${run.stderr}`).to.equal(String(status));
      const body = JSON.parse(out.slice(0, answered!.index)) as { code: string };
      expect(body.code, line).to.equal(code);
    }
  });
});

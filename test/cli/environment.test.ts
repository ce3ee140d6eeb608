import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type ChildResult, runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

// Every command reads the environment the service reads, and checks it as `leadpost serve` does:
// a bad value is the same one line under `leadpost: invalid configuration:`, exit 1, before the
// command acts on it (asks port NaN, makes a data dir, spins in /proc).

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

/** The CLI, killed if it has not stopped by itself in 30 s (a data dir under /proc once made it spin for ever). */
async function cli(args: string[], env: Record<string, string>): Promise<ChildResult> {
  const child = runChild(args, env, { script: BIN });
  const deadline = setTimeout(() => child.process.kill('SIGKILL'), 30_000);
  try {
    return await child;
  } finally {
    clearTimeout(deadline);
  }
}

const STORE_COMMANDS = [
  ['keys', 'list'],
  ['keys', 'create', '--role', 'supplier', '--name', 'acme'],
  ['events', 'lead-1'],
  ['erase', '--email', 'ada@example.com'],
  ['consumer', 'show', '--email', 'ada@example.com'],
  ['replay'],
  ['seal-clear-leads'],
  ['master-key', 'rotate', '--to', '/nonexistent/rotated.key'],
  ['instances'],
];

describe('every CLI command checks the environment as serve does', function () {
  this.timeout(90_000);
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('cli-env')));
  afterEach(() => dir.remove());

  function refusedAsServe(result: ChildResult, served: ChildResult, what: string): void {
    expect([result.code, result.signal], `${what}: ${result.stderr}`).to.deep.equal([1, null]);
    expect(result.stderr, what).to.equal(served.stderr);
    expect(result.lines.join(''), what).to.equal('');
  }

  it('health refuses a bad PORT with the line serve gives, instead of asking port 443', async function () {
    for (const port of ['abc', '70000', '-1']) {
      const [served, health] = await Promise.all([cli(['serve'], { LEADPOST_DATA_DIR: dir.path, PORT: port }), cli(['health', '--timeout', '1000'], { PORT: port })]);
      expect(served.stderr.trim().split('\n')).to.deep.equal(['leadpost: invalid configuration:', `  PORT must be a whole number from 0 to 65535, not '${port}'`]);
      refusedAsServe(health, served, `PORT=${port}`);
    }
  });

  it('the commands that open the stores refuse a bad store variable with the lines serve gives', async function () {
    const env = { LEADPOST_DATA_DIR: dir.path, EVENTSTORE_URL: 'not a url', MONGODB_URL: 'http://mongo' };
    const [served, ...results] = await Promise.all([cli(['serve'], env), ...STORE_COMMANDS.map((args) => cli(args, env))]);
    expect(served.stderr.trim().split('\n')).to.deep.equal(['leadpost: invalid configuration:', '  EVENTSTORE_URL is not a URL', '  MONGODB_URL must start with mongodb: or mongodb+srv://']);
    STORE_COMMANDS.forEach((args, i) => refusedAsServe(results[i]!, served, args.join(' ')));
  });

  it('the commands that open the stores refuse a data dir that cannot be created, naming LEADPOST_DATA_DIR, without a hang', async function () {
    for (const dataDir of ['/proc/nope', '/sys/nope']) {
      const env = { LEADPOST_DATA_DIR: dataDir };
      const [served, ...results] = await Promise.all([cli(['serve'], env), ...STORE_COMMANDS.map((args) => cli(args, env))]);
      expect(served.stderr).to.match(/^leadpost: invalid configuration:\n {2}LEADPOST_DATA_DIR must be a directory this process can create or write, not '\/(proc|sys)\/nope' \(.+\)\n$/);
      STORE_COMMANDS.forEach((args, i) => refusedAsServe(results[i]!, served, `${args.join(' ')} in ${dataDir}`));
    }
  });
  it('the commands that read what a service recorded refuse a data dir that holds no events.db, naming LEADPOST_DATA_DIR, and make nothing', async function () {
    // A mistyped LEADPOST_DATA_DIR, or the default ./data taken from another directory: `erase`
    // answered "0 lead(s)" with exit 0 from a store it had just made, the consumer's leads whole
    // in the real one.
    const dataDir = join(dir.path, 'not-the-service-data-dir');
    const commands = STORE_COMMANDS.filter((args) => args[1] !== 'create');
    const results = await Promise.all(commands.map((args) => cli(args, { LEADPOST_DATA_DIR: dataDir })));
    commands.forEach((args, i) => {
      const result = results[i]!;
      expect([result.code, result.signal], `${args.join(' ')}: ${result.stderr}`).to.deep.equal([1, null]);
      expect(result.stderr, args.join(' ')).to.equal(
        `leadpost: LEADPOST_DATA_DIR '${dataDir}' holds no events.db: no service has recorded anything there. ` +
          'Set it to the data dir the service runs with (the default, ./data, is relative to the directory the command runs in); nothing was made or changed\n',
      );
      expect(result.lines.join(''), args.join(' ')).to.equal('');
    });
    expect(existsSync(dataDir), 'no data dir made').to.equal(false);

    // `keys create` may come before the first start, and makes the store; the others then open it.
    const created = await cli(['keys', 'create', '--role', 'supplier', '--name', 'acme'], { LEADPOST_DATA_DIR: dataDir });
    expect(created.code, created.stderr).to.equal(0);
    const listed = await cli(['keys', 'list'], { LEADPOST_DATA_DIR: dataDir });
    expect(listed.code, listed.stderr).to.equal(0);
    expect(listed.lines.join('\n')).to.contain('acme');
  });
});

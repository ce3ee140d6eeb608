import { expect } from 'chai';
import Database from 'better-sqlite3';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type AddressInfo, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { SERVE_USAGE } from '../../src/cli/serve-help.js';
import { loadServiceConfig } from '../../src/config.js';
import { runChild } from '../support/child.js';
import { TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const README = fileURLToPath(new URL('../../../README.md', import.meta.url));
const cli = (args: string[], env: Record<string, string> = {}) => runChild(args, env, { script: BIN });
const COMMANDS = ['serve', 'keys', 'events', 'deliveries', 'replay', 'erase', 'consumer', 'seal-clear-leads', 'master-key', 'health', 'backup', 'routing', 'instances'];

describe('leadpost help', function () {
  this.timeout(60_000);

  it('--help, -h and help print the usage with every command on stdout and exit 0', async function () {
    const runs = [['--help'], ['-h'], ['help']];
    const results = await Promise.all(runs.map((args) => cli(args)));
    for (const [i, args] of runs.entries()) {
      const result = results[i]!;
      expect(result.code, args.join(' ')).to.equal(0);
      const text = result.lines.join('\n');
      expect(text).to.match(/^usage: leadpost <command>/);
      for (const command of COMMANDS) expect(text, command).to.contain(`  ${command}`);
    }
  });

  it('every command has its own help, also as `leadpost help COMMAND`, exit 0', async function () {
    const direct = await Promise.all(COMMANDS.map((command) => cli([command, '--help'])));
    COMMANDS.forEach((command, i) => {
      expect(direct[i]!.code, command).to.equal(0);
      expect(direct[i]!.lines.join('\n'), command).to.match(new RegExp(`^usage: leadpost ${command}`));
    });
    // `help COMMAND` hands over to the command's own --help.
    const viaHelp = await cli(['help', 'keys']);
    expect(viaHelp.code).to.equal(0);
    expect(viaHelp.lines).to.deep.equal(direct[COMMANDS.indexOf('keys')]!.lines);
    const create = await cli(['keys', 'create', '--help']);
    expect(create.code).to.equal(0);
    expect(create.lines.join('\n')).to.contain('create --role ROLE --name NAME');
  });

  it("the usage of all commands shows every option of each command's own help on its lines", async function () {
    // A command's lines: its own, and those indented below it (the description).
    const lines = new Map<string, string>();
    let command: string | undefined;
    for (const line of (await cli(['--help'])).lines) {
      command = /^ {2}([a-z][a-z-]*)\b/.exec(line)?.[1] ?? (/^ {20,}\S/.test(line) ? command : undefined);
      if (command !== undefined) lines.set(command, `${lines.get(command) ?? ''}${line}\n`);
    }
    const commands = [...COMMANDS, 'prune-builds'];
    const helps = await Promise.all(commands.map((name) => cli([name, '--help'])));
    const missing = commands.flatMap((name, i) => {
      const options = new Set([...helps[i]!.lines.join('\n').matchAll(/(?<![\w-])--[a-z][a-z-]*/g)].map(([option]) => option).filter((o) => o !== '--help'));
      return [...options].filter((option) => !(lines.get(name) ?? '').includes(option)).map((option) => `${name} ${option}`);
    });
    // --stdin above all: the way to keep a consumer's contacts off the command line (ps, history).
    expect(missing).to.deep.equal([]);
  });

  it('a command of subcommands given none is bad usage, as an unknown command is: the problem and its usage on stderr, exit 2', async function () {
    const runs = [['keys'], ['consumer'], ['master-key'], ['routing'], ['deliveries']];
    const results = await Promise.all(runs.map((args) => cli(args)));
    for (const [i, [command]] of runs.entries()) {
      const result = results[i]!;
      expect(result.code, command).to.equal(2);
      expect(result.stderr, command).to.match(new RegExp(`^leadpost ${command}: .+\n\nusage: leadpost ${command}`));
      expect(result.lines.join(''), command).to.equal('');
    }
  });

  it('no command, or an unknown one, is bad usage: the usage on stderr, exit 2', async function () {
    const runs = [[], ['frobnicate'], ['help', 'frobnicate']];
    const results = await Promise.all(runs.map((args) => cli(args)));
    for (const [i, args] of runs.entries()) {
      const result = results[i]!;
      expect(result.code, args.join(' ')).to.equal(2);
      expect(result.stderr).to.contain('usage: leadpost <command>');
      expect(result.lines.join('')).to.equal('');
    }
  });

  it('bad arguments are named, never quoted: an unknown option, a missing value, an option given twice, a bad value; exit 2 before any store is opened', async function () {
    const dir = tempDir('cli-usage');
    try {
      const env = { LEADPOST_DATA_DIR: dir.path };
      const cases: Array<[string[], string]> = [
        [['keys', 'list', '--format', 'xml'], 'leadpost keys: unknown option --format'],
        [['keys', 'create', '--role', 'supplier', '--name', 'a', '--name', 'b'], 'leadpost keys: --name is given twice'],
        [['replay', '--from', 'abc'], 'leadpost replay: unknown option --from'],
        [['replay', '--projection'], 'leadpost replay: --projection is missing its value, or takes none'],
        [['replay', 'leads'], 'leadpost replay: an argument without its option'],
        [['health', '--timeout', 'abc'], 'leadpost health: --timeout must be a whole number of milliseconds from 1 to 86400000'],
        // A negative number is the option's value, not an option of its own: said to be bad as any value is.
        [['health', '--timeout', '-1'], 'leadpost health: --timeout must be a whole number of milliseconds from 1 to 86400000'],
        [['health', '--timeout', '99999999999'], 'leadpost health: --timeout must be a whole number of milliseconds from 1 to 86400000'],
        [['keys', 'rotate', 'aaaaaaaaaaaa', '--grace', '-1'], 'leadpost keys: --grace must be a whole number of seconds from 0 to 31536000'],
        [['keys', 'rotate', 'aaaaaaaaaaaa', '--grace', ''], 'leadpost keys: --grace must be a whole number of seconds from 0 to 31536000'],
        [['keys', 'rotate', 'aaaaaaaaaaaa', '--grace'], 'leadpost keys: --grace is missing its value, or takes none'],
        [['health', '--bogus'], 'leadpost health: unknown option --bogus'],
        [['consumer'], 'leadpost consumer: missing command: show'],
        [['consumer', 'ada@example.com'], 'leadpost consumer: unknown command: the one command is show'],
        [['erase', '--email', 'ada@example.com', '--email', 'bob@example.com'], 'leadpost erase: --email is given twice'],
        [['deliveries', 'redeliver', '42', '--reason', 'Call Ada back'], 'leadpost deliveries redeliver: --reason must be a snake_case code of 1–64 lowercase letters, digits and underscores, starting with a letter'],
        [['deliveries', 'redeliver', '--buyer', 'acme', '--failed-since', 'yesterday'], 'leadpost deliveries redeliver: --failed-since must be an ISO 8601 date or time (UTC unless it gives an offset), e.g. 2026-11-21T08:00:00Z'],
        [['deliveries', 'redeliver', '--buyer', 'acme', '--failed-since', '2026-02-30'], 'leadpost deliveries redeliver: --failed-since must be an ISO 8601 date or time (UTC unless it gives an offset), e.g. 2026-11-21T08:00:00Z'],
        [['deliveries', 'redeliver', '--buyer', 'acme'], 'leadpost deliveries redeliver: give LEAD_ID, or --buyer with --failed-since'],
        [['deliveries', 'resend', '42'], 'leadpost deliveries: unknown command: the one command is redeliver'],
        [['deliveries', 'ada@example.com'], 'leadpost deliveries: unknown command: the one command is redeliver'],
        // One lead is sent at once: no --buyer was given, --dry-run is what does not belong.
        [['deliveries', 'redeliver', '42', '--dry-run'], 'leadpost deliveries redeliver: --dry-run goes only with --buyer and --failed-since, not with a LEAD_ID'],
        [['deliveries', 'redeliver', '42', '--buyer', 'acme'], 'leadpost deliveries redeliver: give either LEAD_ID or --buyer with --failed-since, not both'],
        // A value pasted in the wrong place, maybe a consumer's contact: named by its place, never quoted.
        [['keys', 'list', 'ada@example.com'], 'leadpost keys: list takes no argument besides its options'],
        [['keys', 'create', 'ada@example.com', '--role', 'supplier', '--name', 'a'], 'leadpost keys: create takes no argument besides its options'],
        [['keys', 'revoke', 'ada@example.com'], 'leadpost keys: ID must be a key ID (12 lower-case letters or digits)'],
        [['keys', 'rotate', 'Ada.Lovelace'], 'leadpost keys: ID must be a key ID (12 lower-case letters or digits)'],
        [['keys', 'ada@example.com'], 'leadpost keys: unknown command: the commands are create, list, revoke and rotate'],
        [['replay', '--projection', 'ada@example.com'], 'leadpost replay: --projection must be one of leads, deliveries, feedback, reports'],
      ];
      const results = await Promise.all(cases.map(([args]) => cli(args, env)));
      for (const [i, [args, first]] of cases.entries()) {
        const result = results[i]!;
        expect(result.code, args.join(' ')).to.equal(2);
        expect(result.stderr.split('\n')[0], args.join(' ')).to.equal(first);
        // Then the usage, for every command alike (the README's rule for exit 2).
        expect(result.stderr.split('\n').slice(1, 3).join('\n'), args.join(' ')).to.match(/^\nusage: leadpost /);
        expect(result.stderr).not.to.contain('example.com');
        expect(result.stderr).not.to.contain('Ada');
      }
      expect(readdirSync(dir.path), 'a refused command opened a store').to.deep.equal([]);
    } finally {
      dir.remove();
    }
  });

  it('--version and version print the release in package.json', async function () {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    for (const args of [['--version'], ['version']]) {
      const result = await cli(args);
      expect(result.code).to.equal(0);
      expect(result.lines).to.deep.equal([`leadpost ${version}`]);
    }
  });

  it('serve reports every bad variable at once, each by name, without a stack trace', async function () {
    const result = await cli(['serve'], {
      PORT: 'eighty',
      READY_MAX_LAG_SECONDS: '0',
      READY_APPEND_FAILURE_SECONDS: '3601',
      LOG_LEVEL: 'loud',
      MONGODB_URL: 'http://mongo',
      TLS_CERT_FILE: '/tmp/cert.pem',
      RATE_LIMIT_PER_SECOND: '-1',
      CERTIFICATE_HOSTS: ',',
      EMAIL_VERIFIER_URL: 'http://verifier.example/check',
      LEADPOST_ROUTING_WATCH_SECONDS: '0.5',
    });
    expect(result.code).to.equal(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).to.equal('leadpost: invalid configuration:');
    expect(lines.slice(1).map((line) => line.trim())).to.deep.equal([
      'MONGODB_URL must start with mongodb: or mongodb+srv://',
      "RATE_LIMIT_PER_SECOND must be a whole number from 0 to 1000000, not '-1'",
      "PORT must be a whole number from 0 to 65535, not 'eighty'",
      "LEADPOST_ROUTING_WATCH_SECONDS must be a whole number of seconds from 0 to 3600, not '0.5'",
      "CERTIFICATE_HOSTS must be a comma-separated list of host names, not ','",
      "EMAIL_VERIFIER_URL must be https, or http to this machine only (localhost, 127.0.0.1, [::1]): it is sent consumers' phone numbers and e-mail addresses",
      "READY_MAX_LAG_SECONDS must be a whole number from 1 to 86400, not '0'",
      "READY_APPEND_FAILURE_SECONDS must be a whole number from 1 to 3600, not '3601'",
      "LOG_LEVEL must be one of trace, debug, info, warn, error, fatal or silent, not 'loud'",
      'TLS_CERT_FILE and TLS_KEY_FILE must be given together',
    ]);
    expect(result.stderr).to.not.contain('    at ');
  });

  it('a port that cannot be listened on is named with the settings to check', async function () {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    const dir = tempDir('cli-port');
    try {
      const port = (taken.address() as AddressInfo).port;
      const result = await cli(['serve'], { LEADPOST_DATA_DIR: dir.path, HOST: '127.0.0.1', PORT: String(port), HTTP_PORT: '0' });
      expect(result.code).to.equal(1);
      expect(result.stderr.trim()).to.equal(`leadpost: cannot listen on 127.0.0.1, port ${port} (EADDRINUSE): check HOST, PORT and HTTP_PORT`);
    } finally {
      taken.close();
      dir.remove();
    }
  });

  it('every variable the service configuration reads is in `serve --help` and in the README table', function () {
    const read = new Set<string>();
    loadServiceConfig(new Proxy({} as NodeJS.ProcessEnv, { get: (_t, name) => (typeof name === 'string' && read.add(name), undefined) }));
    expect(read.size).to.be.greaterThan(15);
    const table = readFileSync(README, 'utf8').split('\n').filter((line) => line.startsWith('| `'));
    for (const name of [...read, 'LOG_LEVEL', 'KEY_ROTATION_GRACE_SECONDS']) {
      expect(SERVE_USAGE, name).to.match(new RegExp(`\\b${name}\\b`));
      expect(table.some((line) => line.includes(`\`${name}\``)), `README: ${name}`).to.equal(true);
    }
  });
});

describe('leadpost health', function () {
  this.timeout(60_000);

  it('exits 0 when the local service answers /healthz and /readyz, 1 when nothing answers', async function () {
    const svc = await TestService.start();
    try {
      const env = { PORT: String(svc.port), HOST: '127.0.0.1' };
      const live = await cli(['health'], env);
      expect(live.code, live.stderr).to.equal(0);
      expect(live.lines[0]).to.equal('ok: /healthz answered 200');
      const ready = await cli(['health', '--ready'], env);
      expect(ready.code, ready.stderr).to.equal(0);
    } finally {
      await svc.stop();
    }
    const gone = await cli(['health', '--timeout', '1000'], { PORT: '1', HOST: '127.0.0.1' });
    expect(gone.code).to.equal(1);
    expect(gone.stderr).to.contain('https://127.0.0.1:1/healthz failed');
    expect((await cli(['health', '--bogus'])).code).to.equal(2);
  });

  it('--ready on a service that is not ready exits 1 saying why, as /readyz does', async function () {
    const svc = await TestService.start();
    // Another process's write lock on keys.db: the key store cannot take the API's writes.
    const other = new Database(join(svc.dataDir, 'keys.db'));
    try {
      other.exec('BEGIN IMMEDIATE');
      const ready = await cli(['health', '--ready', '--timeout', '20000'], { PORT: String(svc.port), HOST: '127.0.0.1' });
      expect(ready.code).to.equal(1);
      expect(ready.stderr.trim()).to.equal(`leadpost health: https://127.0.0.1:${svc.port}/readyz answered 503: not ready: key_store (no answer within 2000 ms)`);
    } finally {
      other.close();
      await svc.stop();
    }
  });
});

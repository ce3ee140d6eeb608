import { expect } from 'chai';
import { chownSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ConfigError, checkDirectories, loadServiceConfig } from '../../src/config.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';

// The variables of the lead checks are checked at start like every other: a bad value stops
// `leadpost serve` with a line naming it, instead of rejecting (or passing) every lead later.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

/**
 * `leadpost serve` that ought to refuse to start: stopped as soon as it listens after all, or after
 * 30 s (a data dir under /proc once made it spin for ever).
 */
async function serveRefused(env: Record<string, string>, nodeArgs: string[] = [], args: string[] = []) {
  const child = runChild(['serve', ...args], { PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1', ...env }, { script: BIN, nodeArgs });
  const deadline = setTimeout(() => child.process.kill('SIGKILL'), 30_000);
  child.until('{', 1).then(() => child.process.kill('SIGKILL'), () => {});
  try {
    return await child;
  } finally {
    clearTimeout(deadline);
  }
}

function problem(env: Record<string, string>): string {
  try {
    loadServiceConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('configuration of the lead checks', function () {
  describe('MX_CANARY_DOMAIN', function () {
    it('is gmail.com when unset, a domain name when set, and none when set empty', function () {
      expect(loadServiceConfig({}).mxCanaryDomain).to.equal('gmail.com');
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: ' Example.ORG. ' }).mxCanaryDomain).to.equal('example.org');
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: '' }).mxCanaryDomain).to.equal(null);
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: '  ' }).mxCanaryDomain).to.equal(null);
    });

    it('refuses what is not a domain name, naming the variable', function () {
      for (const value of ['https://gmail.com', 'gmail', 'gm ail.com', 'gmail..com', '-gmail.com', 'ada@gmail.com', `${'a'.repeat(64)}.com`]) {
        expect(problem({ MX_CANARY_DOMAIN: value }), value).to.contain(`MX_CANARY_DOMAIN must be a domain name (e.g. gmail.com), or empty for none, not '${value}'`);
      }
    });
  });

  describe('CERTIFICATE_HOSTS', function () {
    it('refuses a list without a host, set to nothing included; unset, it is the TrustedForm hosts', function () {
      expect(loadServiceConfig({}).certificateHosts).to.deep.equal(['cert.trustedform.com', 'ping.trustedform.com']);
      for (const empty of ['', ',', ' , ']) expect(problem({ CERTIFICATE_HOSTS: empty })).to.contain('CERTIFICATE_HOSTS must be a comma-separated list of host names');
    });
  });

  describe('PHONE_VERIFIER_URL and EMAIL_VERIFIER_URL', function () {
    it('take https anywhere, and plain http to this machine only: the provider is sent phone numbers and e-mail addresses', function () {
      for (const url of ['https://verifier.example/check', 'http://localhost:8080/check', 'http://127.0.0.1:9/check', 'http://[::1]:9/check']) {
        expect(loadServiceConfig({ PHONE_VERIFIER_URL: url, EMAIL_VERIFIER_URL: url }).phoneVerifierUrl, url).to.equal(url);
      }
      for (const url of ['http://verifier.example/check', 'http://10.0.0.7/check', 'http://127.0.0.1.example/check']) {
        expect(problem({ PHONE_VERIFIER_URL: url }), url).to.contain('PHONE_VERIFIER_URL must be https, or http to this machine only');
        expect(problem({ EMAIL_VERIFIER_URL: url }), url).to.contain('EMAIL_VERIFIER_URL must be https, or http to this machine only');
      }
      expect(problem({ PHONE_VERIFIER_URL: 'ftp://verifier.example/' })).to.contain('PHONE_VERIFIER_URL must start with https: or http://');
    });
  });

  describe('PHONE_REGIONS', function () {
    it('is the US, Canada and the US territories of the North American numbering plan by default', function () {
      expect(loadServiceConfig({}).phoneRegions).to.deep.equal(['US', 'CA', 'PR', 'VI', 'GU', 'AS', 'MP']);
    });

    it('takes a comma-separated list of region codes, in any case, once each', function () {
      expect(loadServiceConfig({ PHONE_REGIONS: 'gb' }).phoneRegions).to.deep.equal(['GB']);
      expect(loadServiceConfig({ PHONE_REGIONS: ' US , ca,US,' }).phoneRegions).to.deep.equal(['US', 'CA']);
    });

    it('refuses an empty list, or codes libphonenumber does not know, naming the variable and the bad codes', function () {
      expect(problem({ PHONE_REGIONS: ' , ' })).to.contain("PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not ' , '");
      // Set, even to nothing, it is a list: an empty one would make every mobile invalid.
      expect(problem({ PHONE_REGIONS: '' })).to.contain("PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not ''");
      expect(problem({ PHONE_REGIONS: ',' })).to.contain("PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not ','");
      expect(problem({ PHONE_REGIONS: 'US,XX,usa,1' })).to.contain("PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not 'XX', 'USA', '1'");
      expect(problem({ PHONE_REGIONS: '001' })).to.contain("not '001'");
    });

    it('set empty, it stops leadpost serve (it once started with the default regions)', async function () {
      this.timeout(60_000);
      const dir = tempDir('regions');
      try {
        const results = await Promise.all(['', ','].map((value) => serveRefused({ LEADPOST_DATA_DIR: dir.path, PHONE_REGIONS: value })));
        ['', ','].forEach((value, i) => {
          expect([results[i]!.code, results[i]!.signal], results[i]!.stderr).to.deep.equal([1, null]);
          expect(results[i]!.stderr.trim().split('\n')).to.deep.equal([
            'leadpost: invalid configuration:',
            `  PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not '${value}'`,
          ]);
        });
      } finally {
        dir.remove();
      }
    });
  });

  it('a bad value is echoed short and on one line, whatever was set', function () {
    expect(problem({ PHONE_REGIONS: 'US,X\nY' })).to.contain("not 'X?Y'");
    const long = problem({ PORT: '9'.repeat(500) });
    expect(long).to.contain(`PORT must be a whole number from 0 to 65535, not '${'9'.repeat(79)}…'`);
    expect(long.split('\n')).to.have.length(2);
  });

  it('leadpost serve stops with exit 1 and a line naming each bad variable', async function () {
    this.timeout(60_000);
    const result = await runChild(['serve'], { MX_CANARY_DOMAIN: 'not a domain', PHONE_REGIONS: 'US,ZZ' }, { script: BIN });
    expect(result.code).to.equal(1);
    const lines = result.stderr.trim().split('\n').map((line) => line.trim());
    expect(lines[0]).to.equal('leadpost: invalid configuration:');
    expect(lines.slice(1)).to.deep.equal([
      "MX_CANARY_DOMAIN must be a domain name (e.g. gmail.com), or empty for none, not 'not a domain'",
      "PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not 'ZZ'",
    ]);
  });
});

describe('the rate limits', function () {
  const LIMITS = [
    ['RATE_LIMIT_PER_SECOND', 'RATE_LIMIT_BURST', 'rateLimit'],
    ['READ_RATE_LIMIT_PER_SECOND', 'READ_RATE_LIMIT_BURST', 'readRateLimit'],
    ['PING_RATE_LIMIT_PER_SECOND', 'PING_RATE_LIMIT_BURST', 'pingRateLimit'],
  ] as const;

  it('a bad *_BURST is refused by name also while its rate is 0 (the limit off), not only the day the limit is turned back on', function () {
    for (const [rate, burst, setting] of LIMITS) {
      expect(loadServiceConfig({ [rate]: '0', [burst]: '30' })[setting], rate).to.equal(null);
      expect(loadServiceConfig({ [rate]: '0' })[setting], rate).to.equal(null);
      for (const value of ['abc', '-5', '0', '1.5', '10000001']) {
        expect(problem({ [rate]: '0', [burst]: value }), `${burst}=${value}`).to.equal(`invalid configuration:\n  ${burst} must be a whole number from 1 to 10000000, not '${value}'`);
      }
    }
  });

  it('leadpost serve stops on them with exit 1, one line each', async function () {
    this.timeout(60_000);
    const dir = tempDir('config-bursts');
    try {
      const result = await serveRefused({
        LEADPOST_DATA_DIR: dir.path,
        RATE_LIMIT_PER_SECOND: '0',
        RATE_LIMIT_BURST: 'abc',
        READ_RATE_LIMIT_PER_SECOND: '0',
        READ_RATE_LIMIT_BURST: '-5',
        PING_RATE_LIMIT_PER_SECOND: '0',
        PING_RATE_LIMIT_BURST: 'lots',
      });
      expect(result.code, result.lines.join('\n')).to.equal(1);
      expect(result.stderr.trim().split('\n')).to.deep.equal([
        'leadpost: invalid configuration:',
        "  RATE_LIMIT_BURST must be a whole number from 1 to 10000000, not 'abc'",
        "  READ_RATE_LIMIT_BURST must be a whole number from 1 to 10000000, not '-5'",
        "  PING_RATE_LIMIT_BURST must be a whole number from 1 to 10000000, not 'lots'",
      ]);
    } finally {
      dir.remove();
    }
  });
});

describe('LEADPOST_ROLES and serve --roles', function () {
  it('is every role by default; a list picks some, in any case, once each', function () {
    expect([...loadServiceConfig({}).roles]).to.deep.equal(['api', 'projector', 'delivery']);
    // Set to nothing, the variable is unset (the README's default); only `serve --roles` given empty is refused.
    for (const empty of ['', '  ']) expect([...loadServiceConfig({ LEADPOST_ROLES: empty }).roles]).to.deep.equal(['api', 'projector', 'delivery']);
    expect([...loadServiceConfig({ LEADPOST_ROLES: ' API , delivery,api,' }).roles]).to.deep.equal(['api', 'delivery']);
  });

  it('LEADPOST_BACKGROUND_THREAD is on by default, off with 0, and anything else names it', function () {
    expect(loadServiceConfig({}).backgroundThread).to.equal(true);
    expect(loadServiceConfig({ LEADPOST_BACKGROUND_THREAD: '0' }).backgroundThread).to.equal(false);
    expect(loadServiceConfig({ LEADPOST_BACKGROUND_THREAD: 'off' }).backgroundThread).to.equal(false);
    expect(problem({ LEADPOST_BACKGROUND_THREAD: 'sometimes' })).to.contain("LEADPOST_BACKGROUND_THREAD must be 1 or 0 (true/false, yes/no, on/off), not 'sometimes'");
  });

  it('refuses an unknown role or an empty list, naming the variable', function () {
    expect(problem({ LEADPOST_ROLES: 'api,worker' })).to.contain("LEADPOST_ROLES must be a comma-separated list of api, projector, delivery, not 'api,worker'");
    expect(problem({ LEADPOST_ROLES: ' , ' })).to.contain('LEADPOST_ROLES must be a comma-separated list');
  });

  it('serve --roles overrides the variable and is checked like it; any other argument is bad usage', async function () {
    this.timeout(60_000);
    const [flag, equals, other, twice, twiceEquals] = await Promise.all([
      runChild(['serve', '--roles', 'api,nope'], { LEADPOST_ROLES: 'api' }, { script: BIN }),
      runChild(['serve', '--roles=projector,x'], {}, { script: BIN }),
      runChild(['serve', '--role', 'api'], {}, { script: BIN }),
      // Given twice, the last would win unsaid: a process meant to serve the API would not.
      runChild(['serve', '--roles', 'api', '--roles', 'projector'], {}, { script: BIN }),
      runChild(['serve', '--roles=api', '--roles=delivery'], {}, { script: BIN }),
    ]);
    for (const repeated of [twice, twiceEquals]) {
      expect(repeated.code).to.equal(2);
      expect(repeated.stderr).to.contain('serve takes only --roles LIST');
    }
    expect(flag.code).to.equal(1);
    expect(flag.stderr).to.contain("LEADPOST_ROLES must be a comma-separated list of api, projector, delivery, not 'api,nope'");
    expect(equals.code).to.equal(1);
    expect(equals.stderr).to.contain("not 'projector,x'");
    expect(other.code).to.equal(2);
    expect(other.stderr).to.contain('serve takes only --roles LIST');
  });

  it('serve --roles given empty or blank is bad usage, not every role over the LEADPOST_ROLES given', async function () {
    this.timeout(60_000);
    const dir = tempDir('config-roles');
    try {
      // `--roles=$ROLES` with the variable unset, or quoted blank: once it ran all three roles.
      const runs = [['--roles='], ['--roles= '], ['--roles', ''], ['--roles', '  ']];
      const results = await Promise.all(runs.map((args) => serveRefused({ LEADPOST_DATA_DIR: dir.path, LEADPOST_ROLES: 'api' }, [], args)));
      for (const [i, args] of runs.entries()) {
        const result = results[i]!;
        expect(result.code, `${JSON.stringify(args)}: ${result.lines.join('\n')}`).to.equal(2);
        const [first, blank, usage] = result.stderr.split('\n');
        expect(first).to.equal('leadpost: serve --roles is given no role: it takes a comma-separated list of api, projector, delivery');
        expect([blank, usage]).to.deep.equal(['', 'usage: leadpost serve [--roles api,projector,delivery]']);
      }
      expect(readdirSync(dir.path), 'refused before anything was made').to.deep.equal([]);
    } finally {
      dir.remove();
    }
  });
});

describe('KEY_ROTATION_GRACE_SECONDS', function () {
  this.timeout(60_000);
  const MESSAGE = 'KEY_ROTATION_GRACE_SECONDS must be a whole number of seconds from 0 to 31536000';

  it('is 86400 when unset or empty, any whole number of seconds up to a year when set', function () {
    expect(loadServiceConfig({}).keyRotationGraceSeconds).to.equal(86_400);
    expect(loadServiceConfig({ KEY_ROTATION_GRACE_SECONDS: '' }).keyRotationGraceSeconds).to.equal(86_400);
    expect(loadServiceConfig({ KEY_ROTATION_GRACE_SECONDS: '0' }).keyRotationGraceSeconds).to.equal(0);
    expect(loadServiceConfig({ KEY_ROTATION_GRACE_SECONDS: '31536000' }).keyRotationGraceSeconds).to.equal(31_536_000);
    for (const value of ['abc', '-1', '1.5', '31536001']) expect(problem({ KEY_ROTATION_GRACE_SECONDS: value }), value).to.contain(`${MESSAGE}, not '${value}'`);
  });

  it('a bad one stops leadpost serve at start, in the words `keys rotate` refuses it with', async function () {
    const dir = tempDir('grace');
    try {
      for (const value of ['abc', '-1', '1.5']) {
        const env = { LEADPOST_DATA_DIR: dir.path, KEY_ROTATION_GRACE_SECONDS: value };
        const [served, rotated] = await Promise.all([serveRefused(env), runChild(['keys', 'rotate', 'aaaaaaaaaaaa'], env, { script: BIN })]);
        expect(served.code, served.stderr).to.equal(1);
        expect(served.stderr.trim().split('\n')).to.deep.equal(['leadpost: invalid configuration:', `  ${MESSAGE}, not '${value}'`]);
        expect(rotated.code, rotated.stderr).to.equal(2);
        expect(rotated.stderr).to.contain(`${MESSAGE}, not '${value}'`);
      }
    } finally {
      dir.remove();
    }
  });
});

describe('where serve keeps its files', function () {
  this.timeout(60_000);
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => (dir = tempDir('data-dir')));
  afterEach(() => dir.remove());

  const refused = (result: { code: number | null; signal: string | null; stderr: string }) => {
    expect([result.code, result.signal], result.stderr).to.deep.equal([1, null]);
    const lines = result.stderr.trim().split('\n');
    expect(lines[0]).to.equal('leadpost: invalid configuration:');
    expect(lines, result.stderr).to.have.length(2);
    expect(result.stderr).to.not.contain('    at ');
    return lines[1]!.trim();
  };

  it('a data dir that cannot be created stops start-up with one line naming LEADPOST_DATA_DIR, never a hang', async function () {
    const file = join(dir.path, 'a-file');
    writeFileSync(file, '');
    const cases: Array<[string, RegExp]> = [
      ['/proc/nope', /^LEADPOST_DATA_DIR must be a directory this process can create or write, not '\/proc\/nope' \(\/proc is a kernel filesystem, proc, that keeps no files\)$/],
      ['/sys/nope', /^LEADPOST_DATA_DIR must be a directory this process can create or write, not '\/sys\/nope' \(\/sys is a kernel filesystem, sysfs, that keeps no files\)$/],
      [file, /^LEADPOST_DATA_DIR must be a directory this process can create or write, not '.*a-file' \(it is not a directory\)$/],
      [join(file, 'data'), /^LEADPOST_DATA_DIR must be a directory this process can create or write, not '.*a-file\/data' \(.*a-file is not a directory\)$/],
    ];
    const results = await Promise.all(cases.map(([dataDir]) => serveRefused({ LEADPOST_DATA_DIR: dataDir })));
    cases.forEach(([, line], i) => expect(refused(results[i]!)).to.match(line));
  });

  it('unused, the data dir is not checked: every store on a server, the master key and the certificate elsewhere', function () {
    const key = join(dir.path, 'master.key');
    writeFileSync(key, Buffer.alloc(32), { mode: 0o600 });
    const servers = { EVENTSTORE_URL: 'esdb://localhost:2113', MONGODB_URL: 'mongodb://localhost:27017/x', LEADPOST_MASTER_KEY_FILE: key };
    expect(() => checkDirectories(loadServiceConfig({ ...servers, LEADPOST_DATA_DIR: '/proc/nope', TLS_CERT_FILE: key, TLS_KEY_FILE: key }))).to.not.throw();
    // The self-signed certificate is kept in it.
    expect(() => checkDirectories(loadServiceConfig({ ...servers, LEADPOST_DATA_DIR: '/proc/nope' }))).to.throw(ConfigError, 'LEADPOST_DATA_DIR');
  });

  it('a master key file whose directory cannot be created is named as LEADPOST_MASTER_KEY_FILE', async function () {
    const result = await serveRefused({ LEADPOST_DATA_DIR: dir.path, LEADPOST_MASTER_KEY_FILE: '/proc/nope/master.key' });
    expect(refused(result)).to.equal("LEADPOST_MASTER_KEY_FILE must be a file this process can create or read, not '/proc/nope/master.key' (/proc is a kernel filesystem, proc, that keeps no files)");
  });

  it('a store file in the data dir that this process cannot write stops start-up with one line naming it, instead of a service that answers every post 503', async function () {
    const dataDir = join(dir.path, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    for (const file of ['events.db', 'readmodels.db-wal']) writeFileSync(join(dataDir, file), '', { mode: 0o444 });
    // Root writes any file whatever its mode: as root, the service is run as nobody, as a service is.
    const asRoot = process.getuid?.() === 0;
    const asNobody = ['--import', 'data:text/javascript,process.setgid(65534);process.setuid(65534)'];
    if (asRoot) {
      // Nobody must be able to run the service from this checkout (one under a private home cannot).
      const tried = await runChild(['version'], {}, { script: BIN, nodeArgs: asNobody });
      if (tried.code !== 0) {
        console.log(`      skipped: run as root, and the user nobody cannot run ${BIN} from this checkout (exit ${tried.code}), so no store file can be unwritable to the service`);
        this.skip();
      }
    }
    if (asRoot) for (const path of [dir.path, dataDir, join(dataDir, 'events.db'), join(dataDir, 'readmodels.db-wal')]) chownSync(path, 65534, 65534);
    const result = await serveRefused({ LEADPOST_DATA_DIR: dataDir }, asRoot ? asNobody : []);
    const lines = result.stderr.trim().split('\n');
    expect([result.code, lines[0]], result.stderr).to.deep.equal([1, 'leadpost: invalid configuration:']);
    expect(lines.slice(1).map((line) => line.trim())).to.deep.equal(
      ['events.db', 'readmodels.db-wal'].map((file) => `LEADPOST_DATA_DIR must hold store files this process can read and write, not '${join(dataDir, file)}' (EACCES): give it to the user the service runs as`),
    );
  });

  it('a TLS file that cannot be read stops start-up with one line naming it', async function () {
    const missing = join(dir.path, 'missing.pem');
    const result = await serveRefused({ LEADPOST_DATA_DIR: dir.path, TLS_CERT_FILE: missing, TLS_KEY_FILE: missing });
    const lines = result.stderr.trim().split('\n');
    expect([result.code, lines[0]], result.stderr).to.deep.equal([1, 'leadpost: invalid configuration:']);
    expect(lines.slice(1).map((line) => line.trim())).to.deep.equal([
      `TLS_CERT_FILE must be a file this process can read, not '${missing}' (ENOENT)`,
      `TLS_KEY_FILE must be a file this process can read, not '${missing}' (ENOENT)`,
    ]);
  });
});

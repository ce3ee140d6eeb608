import { X509Certificate, createPrivateKey } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync, unlinkSync, utimesSync, writeFileSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { hostname } from 'node:os';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { runChild } from '../support/child.js';
import { tempDir } from '../support/tmp.js';
import { testTls } from './helpers.js';

const TLS_CHILD = fileURLToPath(new URL('./tls-child.js', import.meta.url));

describe('http: TLS material', () => {
  let dir: ReturnType<typeof tempDir>;
  beforeEach(() => {
    dir = tempDir('leadpost-tls-test');
  });
  afterEach(() => dir.remove());

  it('creates a self-signed certificate for localhost on first start and reuses it afterwards', async () => {
    const first = await loadOrCreateTls({ dataDir: dir.path });
    expect(first.selfSigned).to.equal(true);
    const certFile = join(dir.path, 'tls', 'cert.pem');
    const keyFile = join(dir.path, 'tls', 'key.pem');
    expect(statSync(keyFile).mode & 0o777).to.equal(0o600);
    const x509 = new X509Certificate(first.cert);
    expect(x509.checkHost('localhost')).to.equal('localhost');
    expect(x509.checkIP('127.0.0.1')).to.equal('127.0.0.1');
    const written = { cert: statSync(certFile).mtimeMs, key: statSync(keyFile).mtimeMs };

    const second = await loadOrCreateTls({ dataDir: dir.path });
    expect(second).to.deep.equal(first);
    expect({ cert: statSync(certFile).mtimeMs, key: statSync(keyFile).mtimeMs }).to.deep.equal(written);
  });

  it('makes both again when one of the pair is missing', async () => {
    const first = await loadOrCreateTls({ dataDir: dir.path });
    unlinkSync(join(dir.path, 'tls', 'key.pem'));
    const second = await loadOrCreateTls({ dataDir: dir.path });
    expect(second.cert).not.to.equal(first.cert);
    expect(existsSync(join(dir.path, 'tls', 'key.pem'))).to.equal(true);
  });

  it('a pair whose key and certificate do not belong together is made again, not refused', async () => {
    const first = await loadOrCreateTls({ dataDir: dir.path });
    const other = tempDir('leadpost-tls-other');
    try {
      const stranger = await loadOrCreateTls({ dataDir: other.path });
      writeFileSync(join(dir.path, 'tls', 'key.pem'), stranger.key, { mode: 0o600 });
    } finally {
      other.remove();
    }
    const second = await loadOrCreateTls({ dataDir: dir.path });
    expect(second.cert).not.to.equal(first.cert);
    expect(new X509Certificate(readFileSync(join(dir.path, 'tls', 'cert.pem'))).checkPrivateKey(createPrivateKey(readFileSync(join(dir.path, 'tls', 'key.pem'))))).to.equal(true);
    expect(await loadOrCreateTls({ dataDir: dir.path })).to.deep.equal(second);
  });

  it('a lock a start left when it died making the pair is taken over once it is 10 s old', async () => {
    const lock = join(dir.path, 'tls', 'create.lock');
    mkdirSync(join(dir.path, 'tls'), { recursive: true });
    writeFileSync(lock, '');
    const old = new Date(Date.now() - 11_000);
    utimesSync(lock, old, old);
    const made = await loadOrCreateTls({ dataDir: dir.path });
    expect(new X509Certificate(readFileSync(join(dir.path, 'tls', 'cert.pem'))).fingerprint256).to.equal(new X509Certificate(made.cert).fingerprint256);
    expect(existsSync(lock)).to.equal(false);
  });

  it('a lock whose process on this host is gone is taken over at once, one whose process runs is waited for', async () => {
    const lock = join(dir.path, 'tls', 'create.lock');
    mkdirSync(join(dir.path, 'tls'), { recursive: true });
    // Dated an hour ahead, so that the age rule can never take it over: only its process can.
    const ahead = new Date(Date.now() + 3_600_000);
    const holder = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    try {
      writeFileSync(lock, `${hostname()} ${holder.pid}\n`);
      utimesSync(lock, ahead, ahead);
      let settled = false;
      const making = loadOrCreateTls({ dataDir: dir.path }).finally(() => {
        settled = true;
      });
      // While its holder runs the lock stays, and nothing is made: several polls go by.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(settled).to.equal(false);
      expect(existsSync(join(dir.path, 'tls', 'cert.pem'))).to.equal(false);
      holder.kill('SIGKILL');
      await once(holder, 'exit');
      const made = await making;
      expect(new X509Certificate(readFileSync(join(dir.path, 'tls', 'cert.pem'))).fingerprint256).to.equal(new X509Certificate(made.cert).fingerprint256);
      expect(existsSync(lock)).to.equal(false);
    } finally {
      holder.kill('SIGKILL');
    }
  });

  it('processes starting on a new data dir at once all serve one pair, the one they leave on disk', async function () {
    this.timeout(60_000);
    for (let round = 0; round < 5; round++) {
      const race = tempDir('leadpost-tls-race');
      try {
        const startAt = String(Date.now() + 1500);
        const starts = await Promise.all([0, 1, 2].map(() => runChild([race.path, startAt], {}, { script: TLS_CHILD })));
        for (const start of starts) expect(start.code, start.stderr).to.equal(0);
        const onDisk = new X509Certificate(readFileSync(join(race.path, 'tls', 'cert.pem')));
        expect(onDisk.checkPrivateKey(createPrivateKey(readFileSync(join(race.path, 'tls', 'key.pem'))))).to.equal(true);
        expect(starts.map((start) => start.lines[0])).to.deep.equal([onDisk.fingerprint256, onDisk.fingerprint256, onDisk.fingerprint256]);
        expect(existsSync(join(race.path, 'tls', 'create.lock'))).to.equal(false);
      } finally {
        race.remove();
      }
    }
  });

  describe('given files', () => {
    let certFile: string;
    let keyFile: string;
    beforeEach(async () => {
      const material = await testTls();
      certFile = join(dir.path, 'server.crt');
      keyFile = join(dir.path, 'server.key');
      writeFileSync(certFile, material.cert);
      writeFileSync(keyFile, material.key);
    });

    it('reads them and creates nothing', async () => {
      const material = await loadOrCreateTls({ dataDir: dir.path, certFile, keyFile });
      expect(material).to.deep.equal({ ...(await testTls()), selfSigned: false });
      expect(existsSync(join(dir.path, 'tls'))).to.equal(false);
    });

    it('names a missing certificate or key file', async () => {
      const missing = join(dir.path, 'absent.pem');
      await expectRejection(loadOrCreateTls({ dataDir: dir.path, certFile: missing, keyFile }), missing);
      await expectRejection(loadOrCreateTls({ dataDir: dir.path, certFile, keyFile: missing }), missing);
    });

    it('refuses only one of the two', async () => {
      await expectRejection(loadOrCreateTls({ dataDir: dir.path, certFile }), 'TLS_KEY_FILE');
    });

    it('names a file that is not PEM', async () => {
      writeFileSync(certFile, 'not a certificate');
      await expectRejection(loadOrCreateTls({ dataDir: dir.path, certFile, keyFile }), certFile);
    });

    it('refuses a key that does not belong to the certificate', async () => {
      const other = await loadOrCreateTls({ dataDir: dir.path });
      writeFileSync(keyFile, other.key);
      await expectRejection(loadOrCreateTls({ dataDir: dir.path, certFile, keyFile }), keyFile);
    });
  });
});

async function expectRejection(promise: Promise<unknown>, mention: string): Promise<void> {
  const error = await promise.then(() => undefined, (e: Error) => e);
  expect(error, 'should have been rejected').to.be.instanceOf(Error);
  expect(error?.message).to.include(mention);
}

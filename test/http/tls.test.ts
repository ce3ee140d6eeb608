import { X509Certificate } from 'node:crypto';
import { existsSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { tempDir } from '../support/tmp.js';
import { testTls } from './helpers.js';

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

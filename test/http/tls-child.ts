import { X509Certificate } from 'node:crypto';
import { loadOrCreateTls } from '../../src/http/tls.js';

// A start of tls.test.ts's race: loads (or makes) the self-signed pair of the data dir at the
// moment given, so that several processes make it at once; prints the certificate it would serve.

const [dataDir, startAt] = process.argv.slice(2);
while (Date.now() < Number(startAt)) {
  // Spins to the moment: a timer would be late by as much as the processes' start-up differs.
}
const tls = await loadOrCreateTls({ dataDir: dataDir! });
console.log(new X509Certificate(tls.cert).fingerprint256);

import { expect } from 'chai';
import { pino } from 'pino';
import { watchRoutingFile } from '../../src/ops/reload.js';
import { X509Certificate } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:tls';
import { join } from 'node:path';
import { loadOrCreateTls } from '../../src/http/tls.js';
import { MAX_ROUTING_FILE_BYTES, loadRoutingConfig } from '../../src/routing/load-config.js';
import { BuyerEndpoint } from '../delivery/buyer-endpoint.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';

// A running service takes an edited routing file and a renewed TLS certificate without a restart
// (what SIGHUP does, test/ops/sighup.test.ts): the next lead is routed by the new file, the delivery
// worker on the background thread posts to the new endpoint, new connections get the new
// certificate; a file that does not load changes nothing.

const routingWith = (buyer: string, price: number, delivery?: unknown) => ({
  currency: 'USD',
  buyers: [{ id: buyer, price, ...(delivery ? { delivery } : {}) }],
});

/** The certificate a new TLS connection to the port is served. */
function servedCertificate(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      const raw = socket.getPeerCertificate().raw;
      socket.end();
      resolve(new X509Certificate(raw).fingerprint256);
    });
    socket.on('error', reject);
  });
}

describe('reloading the routing file and the TLS certificate', function () {
  this.timeout(60_000);
  let svc: TestService | undefined;
  let endpoint: BuyerEndpoint | undefined;
  const dirs: Array<ReturnType<typeof tempDir>> = [];

  afterEach(async function () {
    await svc?.stop();
    svc = undefined;
    await endpoint?.stop();
    endpoint = undefined;
    for (const dir of dirs.splice(0)) dir.remove();
  });

  const routingFile = () => join(svc!.dataDir, 'routing.json');
  const metricsVersion = async () => {
    const text = (await svc!.request('GET', '/metrics')).text;
    return /^leadpost_routing_info\{version="([0-9a-f]+)"\} 1$/m.exec(text)?.[1];
  };

  /** leadpost_reloads_total by "what result", those counted only. */
  const reloads = async () => {
    const text = (await svc!.request('GET', '/metrics')).text;
    return Object.fromEntries([...text.matchAll(/^leadpost_reloads_total\{what="(\w+)",result="(\w+)"\} (\d+)$/gm)].map(([, what, result, count]) => [`${what} ${result}`, Number(count)]));
  };

  it('routes the next lead by the edited file, records its version, and shows it on /metrics', async function () {
    svc = await TestService.start({ routing: routingWith('first-buyer', 11) });
    const auth = { 'x-api-key': await svc.key() };
    const before = await svc.post(validLead(), auth);
    expect(before.body).to.include({ code: 'SOLD', revenue: 11 });
    const oldVersion = await metricsVersion();
    expect(oldVersion).to.match(/^[0-9a-f]{12}$/);

    writeFileSync(routingFile(), JSON.stringify(routingWith('second-buyer', 22)));
    const result = await svc.service.reload();
    expect(result.routing).to.include({ changed: true });
    const newVersion = (result.routing as { version: string }).version;
    expect(newVersion).to.not.equal(oldVersion);

    const after = await svc.post(validLead(), auth);
    expect(after.body).to.include({ code: 'SOLD', revenue: 22 });
    const routed = (await svc.service.store.readStream(`lead-${after.body.lead_id as number}`)).find((e) => e.type === 'LeadRouted')!.data as Record<string, unknown>;
    expect(routed).to.include({ routing_version: newVersion });
    expect(await metricsVersion()).to.equal(newVersion);
    const line = svc.logs.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.routing_version === newVersion);
    expect(line).to.include({ previous_routing_version: oldVersion, buyers: 1, msg: 'routing file reloaded: leads and pings from now on are routed by it' });

    // The same file again changes nothing.
    expect((await svc.service.reload()).routing).to.deep.equal({ version: newVersion, changed: false });
    expect(await reloads()).to.deep.equal({ 'routing changed': 1, 'routing unchanged': 1, 'tls unchanged': 2 });
  });

  it('keeps the routing in force when the edited file does not load, and names the file and the problem', async function () {
    svc = await TestService.start({ routing: routingWith('first-buyer', 11) });
    const auth = { 'x-api-key': await svc.key() };
    const version = await metricsVersion();
    for (const [edit, problem] of [
      ['{"currency": "USD", "buyers": [', 'invalid JSON'],
      [JSON.stringify({ currency: 'USD', buyers: [{ id: 'first-buyer', price: -5 }] }), 'buyers[0].price'],
      // Something else copied over it, tens of MB of values, would not fit the heap: refused by its size.
      [`[${' '.repeat(MAX_ROUTING_FILE_BYTES)}]`, 'a routing file is at most 1 MB'],
    ] as const) {
      writeFileSync(routingFile(), edit);
      const result = await svc.service.reload();
      const refused = (result.routing as { refused: string }).refused;
      expect(refused).to.include(routingFile()).and.to.include(problem);
      const logged = svc.logs.map((l) => JSON.parse(l) as Record<string, unknown>).filter((l) => l.level === 50 && String(l.msg).includes(problem));
      expect(logged, problem).to.have.length(1);
      expect(logged[0]!.msg).to.match(/^routing file not reloaded, the routing in force stays: /);
      expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 11 });
      expect(await metricsVersion()).to.equal(version);
    }
    // What an alert on a file on disk that does not load reads.
    expect(await reloads()).to.deep.equal({ 'routing refused': 3, 'tls unchanged': 3 });
  });

  it('logs the refusal of a leads export or of a pasted secret by the places in the file, none of their values', async function () {
    svc = await TestService.start({ routing: routingWith('first-buyer', 11) });
    const exported = [
      { lead_id: 1042, first_name: 'Ada', last_name: 'Lovelace', email: 'ada.lovelace@outlook.com', mobile: '+12135550143', zip: '90210' },
      { lead_id: 1043, first_name: 'Grace', last_name: 'Hopper', email: 'grace.hopper@outlook.com', mobile: '+12135550144', zip: '90211' },
    ];
    const secret = 'whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0';
    const delivery = { kind: 'webhook', url: 'https://127.0.0.1:9444/leads', secret_env: secret };
    for (const [file, said] of [
      [exported, 'must be an object, got an array of 2'],
      [{ currency: 'USD', buyers: [{ id: 'hooky', price: 30, delivery }] }, 'buyers[0].delivery.secret_env: must name an environment variable'],
    ] as const) {
      writeFileSync(routingFile(), JSON.stringify(file));
      expect((await svc.service.reload()).routing).to.have.property('refused').that.includes(said);
    }
    const refusals = svc.logs.filter((l) => l.includes('routing file not reloaded'));
    expect(refusals).to.have.length(2);
    for (const value of ['Ada', 'Lovelace', 'ada.lovelace', '2135550143', '90210', 'Grace', 'grace.hopper', secret, 'whsec']) {
      expect(svc.logs.filter((l) => l.includes(value)), value).to.deep.equal([]);
    }
  });

  it('with LEADPOST_ROUTING_WATCH_SECONDS, takes an edit of the file with no signal; an edit that does not load changes nothing until it is mended', async function () {
    svc = await TestService.start({ routing: routingWith('first-buyer', 11), env: { LEADPOST_ROUTING_WATCH_SECONDS: '1' } });
    const auth = { 'x-api-key': await svc.key() };
    const first = await metricsVersion();

    writeFileSync(routingFile(), JSON.stringify(routingWith('second-buyer', 22)));
    const second = await until('the edited file in force', async () => {
      const version = await metricsVersion();
      return version !== first ? version : undefined;
    }, 15_000);
    expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 22 });
    expect(svc.logs.some((l) => l.includes('routing file changed: reloading it'))).to.equal(true);

    writeFileSync(routingFile(), '{"currency": "USD", "buyers": [');
    await until('the broken edit refused', () => svc!.logs.some((l) => l.includes('routing file not reloaded, the routing in force stays') && l.includes('invalid JSON')), 15_000);
    expect(await metricsVersion()).to.equal(second);
    expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 22 });

    writeFileSync(routingFile(), JSON.stringify(routingWith('third-buyer', 33)));
    await until('the mended file in force', async () => (await metricsVersion()) !== second, 15_000);
    expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 33 });
  });

  it('without LEADPOST_ROUTING_WATCH_SECONDS, an edit waits for SIGHUP', async function () {
    svc = await TestService.start({ routing: routingWith('first-buyer', 11) });
    const auth = { 'x-api-key': await svc.key() };
    writeFileSync(routingFile(), JSON.stringify(routingWith('second-buyer', 22)));
    // A watch looks once a second at the least: three of its looks would have seen the edit.
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 11 });
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    expect((await svc.post(validLead(), auth)).body).to.include({ code: 'SOLD', revenue: 22 });
  });

  it('hands the reloaded file to the delivery worker on the background thread', async function () {
    endpoint = await BuyerEndpoint.start(() => 200);
    const hook = (path: string) => ({ kind: 'webhook', url: endpoint!.url.replace('/leads', path), timeout_ms: 2000, max_attempts: 3 });
    svc = await TestService.start({ routing: routingWith('hook-buyer', 30, hook('/before')), buyerCa: endpoint.cert });
    expect(svc.service.backgroundThread, 'delivery runs on the background thread').to.not.equal(null);
    const auth = { 'x-api-key': await svc.key() };
    const first = (await svc.post(validLead(), auth)).body.lead_id as number;
    expect((await until('the first delivery', () => endpoint!.forLead(first)[0], 15_000)).path).to.equal('/before');

    writeFileSync(routingFile(), JSON.stringify(routingWith('hook-buyer', 30, hook('/after'))));
    expect((await svc.service.reload()).routing).to.include({ changed: true });
    const second = (await svc.post(validLead(), auth)).body.lead_id as number;
    expect((await until('the second delivery', () => endpoint!.forLead(second)[0], 15_000)).path).to.equal('/after');

    // A thread started again after a crash starts with the file reloaded, not the one read at start.
    const thread = svc.service.backgroundThread!;
    await thread.crashForTest();
    await until('the thread started again', () => thread.restarts === 1 && thread.running, 15_000);
    const third = (await svc.post(validLead(), auth)).body.lead_id as number;
    expect((await until('the third delivery', () => endpoint!.forLead(third)[0], 15_000)).path).to.equal('/after');
  });

  it('serves new connections with a renewed certificate, and keeps the one in force when the new pair does not match', async function () {
    const dir = tempDir('reload-tls');
    dirs.push(dir);
    const [one, two, three] = await Promise.all(['one', 'two', 'three'].map((name) => loadOrCreateTls({ dataDir: join(dir.path, name) })));
    const certFile = join(dir.path, 'cert.pem');
    const keyFile = join(dir.path, 'key.pem');
    writeFileSync(certFile, one!.cert);
    writeFileSync(keyFile, one!.key);
    svc = await TestService.start({ env: { TLS_CERT_FILE: certFile, TLS_KEY_FILE: keyFile } });
    const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
    expect(await servedCertificate(svc.port)).to.equal(fingerprint(one!.cert));

    writeFileSync(certFile, two!.cert);
    writeFileSync(keyFile, two!.key);
    expect((await svc.service.reload()).tls).to.deep.equal({ changed: true });
    expect(await servedCertificate(svc.port)).to.equal(fingerprint(two!.cert));
    expect((await svc.service.reload()).tls).to.deep.equal({ changed: false });

    // A renewal caught half-copied: the certificate is new, the key still the old one.
    writeFileSync(certFile, three!.cert);
    const refused = ((await svc.service.reload()).tls as { refused: string }).refused;
    expect(refused).to.include('does not belong to the certificate');
    expect(await servedCertificate(svc.port)).to.equal(fingerprint(two!.cert));
    expect(svc.logs.some((l) => l.includes('TLS certificate not reloaded, the certificate in force stays'))).to.equal(true);
    expect((await svc.request('GET', '/healthz')).status).to.equal(200);
  });
});

// The watch compares the file with what it first finds there. An edit made between the service's
// first read of the file and the watch's start would be that baseline: never taken, while the
// instance routed by the file as it was (found with a file swapped in during a start).
describe('watching the routing file: an edit made while the service started', function () {
  const dir = tempDir('routing-watch');
  after(() => dir.remove());
  const silent = pino({ level: 'silent' });

  it('is taken as the watch starts; a file unchanged since the start reloads nothing', function () {
    const file = join(dir.path, 'routing.json');
    writeFileSync(file, JSON.stringify(routingWith('at-start', 11)));
    const inForce = loadRoutingConfig(file).version;
    let reloads = 0;
    const reload = async () => void (reloads += 1);

    const unchanged = watchRoutingFile(file, 60, reload, silent, () => inForce);
    unchanged();
    expect(reloads).to.equal(0);

    writeFileSync(file, JSON.stringify(routingWith('edited-meanwhile', 22)));
    const edited = watchRoutingFile(file, 60, reload, silent, () => inForce);
    edited();
    expect(reloads).to.equal(1);
  });
});

import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import { ALWAYS_OPEN_ROUTING } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, writeRouting } from '../reliability/support/server-process.js';

// SIGHUP reloads the routing file and the TLS certificate of `leadpost serve` (what it reloads is
// tested in reload.test.ts): Node's default would end the process at once, with no drain. An edit
// that does not load is logged and changes nothing; the process serves on either way, and SIGTERM
// still stops it cleanly afterwards.

describe('leadpost serve: SIGHUP', function () {
  this.timeout(60_000);
  const client = new Client(2);
  let dir: ReturnType<typeof tempDir>;
  let server: ServerProcess | undefined;

  before(function () {
    dir = tempDir('sighup');
  });
  after(async function () {
    await server?.kill();
    client.destroy();
    dir.remove();
  });

  /** Sends SIGHUP and waits for the log line it leads to. */
  async function hangUp(logged: (line: Record<string, unknown>) => boolean): Promise<Record<string, unknown>> {
    const seen = server!.lines.length;
    server!.child.process.kill('SIGHUP');
    const started = Date.now();
    for (;;) {
      const line = server!.lines.slice(seen).map((l) => JSON.parse(l) as Record<string, unknown>).find(logged);
      if (line) return line;
      if (server!.child.process.exitCode !== null || server!.child.process.signalCode !== null) {
        throw new Error(`the process ended on SIGHUP (${server!.child.process.exitCode ?? server!.child.process.signalCode})`);
      }
      if (Date.now() - started > 10_000) throw new Error(`no such line within 10 s of SIGHUP: ${server!.lines.slice(-3).join('\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  it('reloads the routing file, keeps it when an edit does not load, and the process serves on and stops cleanly on SIGTERM', async function () {
    const routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
    server = await ServerProcess.start({ dataDir: dir.path, routingFile, env: { LEADPOST_ROLES: 'api' } });
    const first = (JSON.parse(server.lines.find((l) => l.includes('"leadpost listening"'))!) as { routing_version: string }).routing_version;

    writeFileSync(routingFile, JSON.stringify({ ...ALWAYS_OPEN_ROUTING, buyers: ALWAYS_OPEN_ROUTING.buyers.slice(1) }));
    const reloaded = await hangUp((line) => line.msg === 'routing file reloaded: leads and pings from now on are routed by it');
    expect(reloaded).to.include({ level: 30, previous_routing_version: first, buyers: 1, service: 'leadpost' });
    expect(reloaded.routing_version).to.be.a('string').and.not.equal(first);

    writeFileSync(routingFile, '{"buyers": [');
    const refused = await hangUp((line) => line.level === 50);
    expect(refused).to.include({ routing_version: reloaded.routing_version });
    expect(refused.msg).to.match(/^routing file not reloaded, the routing in force stays: .*routing\.json: invalid JSON/);
    expect((await client.request(server.httpsPort, 'GET', '/healthz')).status).to.equal(200);
    expect((await client.request(server.httpsPort, 'GET', '/readyz')).status).to.equal(200);

    // Nothing drained or stopped meanwhile.
    expect(server.lines.some((line) => line.includes('leadpost stopping'))).to.equal(false);
    const stopped = await server.stop();
    expect(stopped.code).to.equal(0);
    expect(stopped.lines.some((line) => line.includes('"leadpost stopped"'))).to.equal(true);
    expect(stopped.stderr).to.equal('');
  });
});

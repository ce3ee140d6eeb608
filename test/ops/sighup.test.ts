import { expect } from 'chai';
import { ALWAYS_OPEN_ROUTING } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client } from '../reliability/support/client.js';
import { ServerProcess, writeRouting } from '../reliability/support/server-process.js';

// SIGHUP, which operators often send expecting a reload: Node's default ends the process at once,
// with no drain. `leadpost serve` logs it as one JSON line (no reload: the routing file and the
// settings are read at start) and serves on; SIGTERM still stops it cleanly afterwards.

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

  it('is logged as one JSON line and ignored: the process keeps serving, then stops cleanly on SIGTERM', async function () {
    server = await ServerProcess.start({ dataDir: dir.path, routingFile: writeRouting(dir.path, ALWAYS_OPEN_ROUTING), env: { LEADPOST_ROLES: 'api' } });
    const said = () => server!.lines.filter((line) => line.includes('SIGHUP'));
    for (let hup = 1; hup <= 2; hup++) {
      server.child.process.kill('SIGHUP');
      const started = Date.now();
      while (said().length < hup) {
        if (server.child.process.exitCode !== null || server.child.process.signalCode !== null) {
          throw new Error(`the process ended on SIGHUP (${server.child.process.exitCode ?? server.child.process.signalCode})`);
        }
        if (Date.now() - started > 5_000) throw new Error(`no SIGHUP line within 5 s: ${server.lines.slice(-3).join('\n')}`);
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect((await client.request(server.httpsPort, 'GET', '/healthz')).status).to.equal(200);
      expect((await client.request(server.httpsPort, 'GET', '/readyz')).status).to.equal(200);
    }
    const lines = said().map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines).to.have.length(2);
    expect(lines[0]).to.include({ level: 40, signal: 'SIGHUP', service: 'leadpost' });
    expect(lines[0]!.msg).to.match(/^SIGHUP ignored: the routing file and the settings are read at start; restart the process/);
    // Nothing drained or stopped meanwhile.
    expect(server.lines.some((line) => line.includes('leadpost stopping'))).to.equal(false);
    const stopped = await server.stop();
    expect(stopped.code).to.equal(0);
    expect(stopped.lines.some((line) => line.includes('"leadpost stopped"'))).to.equal(true);
    expect(stopped.stderr).to.equal('');
  });
});

import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { loadServiceConfig } from '../../src/config.js';

// The Dockerfile cannot be built here (no Docker engine), so what can be checked without one is:
// docker-compose's own validation of docker-compose.yml (Debian's docker-compose, installed by
// .ci/run), and the rules the two files must keep between them and with the service.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const read = (file: string) => readFileSync(`${ROOT}${file}`, 'utf8');

type Json = Record<string, any>;

/** The Dockerfile's stages: `FROM` line and the instructions after it. */
function stages(dockerfile: string): Array<{ from: string; lines: string[] }> {
  const logical = dockerfile.replace(/\\\n\s*/g, ' ').split('\n').map((l) => l.trim()).filter((l) => l && !l.startsWith('#'));
  const out: Array<{ from: string; lines: string[] }> = [];
  for (const line of logical) {
    if (/^FROM /i.test(line)) out.push({ from: line, lines: [] });
    else out.at(-1)?.lines.push(line);
  }
  return out;
}

describe('deployment files', function () {
  this.timeout(30_000);
  const compose = parse(read('docker-compose.yml')) as Json;
  const dockerfile = stages(read('Dockerfile'));
  const runtime = dockerfile.at(-1)!;
  const runtimeEnv = Object.fromEntries(
    runtime.lines.filter((l) => l.startsWith('ENV ')).flatMap((l) => [...l.slice(4).matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1]!, m[2]!])),
  );

  it('docker-compose validates docker-compose.yml', function () {
    const tool = ['docker-compose', 'docker'].find((cmd) => spawnSync(cmd, cmd === 'docker' ? ['compose', 'version'] : ['version'], { stdio: 'ignore' }).status === 0);
    if (!tool) {
      console.warn('      skipped: neither docker-compose nor the docker compose plugin is installed (apt-get install docker-compose)');
      this.skip();
    }
    const args = tool === 'docker' ? ['compose', 'config', '-q'] : ['config', '-q'];
    const result = spawnSync(tool!, args, { cwd: ROOT, encoding: 'utf8' });
    expect(result.status, result.stderr).to.equal(0);
  });

  it('the compose service is the Dockerfile image wired to EventStoreDB and MongoDB, started once both are healthy', function () {
    const service = compose.services.leadpost as Json;
    expect(service.build).to.equal('.');
    expect(existsSync(`${ROOT}Dockerfile`)).to.equal(true);
    for (const store of ['eventstore', 'mongodb']) {
      expect(service.depends_on[store], store).to.deep.equal({ condition: 'service_healthy' });
      expect(compose.services[store].healthcheck, store).to.be.an('object');
    }
    // The service accepts the environment it gets there, and it selects both servers.
    const config = loadServiceConfig({ ...runtimeEnv, ...service.environment });
    expect(config.eventStoreUrl).to.match(/^esdb:\/\/eventstore:2113/);
    expect(config.mongoUrl).to.match(/^mongodb:\/\/mongodb:27017\//);
    expect(service.ports).to.include.members([`${config.port}:${config.port}`, `${config.httpPort}:${config.httpPort}`]);
    expect(service.volumes).to.deep.equal([`leadpost-data:${config.dataDir}`]);
    for (const volume of ['eventstore-data', 'mongodb-data', 'leadpost-data']) expect(compose.volumes).to.have.property(volume);
    // Longer than the 10 s the service takes to drain, so a stop never ends in SIGKILL.
    expect(Number.parseInt(service.stop_grace_period, 10)).to.be.greaterThan(10);
  });

  it('the Dockerfile builds in one stage and runs as non-root node in a slim one, with a health check the CLI has', function () {
    expect(dockerfile.length).to.be.at.least(2);
    expect(dockerfile.map((s) => s.from)).to.deep.equal(['FROM node:20-bookworm-slim AS build', 'FROM node:20-bookworm-slim']);
    const build = dockerfile[0]!.lines.join('\n');
    expect(build).to.match(/apt-get install .*python3 make g\+\+/);
    expect(build).to.contain('npm ci');
    expect(build).to.contain('npm prune --omit=dev');
    const run = runtime.lines;
    const user = run.findIndex((l) => l === 'USER node');
    expect(user, 'USER node').to.be.greaterThan(-1);
    expect(run.findIndex((l) => l.startsWith('CMD '))).to.be.greaterThan(user);
    expect(run.some((l) => /^COPY --from=build \/app\/node_modules/.test(l))).to.equal(true);
    const healthcheck = run.find((l) => l.startsWith('HEALTHCHECK '));
    expect(healthcheck).to.match(/CMD \["node", "bin\/leadpost.js", "health"/);
    // The container runs exactly what `npm start` runs (node flags included), without npm in between.
    const cmd = JSON.parse(run.find((l) => l.startsWith('CMD '))!.slice(4)) as string[];
    const start = (JSON.parse(read('package.json')) as { scripts: { start: string } }).scripts.start.split(/\s+/);
    expect(cmd, 'Dockerfile CMD runs what npm start runs').to.deep.equal(start);
    expect(runtimeEnv).to.include({ LEADPOST_DATA_DIR: '/data', PORT: '8443', HTTP_PORT: '8080' });
    const health = spawnSync(process.execPath, [`${ROOT}bin/leadpost.js`, 'health', '--help'], { encoding: 'utf8' });
    expect(health.status).to.equal(0);
    expect(read('.dockerignore').split('\n')).to.include.members(['node_modules', 'dist', 'data']);
  });
});

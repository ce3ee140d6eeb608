import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runInNewContext } from 'node:vm';
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

  it('MongoDB runs as a replica set and is healthy only once its member is the writable primary', function () {
    const mongodb = compose.services.mongodb as Json;
    expect(mongodb.command).to.include.ordered.members(['--replSet', 'rs0']);
    const test = mongodb.healthcheck.test as string[];
    expect(test.slice(0, 2)).to.deep.equal(['CMD', 'mongosh']);
    const script = test[test.indexOf('--eval') + 1]!;
    expect(script).to.contain('db.hello().isWritablePrimary');
    // The script as mongosh runs it, against a member in each state it passes through.
    const exitCode = (member: { initiated: boolean; primary: boolean }) => {
      const initiated: unknown[] = [];
      const context = {
        rs: {
          status: () => {
            if (!member.initiated) throw new Error('MongoServerError: no replset config has been received');
            return { ok: 1 };
          },
          initiate: (config: unknown) => initiated.push(config),
        },
        db: { hello: () => ({ isWritablePrimary: member.primary, ...(member.initiated ? { setName: 'rs0' } : {}) }) },
        quit: (code = 0) => {
          throw { exit: code };
        },
      };
      try {
        runInNewContext(script, context);
        return { code: 0, initiated };
      } catch (thrown) {
        if (typeof thrown === 'object' && thrown !== null && 'exit' in thrown) return { code: thrown.exit, initiated };
        return { code: 1, initiated };
      }
    };
    const fresh = exitCode({ initiated: false, primary: false });
    expect(fresh.code).to.not.equal(0);
    expect(JSON.stringify(fresh.initiated)).to.equal(JSON.stringify([{ _id: 'rs0', members: [{ _id: 0, host: 'mongodb:27017' }] }]));
    expect(exitCode({ initiated: true, primary: false })).to.deep.equal({ code: 1, initiated: [] });
    expect(exitCode({ initiated: true, primary: true })).to.deep.equal({ code: 0, initiated: [] });
  });

  it('the adapters workflow starts EventStoreDB and a MongoDB replica set, then runs npm ci and npm test with both URLs', function () {
    const workflow = parse(read('.github/workflows/adapters.yml')) as Json;
    expect(workflow.on).to.include.keys('push', 'pull_request');
    const jobs = Object.values(workflow.jobs as Record<string, Json>);
    expect(jobs).to.have.length(1);
    const job = jobs[0]!;
    // EventStoreDB as docker-compose.yml runs it.
    const eventstore = job.services.eventstore as Json;
    expect(eventstore.image).to.equal(compose.services.eventstore.image);
    expect(eventstore.image).to.equal('eventstore/eventstore:24.10');
    expect(eventstore.env).to.deep.equal(compose.services.eventstore.environment);
    expect(eventstore.ports).to.include('2113:2113');
    const steps = job.steps as Json[];
    const runs = steps.map((step) => (typeof step.run === 'string' ? step.run : ''));
    const step = (pattern: RegExp) => runs.findIndex((run) => pattern.test(run));
    const mongo = step(/docker run .*mongo:7 .*--replSet rs0/);
    const initiate = step(/rs\.initiate\(/);
    const primary = step(/isWritablePrimary/);
    const ci = runs.indexOf('npm ci');
    const test = runs.indexOf('npm test');
    expect(mongo, 'mongo:7 started with --replSet rs0').to.be.greaterThan(-1);
    expect(initiate, 'a step initiates the replica set').to.be.greaterThan(mongo);
    expect(primary, 'and waits for its primary').to.be.at.least(initiate);
    expect(ci, 'npm ci').to.be.greaterThan(primary);
    expect(test, 'npm test').to.be.greaterThan(ci);
    // Both suites run: the URLs reach npm test, and the service would accept them too.
    const env = { ...workflow.env, ...job.env, ...steps[test]!.env } as Record<string, string>;
    expect(env.EVENTSTORE_URL).to.equal('esdb://localhost:2113?tls=false');
    expect(env.MONGODB_URL).to.match(/^mongodb:\/\/localhost:27017\/\w+\?directConnection=true$/);
    const config = loadServiceConfig({ EVENTSTORE_URL: env.EVENTSTORE_URL, MONGODB_URL: env.MONGODB_URL });
    expect([config.eventStoreUrl, config.mongoUrl]).to.deep.equal([env.EVENTSTORE_URL, env.MONGODB_URL]);
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

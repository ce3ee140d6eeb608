import { expect } from 'chai';
import { runPruneBuildsCommand } from '../../src/cli/prune-builds.js';
import { PROJECTIONS } from '../../src/projections/index.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// `leadpost prune-builds`: the builds an older release served, left beside this release's by an
// upgrade that changed projection versions, are removed once no instance of that release runs;
// this release's own builds stay, and the service serves on.

const captured = () => {
  const out: string[] = [];
  const err: string[] = [];
  return { out, err, io: { out: { write: (text: string) => (out.push(text), true) }, err: { write: (text: string) => (err.push(text), true) } } };
};

describe('leadpost prune-builds', function () {
  this.timeout(60_000);
  const dir = tempDir('prune-builds');
  const env = { LEADPOST_DATA_DIR: dir.path };
  let svc: TestService;
  // A projection at version 1 has no older build.
  const upgraded = PROJECTIONS.filter((projection) => projection.version > 1);
  const older = upgraded.flatMap((projection) => projection.collections.map((base) => `${base}_v${projection.version - 1}`));
  const leads = PROJECTIONS.find((p) => p.name === 'leads')!;
  const position = { commit: 1, prepare: 0 };

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path, deliveryWorker: false });
    const reply = await svc.post(validLead(), { 'x-api-key': await svc.key() });
    expect(reply.status, reply.text).to.equal(201);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    // As an older release left them: each projection's build of the version before, and a replay's
    // build of this release's version, still under way.
    const models = EmbeddedReadModelStore.open(dir.path);
    try {
      for (const projection of upgraded) {
        const build = `v${projection.version - 1}`;
        await models.commit(`${projection.name}:${build}`, position, projection.collections.map((base) => ({ op: 'put' as const, collection: `${base}_${build}`, id: '1', position, doc: { old: true } })));
      }
      await models.commit(`leads:v${leads.version}_r1`, position, [{ op: 'put', collection: `leads_v${leads.version}_r1`, id: '1', position, doc: { replaying: true } }]);
    } finally {
      await models.close();
    }
  });
  after(async () => {
    await svc.stop();
    dir.remove();
  });

  it('refuses bad usage (exit 2) with its usage, never echoing more than 40 characters of it', async function () {
    for (const [args, says] of [[['--frob'], 'unknown option --frob'], [['leads'], 'takes no arguments']] as const) {
      const { err, io } = captured();
      expect(await runPruneBuildsCommand([...args], io, env)).to.equal(2);
      expect(err.join('')).to.match(new RegExp(`^leadpost prune-builds: ${says}\\n\\nusage: leadpost prune-builds`));
    }
  });

  it('is refused, changing nothing, while a process of another release holds a projector lease', async function () {
    const models = EmbeddedReadModelStore.open(dir.path);
    try {
      for (const [lease, says] of [
        ['projector', 'a process of an older release of leadpost (old:1:aaaaaa) holds its lease projector on these stores: stop every instance of that release, then run this again'],
        [`projector-leads-v${leads.version + 1}`, `a process of another release of leadpost (old:1:aaaaaa) holds its lease projector-leads-v${leads.version + 1}: stop every instance of that release first`],
      ] as const) {
        await models.acquireLease(lease, 'old:1:aaaaaa', 60_000);
        const { err, io } = captured();
        expect(await runPruneBuildsCommand([], io, env)).to.equal(1);
        expect(err.join('')).to.equal(`leadpost prune-builds: ${says}\n`);
        expect(await models.collections()).to.include.members(older);
        await models.releaseLease(lease, 'old:1:aaaaaa');
      }
    } finally {
      await models.close();
    }
  });

  it("removes the older versions' builds and their checkpoints; this release's served build and a replay's stay, and the service serves on", async function () {
    const before = EmbeddedReadModelStore.open(dir.path);
    try {
      for (const projection of upgraded) expect(await before.checkpoint(`${projection.name}:v${projection.version - 1}`), projection.name).to.deep.include(position);
    } finally {
      await before.close();
    }
    const { out, io } = captured();
    expect(await runPruneBuildsCommand(['--json'], io, env)).to.equal(0);
    expect((JSON.parse(out.join('')) as { removed: string[] }).removed.sort()).to.deep.equal([...older].sort());
    const models = EmbeddedReadModelStore.open(dir.path);
    try {
      const left = await models.collections();
      for (const name of older) expect(left, name).to.not.include(name);
      expect(left).to.include.members([`leads_v${leads.version}`, `leads_v${leads.version}_r1`]);
      for (const projection of upgraded) expect(await models.checkpoint(`${projection.name}:v${projection.version - 1}`), projection.name).to.equal(null);
    } finally {
      await models.close();
    }
    const list = await svc.request('GET', '/functions/leads', { 'x-api-key': await svc.key('admin', 'root') });
    expect(list.status).to.equal(200);
    expect(list.body.items).to.have.length(1);
    // Again: nothing left to remove.
    const again = captured();
    expect(await runPruneBuildsCommand([], again.io, env)).to.equal(0);
    expect(again.out.join('')).to.equal('no build of an older version to remove\n');
  });
});

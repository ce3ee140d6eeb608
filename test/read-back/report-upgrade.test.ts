import { expect } from 'chai';
import { PROJECTIONS, switchBuild, versionBuild } from '../../src/projections/index.js';
import { reportsProjection } from '../../src/projections/projections.js';
import { checkpointName, collectionName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// A data dir written by the version of the reports projection that kept s1 in its bucket key: the
// service of this version serves its own build, which it makes from the events on start, and
// leaves the old build where it was.

describe('reports projection upgrade', function () {
  this.timeout(30_000);
  const dir = tempDir('report-upgrade');
  after(() => dir.remove());

  it('a data dir with the previous version of the reports is rebuilt into the new shape on start', async function () {
    const today = new Date().toISOString().slice(0, 10);
    let svc = await TestService.start({ dataDir: dir.path });
    const key = await svc.key('supplier', 'sup-a');
    try {
      for (const s1 of ['k-1', 'k-2', 'k-3']) expect((await svc.post(validLead({ s1 }), { 'x-api-key': key })).status).to.equal(201);
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
    } finally {
      await svc.stop();
    }

    // What the previous version left: its build (v1, buckets keyed by s1, no rows per lead), a
    // checkpoint at the head, a replayed build switched to; and nothing of this version's build.
    const readModels = EmbeddedReadModelStore.open(dir.path);
    try {
      for (const base of reportsProjection.collections) await readModels.drop(collectionName(base, versionBuild(reportsProjection)));
      const head = (await readModels.checkpoint(checkpointName(PROJECTIONS[0]!, versionBuild(PROJECTIONS[0]!))))!;
      for (const build of ['v1', 'v1_r1']) {
        const hour = `${today}T00`;
        const doc = { hour, supplier: 'sup-a', sid: 'src-1', s1: 'old-shape', state: 'CA', buyer: null, test: false, received: 99, accepted: 99, unsold: 99 };
        await readModels.commit(checkpointName(reportsProjection, build), head, [
          { op: 'put', collection: collectionName('report_buckets', build), id: JSON.stringify([hour, 'sup-a', 'src-1', 'old-shape', 'CA', null, false]), position: head, doc },
        ]);
      }
      await switchBuild(readModels, reportsProjection, 'v1_r1');
    } finally {
      await readModels.close();
    }

    svc = await TestService.start({ dataDir: dir.path });
    try {
      const build = svc.service.projections.build('reports');
      expect(build).to.equal(versionBuild(reportsProjection));
      expect(build).to.not.match(/^v1/);
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const reply = await svc.request('GET', `/functions/reports/summary?from=${today}&to=${today}&group_by=s1`, { 'x-api-key': key });
      expect(reply.status, reply.text).to.equal(200);
      const rows = reply.body.items as Array<Record<string, unknown>>;
      expect(rows.map((r) => [r.s1, r.received])).to.deep.equal([
        ['k-1', 1],
        ['k-2', 1],
        ['k-3', 1],
      ]);
      // The old builds are left as they were, for an operator to drop.
      const old = await svc.service.readModels.find(collectionName('report_buckets', 'v1_r1'), { sort: { field: '_id', direction: 'asc' }, limit: 10 });
      expect(old.map((d) => d.s1)).to.deep.equal(['old-shape']);
    } finally {
      await svc.stop();
    }
  });
});

import { expect } from 'chai';
import { holdServiceLeases } from '../../src/cli/service-leases.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { PROJECTION_LEASES } from '../../src/roles/projector-leases.js';
import { tempDir } from '../support/tmp.js';

// The leases a step that needs every instance stopped takes for its whole run: every lease of this
// release's service, and the single projector lease of the releases before it, so that no projector
// of any release starts meanwhile.

describe('the service leases an offline step holds', function () {
  this.timeout(30_000);
  const dir = tempDir('service-leases');
  after(() => dir.remove());

  it("takes each projection's lease, delivery, retention and an older release's projector lease, and gives them up when it ends", async function () {
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const closers: Array<() => Promise<void>> = [];
    const names = ['projector', ...PROJECTION_LEASES, 'delivery', 'retention'];
    try {
      const held = await holdServiceLeases(readModels, closers);
      expect(held.heldBy).to.equal(null);
      const leases = await Promise.all(names.map((name) => readModels.lease(name)));
      const holders = new Set(leases.map((lease) => lease?.holder));
      expect(holders.size).to.equal(1);
      expect(leases.every((lease) => lease !== null && lease.expiresAt > Date.now()), JSON.stringify(leases)).to.equal(true);
    } finally {
      for (const close of closers) await close();
    }
    for (const name of names) expect((await readModels.lease(name))?.expiresAt, name).to.equal(0);
    await readModels.close();
  });

  it("refuses while an older release's projector holds its single lease", async function () {
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const other = EmbeddedReadModelStore.open(dir.path);
    const closers: Array<() => Promise<void>> = [];
    try {
      await other.acquireLease('projector', 'old-release:7:abcdef', 60_000);
      const held = await holdServiceLeases(readModels, closers);
      expect(held.heldBy).to.equal('old-release:7:abcdef holds the projector lease');
    } finally {
      for (const close of closers) await close();
      await other.close();
      await readModels.close();
    }
  });
});

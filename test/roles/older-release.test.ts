import { expect } from 'chai';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { refuseBesideOlderRelease } from '../../src/roles/older-release.js';
import { OLDER_PROJECTOR_LEASES, PROJECTION_LEASES } from '../../src/roles/projector-leases.js';
import { fileURLToPath } from 'node:url';
import { runChild } from '../support/child.js';
import { TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// A release whose projector leases name no version does not read the claims this one makes: side
// by side, a consumer accepted here would be sold again there. A service of this release refuses
// to start while a process of such a release holds one of those leases on its stores.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('a service starting beside a process of an older release', function () {
  this.timeout(30_000);
  const dirs: Array<ReturnType<typeof tempDir>> = [];
  const freshDir = () => {
    const dir = tempDir('older-release');
    dirs.push(dir);
    return dir;
  };
  after(() => dirs.forEach((dir) => dir.remove()));

  for (const lease of OLDER_PROJECTOR_LEASES) {
    it(`is refused while another process holds the older lease ${lease}, naming it and what to do`, async function () {
      const dir = freshDir();
      const models = EmbeddedReadModelStore.open(dir.path);
      await models.acquireLease(lease, 'old-host:4242:abcdef', 60_000);
      await models.close();
      let refusal: unknown;
      try {
        const svc = await TestService.start({ dataDir: dir.path });
        await svc.stop();
      } catch (error) {
        refusal = error;
      }
      expect(refusal, 'the start was refused').to.be.instanceOf(Error);
      expect((refusal as Error).message).to.equal(
        `a process of an older release of leadpost (old-host:4242:abcdef) holds its lease ${lease} on these stores: stop every instance of that release before starting this one (README, "Upgrading")`,
      );
    });
  }

  it('`leadpost serve` refused so exits 1 with the message, its stores closed, rather than staying up', async function () {
    const dir = freshDir();
    const models = EmbeddedReadModelStore.open(dir.path);
    await models.acquireLease('projector', 'old-host:4242:abcdef', 60_000);
    await models.close();
    const result = await runChild(['serve'], { LEADPOST_DATA_DIR: dir.path, PORT: '0', HTTP_PORT: '0', HOST: '127.0.0.1' }, { script: BIN });
    expect(result.code).to.equal(1);
    expect(result.stderr).to.contain('a process of an older release of leadpost (old-host:4242:abcdef) holds its lease projector on these stores');
  });

  it('starts once the lease of a process just killed runs out (no renewal), and runs its own versioned projection leases', async function () {
    const dir = freshDir();
    const models = EmbeddedReadModelStore.open(dir.path);
    // As a killed process leaves it: taken a moment ago, never renewed again.
    const left = await models.acquireLease('projector-leads', 'old-host:4242:abcdef', 1500);
    await models.close();
    const svc = await TestService.start({ dataDir: dir.path });
    expect(Date.now(), 'the start waited for the lease to run out').to.be.above(left.expiresAt);
    try {
      expect(svc.service.leases().map((lease) => lease.lease)).to.include.members(PROJECTION_LEASES);
    } finally {
      await svc.stop();
    }
  });

  it("is not refused for the older leases a step of this release holds beside this release's own (a step that needs every instance stopped)", async function () {
    const dir = freshDir();
    const models = EmbeddedReadModelStore.open(dir.path);
    try {
      for (const name of [...PROJECTION_LEASES, ...OLDER_PROJECTOR_LEASES]) await models.acquireLease(name, 'step:1:aaaaaa', 60_000);
      await refuseBesideOlderRelease(models);
      // The same older lease held by someone else is an older release's process.
      await models.releaseLease('projector', 'step:1:aaaaaa');
      await models.acquireLease('projector', 'old-host:4242:abcdef', 60_000);
      let refused = false;
      await refuseBesideOlderRelease(models).catch(() => (refused = true));
      expect(refused).to.equal(true);
    } finally {
      await models.close();
    }
  });
});

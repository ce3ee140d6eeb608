import { expect } from 'chai';
import sinon from 'sinon';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { INSTANCE_LEASE_PREFIX } from '../../src/roles/lease-keeper.js';
import { runChild } from '../support/child.js';
import { TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { OLDER_PROJECTOR_LEASES, PROJECTION_LEASES, leaseOfProjection } from '../../src/roles/projector-leases.js';

// `leadpost instances`: which instances run on a data dir, from the lease each keeps while it runs,
// with the role leases each holds; none once they have stopped.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost instances', function () {
  this.timeout(60_000);

  it('lists every running instance, an API-only one included, and who holds each role lease; none once they stop', async function () {
    const dir = tempDir('instances');
    const env = { LEADPOST_DATA_DIR: dir.path };
    const all = await TestService.start({ dataDir: dir.path });
    const api = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'api' } });
    try {
      const listed = await runChild(['instances', '--json'], env, { script: BIN });
      expect(listed.code, listed.stderr).to.equal(0);
      const answer = JSON.parse(listed.lines.join('')) as { instances: string[]; leases: Array<{ name: string; holder: string }> };
      expect(answer.instances).to.have.length(2);
      for (const holder of answer.instances) expect(holder).to.match(/^.+:\d+:[0-9a-f]{6}$/);
      // The all-roles service's background thread holds the role leases, under the id the instance is listed by.
      expect(answer.leases.map((lease) => lease.name).sort()).to.deep.equal(['delivery', ...PROJECTION_LEASES].sort());
      expect(new Set(answer.leases.map((lease) => lease.holder)).size).to.equal(1);
      expect(answer.instances).to.include(answer.leases[0]!.holder);

      const text = await runChild(['instances'], env, { script: BIN });
      expect(text.lines[0]).to.equal('instances running (2):');
      expect(text.lines.join('\n')).to.match(/role leases held:\n {2}projector-leads-v\d+ {2,}.+:\d+:[0-9a-f]{6}/);
    } finally {
      await api.stop();
      await all.stop();
    }
    try {
      const none = await runChild(['instances'], env, { script: BIN });
      expect([none.code, none.lines]).to.deep.equal([0, ['no instance is running']]);
    } finally {
      dir.remove();
    }
  });
  it("lists an older release's projector lease, marked so; not the same lease held by a step of this release beside its own", async function () {
    const dir = tempDir('instances-older');
    const env = { LEADPOST_DATA_DIR: dir.path };
    // A data dir a service has recorded in: the command reads no other.
    await (await EmbeddedEventStore.open(dir.path)).close();
    const readModels = EmbeddedReadModelStore.open(dir.path);
    try {
      await readModels.acquireLease('projector', 'old:1:aaaaaa', 60_000);
      for (const name of [...PROJECTION_LEASES, 'projector-leads']) await readModels.acquireLease(name, 'step:2:bbbbbb', 60_000);
      const listed = await runChild(['instances'], env, { script: BIN });
      expect(listed.code, listed.stderr).to.equal(0);
      const text = listed.lines.join('\n');
      expect(text).to.match(/^ {2}projector +old:1:aaaaaa \(an older release\)$/m);
      expect(text).to.match(/^ {2}projector-leads +step:2:bbbbbb$/m);
      expect(OLDER_PROJECTOR_LEASES).to.include('projector-leads');
    } finally {
      await readModels.close();
      dir.remove();
    }
  });

});

describe('instance leases of instances gone', function () {
  this.timeout(60_000);

  it('a start removes the rows of instances that stopped or died over a minute ago, and keeps the others', async function () {
    const dir = tempDir('instances-gone');
    try {
      // Rows as instances leave them: one died two minutes ago, one stopped 30 s ago, another
      // service's lease, and the role lease of a projector that died long ago (its token must stay).
      const readModels = EmbeddedReadModelStore.open(dir.path);
      const at = (ms: number) => sinon.useFakeTimers({ now: Date.now() - ms, toFake: ['Date'] });
      let clock = at(120_000);
      await readModels.acquireLease(`${INSTANCE_LEASE_PREFIX}gone:1:aaaaaa`, 'gone:1:aaaaaa', 3000);
      await readModels.acquireLease(leaseOfProjection('leads')!, 'gone:1:bbbbbb', 3000);
      clock.restore();
      clock = at(30_000);
      await readModels.acquireLease(`${INSTANCE_LEASE_PREFIX}recent:2:cccccc`, 'recent:2:cccccc', 3000);
      clock.restore();
      await readModels.close();

      const service = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'api' } });
      try {
        const reader = EmbeddedReadModelStore.open(dir.path);
        try {
          const names = (await reader.leasesNamed(INSTANCE_LEASE_PREFIX)).map((lease) => lease.name);
          expect(names).to.not.include(`${INSTANCE_LEASE_PREFIX}gone:1:aaaaaa`);
          expect(names).to.include(`${INSTANCE_LEASE_PREFIX}recent:2:cccccc`);
          // And its own, held.
          const own = (await reader.leasesNamed(INSTANCE_LEASE_PREFIX)).filter((lease) => lease.expiresAt > Date.now());
          expect(own).to.have.length(1);
          expect((await reader.lease(leaseOfProjection('leads')!))?.token).to.equal(1);
        } finally {
          await reader.close();
        }
      } finally {
        await service.stop();
      }
    } finally {
      dir.remove();
    }
  });
});

import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { runChild } from '../support/child.js';
import { TestService } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

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
      // The all-roles service's background thread holds the role leases, under an id of its own.
      expect(answer.leases.map((lease) => lease.name).sort()).to.deep.equal(['delivery', 'projector']);
      expect(answer.leases.every((lease) => !answer.instances.includes(lease.holder))).to.equal(true);

      const text = await runChild(['instances'], env, { script: BIN });
      expect(text.lines[0]).to.equal('instances running (2):');
      expect(text.lines.join('\n')).to.match(/role leases held:\n {2}projector {2}.+:\d+:[0-9a-f]{6}/);
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
});

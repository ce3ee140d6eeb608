import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { leadStream } from '../../src/events/lead-events.js';
import { runChild } from '../support/child.js';
import { TestService, leadWith, testMobile } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// An erasure killed with SIGKILL half-way (some keys destroyed, some leads marked, nothing
// reported yet), then asked again: the second run completes it, and every lead is reported in
// ConsumerErased exactly once.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));
const LEADS = 200;

describe('erasure killed with SIGKILL half-way', function () {
  this.timeout(120_000);
  const dir = tempDir('erasure-crash');
  after(() => dir.remove());

  it('erased again, it is complete and reported once', async function () {
    const run = (Date.now() % 100_000) + 500_000;
    const email = `crash.${run}@example.com`;
    const mobile = testMobile(run);
    const ids: number[] = [];
    const svc = await TestService.start({ dataDir: dir.path });
    try {
      const supplier = await svc.key();
      for (let i = 0; i < LEADS; i++) ids.push((await svc.post(leadWith(email, mobile, { s1: `c-${i}` }), { 'x-api-key': supplier })).body.lead_id as number);
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
    } finally {
      await svc.stop();
    }
    const env = { LEADPOST_DATA_DIR: dir.path };
    const store = await EmbeddedEventStore.open(dir.path);
    const marked = async () => {
      let count = 0;
      for (const id of ids) if ((await store.readStream(leadStream(id))).some((e) => e.type === 'LeadPersonalDataErased')) count += 1;
      return count;
    };
    const reported = async () => {
      const all = await store.readAll({ maxCount: 1_000_000 });
      return all.filter((e) => e.type === 'ConsumerErased').flatMap((e) => (e.data as { lead_ids: number[] }).lead_ids);
    };
    try {
      const first = runChild(['erase', '--email', email, '--mobile', mobile, '--json'], env, { script: BIN });
      // Killed as soon as the first lead is marked: the leads of the later batches are still to do.
      for (;;) {
        const [event] = (await store.readStream(leadStream(ids[0]!))).filter((e) => e.type === 'LeadPersonalDataErased');
        if (event) break;
        if (first.process.exitCode !== null) break;
        await new Promise((resolve) => setImmediate(resolve));
      }
      first.process.kill('SIGKILL');
      const killed = await first;
      expect(killed.signal, killed.stderr).to.equal('SIGKILL');
      const halfway = await marked();
      expect(halfway, 'killed half-way').to.be.within(1, LEADS - 1);
      expect(await reported(), 'nothing reported yet').to.deep.equal([]);

      const second = await runChild(['erase', '--email', email, '--mobile', mobile, '--json'], env, { script: BIN });
      expect(second.code, second.stderr).to.equal(0);
      const answer = JSON.parse(second.lines.at(-1)!) as { created: boolean; leads_erased: number; lead_ids: number[] };
      expect(answer).to.include({ created: true, leads_erased: LEADS });
      expect(answer.lead_ids).to.deep.equal(ids);
      expect(await marked()).to.equal(LEADS);
      expect((await reported()).sort((a, b) => a - b)).to.deep.equal(ids);

      // A third time: nothing new, nothing reported again.
      const third = await runChild(['erase', '--mobile', mobile, '--email', email, '--json'], env, { script: BIN });
      expect(JSON.parse(third.lines.at(-1)!)).to.include({ created: false, leads_erased: LEADS });
      expect(await reported()).to.have.length(LEADS);
    } finally {
      await store.close();
    }
  });
});

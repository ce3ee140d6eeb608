import { expect } from 'chai';
import { decide, initialLeadState } from '../../src/commands/post-lead/decider.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { comparePositions } from '../../src/event-store/index.js';
import { leadStream } from '../../src/events/lead-events.js';
import { PROJECTIONS, Projections, versionBuild } from '../../src/projections/index.js';
import { checkpointName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';
import { leadCommand } from './lead-commands.js';

// The projections of one instance, as the service runs them under the projector lease.

describe('projections: waiting for a position', function () {
  it('a wait outlives the projector lease going to another instance: it ends once that instance has committed the position', async function () {
    const dir = tempDir('projections-wait');
    const events = await EmbeddedEventStore.open(dir.path);
    const readModels = EmbeddedReadModelStore.open(dir.path);
    const lease = 'projector-wait';
    const here = new Projections(events, readModels);
    const there = new Projections(events, readModels);
    try {
      for (let i = 0; i < 10; i++) await events.append(leadStream(i + 1), decide(leadCommand(i), initialLeadState), { expectedRevision: 'no_stream' });
      const head = await events.headPosition();
      await here.start();
      await there.start();
      // Taken for a millisecond: every commit this instance makes is refused, and its runners stop,
      // as when another process took the lease; the lease keeper then pauses the projections.
      const mine = await readModels.acquireLease(lease, 'here', 1);
      await until('the 1 ms lease run out', () => Date.now() > mine.expiresAt, 1000, 1);
      let lost = 0;
      await here.run({ lease, holder: 'here', token: mine.token }, () => {
        lost++;
        void here.pause();
      });
      const waiting = here.waitFor(head);
      const early = await Promise.race([waiting.then(() => 'ended'), new Promise((resolve) => setTimeout(() => resolve('waiting'), 300))]);
      expect(early).to.equal('waiting');
      expect(lost).to.be.at.least(1);
      // The instance that took over runs them to the head.
      const theirs = await readModels.acquireLease(lease, 'there', 60_000);
      await there.run({ lease, holder: 'there', token: theirs.token });
      await waiting;
      for (const projection of PROJECTIONS) {
        const reached = await readModels.checkpoint(checkpointName(projection, versionBuild(projection)));
        expect(comparePositions(reached!, head), projection.name).to.be.at.least(0);
      }
    } finally {
      await here.stop();
      await there.stop();
      await readModels.close();
      await events.close();
      dir.remove();
    }
  });
});

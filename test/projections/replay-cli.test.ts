import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { leadStream } from '../../src/events/lead-events.js';
import { PROJECTIONS, dropBuildsOlderThan, servedBuild, switchBuild, versionBuild } from '../../src/projections/index.js';
import { rebuildProjections, switchCaughtUp } from '../../src/projections/rebuild.js';
import { checkpointName, collectionName } from '../../src/projections/runner.js';
import { comparePositions } from '../../src/event-store/port.js';
import { runChild } from '../support/child.js';
import { TestService, validLead } from '../support/service.js';
import { until } from '../support/until.js';

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost replay', function () {
  this.timeout(60_000);

  it('rebuilds every projection beside the running service, which switches to the new build', async function () {
    const svc = await TestService.start();
    try {
      const key = await svc.key();
      const sold: number[] = [];
      for (let i = 0; i < 30; i++) {
        const reply = await svc.post(validLead({ accident_state: i % 3 ? 'CA' : 'TX', zip: i % 3 ? '90210' : '75001' }), { 'x-api-key': key });
        if (reply.body.sold === true) sold.push(reply.body.lead_id as number);
      }
      // One delivery failed for good and sent again, one failed twice over: what a rebuild must fold as the live projections did.
      for (const [leadId, rounds] of [[sold[0]!, 1], [sold[1]!, 2]] as const) {
        const buyer = (await svc.service.store.readStream(leadStream(leadId))).find((e) => e.type === 'LeadSold')!.data as { buyer: string };
        for (let round = 1; round <= rounds; round++) {
          const at = new Date().toISOString();
          const attempt = { lead_id: leadId, buyer: buyer.buyer, attempt: round };
          await svc.service.store.append(leadStream(leadId), [
            { type: 'LeadDeliveryAttempted', data: { ...attempt, started_at: at, timeout_ms: 2000 } },
            { type: 'LeadDeliveryFailed', data: { ...attempt, status: 401, latency_ms: 3, error: 'http_4xx', next_attempt_at: null, failed_at: at } },
            { type: 'LeadRedeliveryRequested', data: { lead_id: leadId, buyer: buyer.buyer, round: round + 1, attempts: round, requested_by: { role: 'admin', name: 'ops' }, reason: null, requested_at: at } },
          ]);
        }
      }
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const redelivered = await svc.service.readModels.get(collectionName('deliveries', versionBuild(PROJECTIONS[1]!)), String(sold[1]));
      expect(redelivered).to.include({ status: 'pending', attempts: 2 });
      const served = () => Object.fromEntries(PROJECTIONS.map((p) => [p.name, svc.service.projections.build(p.name)!]));
      const oldBuilds = served();
      // Each projection serves the build of its own version.
      expect(oldBuilds).to.deep.equal(Object.fromEntries(PROJECTIONS.map((p) => [p.name, versionBuild(p)])));

      const replay = await runChild(['replay'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
      expect(replay.code, replay.stderr).to.equal(0);
      // Not a terminal: plain progress lines, one final line per projection, then the switch.
      for (const name of ['leads', 'deliveries', 'feedback', 'reports']) {
        expect(replay.lines.some((l) => l.startsWith(`${name}: 100.0%`) && /events\/s ETA/.test(l))).to.equal(true);
        expect(replay.lines.some((l) => new RegExp(`^${name}: now served from build ${oldBuilds[name]}_r\\d+$`).test(l))).to.equal(true);
      }

      // The running service follows the switch within a second or two, and answers the same.
      await until('the service serving every projection from its new build', () => Object.entries(served()).every(([name, build]) => build !== oldBuilds[name]));
      for (const [name, build] of Object.entries(served())) expect(build).to.match(new RegExp(`^${oldBuilds[name]}_r\\d+$`));
      for (const [name, base] of [['leads', 'leads'], ['deliveries', 'deliveries'], ['reports', 'report_buckets']] as const) {
        const read = (build: string) => svc.service.readModels.find(collectionName(base, build), { sort: { field: '_id', direction: 'asc' }, limit: 10_000 });
        const rebuilt = await read(svc.service.projections.build(name)!);
        expect(rebuilt.length).to.be.above(0);
        expect(rebuilt, `${name} rebuilt equals live`).to.deep.equal(await read(oldBuilds[name]!));
      }
      // New leads land in the new build.
      const posted = await svc.post(validLead(), { 'x-api-key': key });
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const view = await svc.service.readModels.get(collectionName('leads', svc.service.projections.build('leads')!), String(posted.body.lead_id));
      expect(view).to.include({ lead_status: 'sold' });
    } finally {
      await svc.stop();
    }
  });

  it('five replays leave two builds of each projection: the one switched to and the one before it', async function () {
    const svc = await TestService.start();
    try {
      const key = await svc.key();
      for (let i = 0; i < 5; i++) await svc.post(validLead(), { 'x-api-key': key });
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const switched: string[] = [];
      for (let round = 1; round <= 5; round++) {
        const replay = await runChild(['replay'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
        expect(replay.code, replay.stderr).to.equal(0);
        const build = /^leads: now served from build (v\d+_r\d+)$/.exec(replay.lines.find((l) => l.startsWith('leads: now served')) ?? '')?.[1];
        expect(build, replay.lines.join('\n')).to.be.a('string');
        switched.push(build!);
        if (round >= 3) expect(replay.lines, `round ${round}`).to.include(`leads: removed older builds ${switched[round - 3]} (kept ${build} and ${switched[round - 2]})`);
        // The service follows each switch (within a second) before the next replay removes what it left.
        await until(() => `the service serving leads from ${build} (now ${svc.service.projections.build('leads')})`, () => svc.service.projections.build('leads') === build);
        expect(svc.service.projections.build('leads')).to.equal(build);
      }
      const collections = await svc.service.readModels.collections();
      for (const projection of PROJECTIONS) {
        const builds = new Set(
          projection.collections.flatMap((base) => collections.filter((c) => c.startsWith(`${base}_v`)).map((c) => c.slice(base.length + 1))),
        );
        // Each projection builds under its own version (`v2_r…` for a projection at version 2).
        const version = versionBuild(projection);
        const own = [...builds].filter((build) => new RegExp(`^${version}_r\\d+$`).test(build));
        expect(own.length, `${projection.name}: ${[...builds].join(', ')}`).to.equal(2);
        expect([...builds].sort(), projection.name).to.deep.equal(own.sort());
        // The first build and the first three rebuilds are gone, their checkpoints with them.
        for (const base of projection.collections) expect(collections).to.not.include(collectionName(base, version));
        const dropped = [version, ...switched.slice(0, 3).map((build) => build.replace(/^v1_/, `${version}_`))];
        for (const build of dropped) expect(await svc.service.readModels.checkpoint(`${projection.name}:${build}`), `${projection.name}:${build}`).to.equal(null);
      }
      expect(new Set(collections.filter((c) => c.startsWith('leads_')))).to.deep.equal(new Set(switched.slice(-2).map((build) => collectionName('leads', build))));
      // Still answering from the newest build.
      const posted = await svc.post(validLead(), { 'x-api-key': key });
      await svc.service.projections.waitFor(await svc.service.store.headPosition());
      const read = await svc.request('GET', `/functions/leads/${posted.body.lead_id}`, { 'x-api-key': key });
      expect(read.status, read.text).to.equal(200);
    } finally {
      await svc.stop();
    }
  });

  it('a replay finishing after one started later does not switch back to its older build: it removes its own, and the served build is never removed', async function () {
    const svc = await TestService.start();
    try {
      const key = await svc.key();
      for (let i = 0; i < 5; i++) await svc.post(validLead(), { 'x-api-key': key });
      const { store, readModels } = svc.service;
      await svc.service.projections.waitFor(await store.headPosition());
      const leads = PROJECTIONS.find((p) => p.name === 'leads')!;
      // What a replay started an hour from now would have made and switched to first.
      const newer = `${versionBuild(leads)}_r${Date.now() + 3_600_000}`;
      await rebuildProjections(store, readModels, [leads], { build: () => newer });
      await switchBuild(readModels, leads, newer);
      await until(() => `the service serving ${newer}`, () => svc.service.projections.build('leads') === newer);

      const replay = await runChild(['replay', '--projection', 'leads'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
      expect(replay.code, replay.stderr).to.equal(0);
      const line = replay.lines.find((l) => l.startsWith('leads: not switched'));
      const own = new RegExp(`^leads: not switched: build ${newer}, made by a replay started after this one, is served; removed this replay's build (v\\d+_r\\d+)$`).exec(line ?? '')?.[1];
      expect(own, replay.lines.join('\n')).to.be.a('string');
      expect(await servedBuild(readModels, leads)).to.equal(newer);
      const collections = await readModels.collections();
      expect(collections).to.include(collectionName('leads', newer)).and.not.include(collectionName('leads', own!));
      const read = await svc.request('GET', '/functions/leads', { 'x-api-key': key });
      expect((read.body.items as unknown[]).length, read.text).to.equal(5);

      // Two switches at once may still leave the older served: removing builds older than the newer
      // one then spares the served one.
      await switchBuild(readModels, leads, versionBuild(leads));
      expect(await dropBuildsOlderThan(readModels, leads, newer)).to.not.include(versionBuild(leads));
      expect(await readModels.collections()).to.include(collectionName('leads', versionBuild(leads)));
    } finally {
      await svc.stop();
    }
  });

  it("is not switched to while the served build is ahead of it: folded on to the head first, so what the served build showed (an erasure's marks) stays shown", async function () {
    const svc = await TestService.start();
    try {
      const key = await svc.key();
      for (let i = 0; i < 3; i++) await svc.post(validLead(), { 'x-api-key': key });
      const { store, readModels } = svc.service;
      const leads = PROJECTIONS.find((p) => p.name === 'leads')!;
      const mine = `${versionBuild(leads)}_r${Date.now()}`;
      await rebuildProjections(store, readModels, [leads], { build: () => mine });
      // Appended after the rebuild's last read, and folded by the running service into the build it
      // serves: an erasure that saw its marks there has answered.
      const later = await svc.post(validLead(), { 'x-api-key': key });
      await svc.service.projections.waitFor(await store.headPosition());
      const served = (await readModels.checkpoint(checkpointName(leads, versionBuild(leads))))!;
      expect(comparePositions((await readModels.checkpoint(checkpointName(leads, mine)))!, served), 'the rebuilt build is behind').to.be.below(0);

      const { switched } = await switchCaughtUp(store, readModels, leads, mine);
      expect(switched).to.equal(true);
      expect(await servedBuild(readModels, leads)).to.equal(mine);
      expect(comparePositions((await readModels.checkpoint(checkpointName(leads, mine)))!, served), 'caught up before the switch').to.be.at.least(0);
      expect(await readModels.get(collectionName('leads', mine), String(later.body.lead_id))).to.not.equal(null);
    } finally {
      await svc.stop();
    }
  });

  it('--projection picks one; an unknown one is bad usage', async function () {
    const svc = await TestService.start();
    try {
      const one = await runChild(['replay', '--projection', 'reports'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
      expect(one.code).to.equal(0);
      expect(one.lines.some((l) => l.startsWith('reports: now served'))).to.equal(true);
      expect(one.lines.some((l) => l.startsWith('leads:'))).to.equal(false);
      const bad = await runChild(['replay', '--projection', 'nope'], { LEADPOST_DATA_DIR: svc.dataDir }, { script: BIN });
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.match(/^leadpost replay: --projection must be one of leads, deliveries, feedback, reports\n\nusage: leadpost replay /);
      expect(bad.stderr, 'the value is named by its option, never quoted').to.not.contain('nope');
    } finally {
      await svc.stop();
    }
  });
});

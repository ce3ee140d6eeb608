import { expect } from 'chai';
import { START } from '../../src/event-store/port.js';
import { PROJECTIONS } from '../../src/projections/index.js';
import { TestService, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { projectionLease } from '../../src/roles/projector-leases.js';

// An instance with only the api role, on a data dir where no projector runs yet, then beside an
// instance with only the projector role: it posts, reads its own writes from the lead's stream,
// stays ready while the projections it does not run fall behind, and follows the stored
// checkpoints for the position its answers reflect.

describe('an instance with only the api role', function () {
  this.timeout(60_000);
  const dir = tempDir('api-only');
  let api: TestService;
  let projector: TestService | undefined;
  let key: string;

  before(async function () {
    api = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'api', READY_MAX_LAG_SECONDS: '1' } });
    key = await api.key();
  });
  after(async function () {
    await projector?.stop();
    await api.stop();
    dir.remove();
  });

  it('runs no projection and keeps no lease, and says so', async function () {
    expect(api.service.projections.active).to.equal(false);
    expect(api.service.leases()).to.deep.equal([]);
    const metrics = (await api.request('GET', '/metrics')).text;
    expect(metrics).to.match(/^leadpost_role\{role="api"\} 1$/m);
    expect(metrics).to.match(/^leadpost_role\{role="projector"\} 0$/m);
    expect(metrics).to.not.match(/^leadpost_lease_held\{/m);
  });

  it("a lead it just answered reads back at once, folded from the lead's stream while nothing projects", async function () {
    const posted = await api.post(validLead(), { 'x-api-key': key });
    expect(posted.status).to.equal(201);
    const reply = await api.request('GET', `/functions/leads/${posted.body.lead_id}`, { 'x-api-key': key });
    expect(reply.status).to.equal(200);
    expect(reply.body.lead).to.include({ lead_id: posted.body.lead_id, code: posted.body.code, supplier: 'sup-1' });
    // The read models reflect nothing yet, and the answer says so.
    expect(reply.body.position).to.deep.equal(START);
  });

  it('stays ready while the projections another instance should run fall behind, and reports their lag', async function () {
    let checks: Record<string, { ok: boolean; detail: string; roles?: string[]; leases?: unknown[] }> = {};
    const started = Date.now();
    // Observable: the oldest unprojected event (the lead above) grows older than READY_MAX_LAG_SECONDS.
    while (!checks.projections?.detail.includes('behind by more than 1 s')) {
      if (Date.now() - started > 10_000) throw new Error(`never behind: ${JSON.stringify(checks)}`);
      const reply = await api.request('GET', '/readyz');
      expect(reply.status).to.equal(200);
      checks = reply.body.checks as typeof checks;
    }
    expect(checks.projections).to.include({ ok: true });
    // No projector has ever held their leases: it says nobody runs them, and stays ready.
    expect(checks.projections!.detail).to.match(/^run by no instance, behind by more than 1 s: /);
    expect(checks.roles).to.deep.equal({ ok: true, detail: 'api', roles: ['api'], leases: [] });
  });

  it('beside a projector instance: the projector holds its lease, and the api instance follows its checkpoints', async function () {
    projector = await TestService.start({ dataDir: dir.path, env: { LEADPOST_ROLES: 'projector' } });
    // Alone with the projector role, it holds the lease of every projection.
    const holder = projector.service.leases()[0]!.holder;
    expect(projector.service.leases()).to.deep.equal(PROJECTIONS.map((p) => ({ lease: projectionLease(p), held: true, holder })));
    // Projecting without serving the API, it stores its commits on the read-model store's commit
    // thread (fenced there by its lease); the api instance has no such thread.
    expect(projector.service.readModels.pipelinedCommits).to.equal(true);
    expect(api.service.readModels.pipelinedCommits).to.not.equal(true);
    for (const p of PROJECTIONS) expect((await projector.request('GET', '/metrics')).text).to.match(new RegExp(`^leadpost_lease_held\\{lease="${projectionLease(p)}"\\} 1$`, 'm'));
    // Without the api role, the API is not there; the operator's routes are.
    expect((await projector.request('GET', '/healthz')).status).to.equal(200);
    expect((await projector.request('GET', '/functions/leads', { 'x-api-key': key })).body).to.include({ code: 'NOT_FOUND' });
    const head = await api.service.store.headPosition();
    await api.service.projections.waitFor(head);
    const reply = await api.request('GET', '/functions/leads', { 'x-api-key': key });
    expect(reply.status).to.equal(200);
    expect(reply.body.items).to.have.length(1);
    expect((reply.body.position as { commit: number }).commit).to.be.at.least(head.commit);
    const ready = await api.request('GET', '/readyz');
    expect((ready.body.checks as { projections: { detail: string } }).projections.detail).to.equal('run by another instance, within 1 s');
  });
});

import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { runChild } from '../support/child.js';
import { TestService, leadWith, testMobile } from '../support/service.js';
import { tempDir } from '../support/tmp.js';

// `leadpost erase --suppress`, run from the machine beside the running service, for a consumer who
// never had a lead (an opt-out that came in before any lead did): the service refuses their
// contacts from then on, as it does after an erasure asked over HTTP.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

describe('leadpost erase --suppress of a fresh consumer', function () {
  this.timeout(90_000);
  const dir = tempDir('erase-suppress');
  const run = (Date.now() % 100_000) + 700_000;
  const email = `fresh.${run}@example.com`;
  let svc: TestService;
  let supplier: string;

  before(async function () {
    svc = await TestService.start({ dataDir: dir.path });
    supplier = await svc.key();
  });

  after(async function () {
    await svc?.stop().catch(() => {});
    dir.remove();
  });

  it('suppresses the e-mail: a later lead with it is rejected 422 SUPPRESSED, other leads are not', async function () {
    const erased = await runChild(['erase', '--email', email, '--suppress', '--json'], { LEADPOST_DATA_DIR: dir.path }, { script: BIN });
    expect(erased.code, erased.stderr).to.equal(0);
    expect(JSON.parse(erased.lines[0]!)).to.include({ created: true, suppressed: true, leads_erased: 0 });

    const refused = await svc.post(leadWith(email, testMobile(run * 10 + 1)), { 'x-api-key': supplier });
    expect(refused.status, refused.text).to.equal(422);
    expect(refused.body).to.include({ code: 'SUPPRESSED', acceptance: 'rejected' });
    expect(refused.body.errors).to.deep.equal([{ field: 'email', code: 'suppressed', message: 'email is on the suppression list' }]);

    const other = await svc.post(leadWith(`other.${run}@example.com`, testMobile(run * 10 + 2)), { 'x-api-key': supplier });
    expect(other.status, other.text).to.equal(201);
  });
});

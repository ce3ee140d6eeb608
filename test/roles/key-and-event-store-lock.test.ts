import { expect } from 'chai';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { formatKey, issueKey, newKeyMaterial } from '../../src/keys/api-keys.js';
import { changeKeys } from '../../src/keys/key-stream.js';
import type { Role } from '../../src/keys/principal.js';
import { ALWAYS_OPEN_ROUTING, ENVELOPE_FIELDS, validLead } from '../support/service.js';
import { tempDir } from '../support/tmp.js';
import { Client, type Reply } from '../reliability/support/client.js';
import { ServerProcess, writeRouting } from '../reliability/support/server-process.js';

// Another process holds keys.db or events.db locked (an operator's sqlite3 shell, `leadpost
// erase`, a second instance) while `leadpost serve` needs it: a post whose lead needs new data keys,
// an erasure destroying keys, a post appending its events. The serving process must keep answering
// /healthz at once (the container's health check restarts it otherwise); the request waits for the
// lock, and is answered as usual once the lock is gone, or 503 UNAVAILABLE when it is held longer
// than a write waits (10 s). (readmodels.db: test/roles/read-model-lock.test.ts.)

const HEALTHZ_LIMIT_MS = 1_000;
/** /healthz answers seen while the lock is held and the request waits for it, at least. */
const HEALTH_ANSWERS = 8;

interface Timed {
  readonly ms: number;
  readonly status: number | 'no answer';
}

describe('leadpost serve while another process holds keys.db or events.db locked', function () {
  this.timeout(120_000);
  let dir: ReturnType<typeof tempDir>;
  let routingFile: string;
  let supplier: string;
  let admin: string;
  let server: ServerProcess | undefined;
  let other: Database.Database | undefined;
  const client = new Client(8);

  before(async function () {
    dir = tempDir('store-lock');
    routingFile = writeRouting(dir.path, ALWAYS_OPEN_ROUTING);
    const events = await EmbeddedEventStore.open(dir.path);
    const issue = async (role: Role, name: string) => {
      const { id, secret } = newKeyMaterial();
      await changeKeys(events, (state) => issueKey(state, { role, name, now: Date.now(), id, secret }));
      return formatKey(id, secret);
    };
    supplier = await issue('supplier', 'sup-1');
    admin = await issue('admin', 'root');
    await events.close();
  });
  beforeEach(async function () {
    // A new process each time: its pool of data keys is empty until its first post.
    server = await ServerProcess.start({ dataDir: dir.path, routingFile });
  });
  afterEach(async function () {
    if (other?.open) other.close();
    await server?.kill();
  });
  after(function () {
    client.destroy();
    dir.remove();
  });

  /** Locks `file` of the data dir for writing, as a second process would. */
  const lock = (file: 'keys.db' | 'events.db') => {
    other = new Database(join(dir.path, file));
    other.exec('BEGIN IMMEDIATE');
    return () => {
      other!.exec('ROLLBACK');
      other!.close();
    };
  };

  const post = () => client.post(server!.httpsPort, validLead(), { 'x-api-key': supplier });
  const erase = (email: string) => client.post(server!.httpsPort, { email }, { 'x-api-key': admin }, '/functions/erasures');

  /** /healthz, timed, with its own deadline: a process that does not answer is measured, not waited for. */
  const healthz = async (): Promise<Timed> => {
    const started = performance.now();
    const reply = await Promise.race([
      client.request(server!.httpsPort, 'GET', '/healthz'),
      new Promise<null>((resolve) => setTimeout(() => resolve(null), HEALTHZ_LIMIT_MS + 5_000).unref()),
    ]);
    return { ms: performance.now() - started, status: reply ? reply.status : 'no answer' };
  };

  /**
   * Asks /healthz over and over while `request` waits for the lock: until `until` says the wait has
   * been watched long enough (at least HEALTH_ANSWERS answers; the request must still be waiting
   * then, as the lock is held), or, with 'answered', until the request gives up by itself. Every
   * answer must have been a prompt 200.
   */
  const healthWhileWaiting = async (request: Promise<Reply>, until: (() => boolean) | 'answered' = () => true) => {
    let answered = false;
    void request.then(
      () => (answered = true),
      () => (answered = true),
    );
    const health: Timed[] = [];
    const summary = () => `/healthz: ${health.map((h) => `${Math.round(h.ms)} ms ${h.status}`).join(', ')}`;
    while (until === 'answered' ? !answered : health.length < HEALTH_ANSWERS || !until()) {
      health.push(await healthz());
      expect(health.at(-1)!.status, summary()).to.equal(200);
      expect(health.at(-1)!.ms, summary()).to.be.lessThan(HEALTHZ_LIMIT_MS);
      if (until !== 'answered') expect(answered, 'the request was answered while the lock was held').to.equal(false);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(health.length, summary()).to.be.at.least(HEALTH_ANSWERS);
  };

  /** How many of the events recorded in events.db are of `type`, read beside the server (WAL readers wait for nobody). */
  const recorded = (type: string): number => {
    const events = new Database(join(dir.path, 'events.db'), { readonly: true });
    try {
      return (events.prepare('SELECT count(*) AS n FROM commits WHERE instr(events, ?) > 0').get(`"${type}"`) as { n: number }).n;
    } finally {
      events.close();
    }
  };

  it('keys.db locked: a post that needs new data keys waits for the lock, /healthz answering at once meanwhile, and is sold once the lock is gone', async function () {
    const claimsBefore = recorded('ContactClaimed');
    const release = lock('keys.db');
    const posting = post();
    // The lead's contacts are claimed just before its key is taken: from then on it waits for keys.db.
    await healthWhileWaiting(posting, () => recorded('ContactClaimed') >= claimsBefore + 2);
    release();
    const posted = await posting;
    expect(posted.status, posted.text).to.equal(201);
    expect(posted.body).to.include({ code: 'SOLD' });
  });

  it('keys.db locked: an erasure waits for the lock, /healthz answering at once meanwhile, and erases once it is gone; held past a write\'s wait, it is 503 UNAVAILABLE', async function () {
    const leads = [validLead(), validLead()];
    for (const lead of leads) {
      const posted = await client.post(server!.httpsPort, lead, { 'x-api-key': supplier });
      expect(posted.status, posted.text).to.equal(201);
    }
    let release = lock('keys.db');
    const erasing = erase(leads[0]!.email as string);
    await healthWhileWaiting(erasing);
    release();
    const erased = await erasing;
    expect(erased.status, erased.text).to.equal(201);
    expect(erased.body.erasure).to.include({ leads_erased: 1 });

    // Held until the erasure gives up: the service-unavailable envelope, and the event loop free throughout.
    release = lock('keys.db');
    const refusing = erase(leads[1]!.email as string);
    await healthWhileWaiting(refusing, 'answered');
    const refused = await refusing;
    release();
    expect(refused.status, refused.text).to.equal(503);
    expect(Object.keys(refused.body)).to.include.members(ENVELOPE_FIELDS);
    expect(refused.body).to.include({ code: 'UNAVAILABLE', Response: 'Error' });
    expect(refused.headers['retry-after']).to.equal('1');
    const retried = await erase(leads[1]!.email as string);
    expect(retried.status, retried.text).to.equal(201);
    expect(retried.body.erasure).to.include({ leads_erased: 1 });
  });

  it('keys.db locked: /readyz turns 503 naming key_store within its time-box (a load balancer stops sending posts that would wait), /healthz answering at once; ready again once the lock is gone', async function () {
    const readyz = () => client.request(server!.httpsPort, 'GET', '/readyz');
    expect((await readyz()).status).to.equal(200);
    const release = lock('keys.db');
    const started = performance.now();
    const refused = await readyz();
    const ms = performance.now() - started;
    const health = await healthz();
    release();
    expect(refused.status, refused.text).to.equal(503);
    expect(refused.body.message).to.equal('not ready: key_store (no answer within 2000 ms)');
    expect((refused.body.checks as Record<string, unknown>).key_store).to.deep.equal({ ok: false, detail: 'no answer within 2000 ms' });
    // The check's 2 s, and on a loaded machine some hundreds of ms more: never a write's 10 s wait.
    expect(ms).to.be.lessThan(5_000);
    expect(health.status).to.equal(200);
    expect(health.ms).to.be.lessThan(HEALTHZ_LIMIT_MS);
    expect((await readyz()).status).to.equal(200);
  });

  it('events.db locked: a post waits for the lock on the writer thread, /healthz answering at once meanwhile, and is sold once the lock is gone', async function () {
    const release = lock('events.db');
    const posting = post();
    await healthWhileWaiting(posting);
    release();
    const posted = await posting;
    expect(posted.status, posted.text).to.equal(201);
    expect(posted.body).to.include({ code: 'SOLD' });
  });
});

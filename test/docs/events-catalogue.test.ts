import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { runEventsCommand } from '../../src/cli/events.js';
import { runSealClearLeadsCommand } from '../../src/cli/seal-clear-leads.js';
import type { CapEvent } from '../../src/commands/caps.js';
import type { ContactEvent } from '../../src/commands/contacts.js';
import type { ConsumerErased } from '../../src/commands/erasure.js';
import type { IdempotencyEvent } from '../../src/commands/idempotency.js';
import type { LeadIdBlockReserved } from '../../src/commands/lead-ids.js';
import { openEventStore } from '../../src/event-store/index.js';
import type { RecordedEvent } from '../../src/event-store/port.js';
import { EVENT_CODEC } from '../../src/events/codec/index.js';
import { type LeadEvent, type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import { PROJECTIONS } from '../../src/projections/index.js';
import type { PingEvent, PingIssued } from '../../src/events/ping-events.js';
import type { ApiKeyEvent } from '../../src/keys/api-keys.js';
import type { OLDER_NAMES, OLDER_STREAMS_RENAMED, SECRET_CHECK } from '../../src/personal-data/contact-hashes.js';
import { tempDir } from '../support/tmp.js';
import { type EventsCatalogue, type Fields, readCatalogue } from './events-doc.js';
import { type Flows, runEveryFlow } from './event-flows.js';

// docs/events.md is the contract of whoever replays the streams or writes a consumer of `$all`.
// Every flow that appends events is run against the real service, then every event in the store is
// held to the catalogue: its type is documented under the stream it is in, its data fields and its
// metadata are the ones the tables name, and no consumer's personal value is in it in clear.

const DOC = fileURLToPath(new URL('../../../docs/events.md', import.meta.url));

type KeyedType = (typeof OLDER_NAMES)[keyof typeof OLDER_NAMES]['type'];

/**
 * Every event type the code can append. A type added to one of these unions fails to compile until
 * it is named here, and then fails this test until docs/events.md documents it.
 */
const CODE_TYPES: Record<
  | LeadEvent['type']
  | PingEvent['type']
  | PingIssued['type']
  | ApiKeyEvent['type']
  | ContactEvent['type']
  | CapEvent['type']
  | IdempotencyEvent['type']
  | LeadIdBlockReserved['type']
  | ConsumerErased['type']
  | KeyedType
  | typeof OLDER_STREAMS_RENAMED
  | (typeof SECRET_CHECK)['type']
  // Written by `leadpost seal-clear-leads` (src/personal-data/clear-leads.ts), whose type is not exported.
  | 'ClearLeadsSealed',
  true
> = {
  LeadReceived: true,
  LeadRejected: true,
  LeadEnriched: true,
  LeadRouted: true,
  LeadSold: true,
  LeadPingMatched: true,
  LeadDeliveryAttempted: true,
  LeadDelivered: true,
  LeadDeliveryFailed: true,
  LeadRedeliveryRequested: true,
  FeedbackRecorded: true,
  LeadReturned: true,
  LeadPersonalDataErased: true,
  LeadPersonalDataExpired: true,
  LeadDeliveryCancelled: true,
  ErasureNoticeSent: true,
  ErasureNoticeFailed: true,
  ErasureNoticeRedeliveryRequested: true,
  LeadPinged: true,
  PingBidsCollected: true,
  PingPosted: true,
  PingPostReleased: true,
  PingIssued: true,
  ApiKeyIssued: true,
  ApiKeyRotated: true,
  ApiKeyRevoked: true,
  ContactClaimed: true,
  ContactReleased: true,
  ContactSuppressed: true,
  CapSlotsReserved: true,
  CapSlotsReturned: true,
  CapSlotTaken: true,
  CapSlotReleased: true,
  IdempotencyKeyClaimed: true,
  IdempotentResponseRecorded: true,
  IdempotencyKeyReleased: true,
  LeadIdBlockReserved: true,
  ConsumerErased: true,
  ContactHashesKeyed: true,
  IdempotencyKeysKeyed: true,
  OlderStreamsRenamed: true,
  ContactHashesSecretRecorded: true,
  ClearLeadsSealed: true,
};

/** The fields each line of `leadpost events STREAM --json` has, as "Reading a stream" lists them. */
const CLI_JSON_FIELDS = ['id', 'streamId', 'revision', 'position', 'type', 'data', 'metadata', 'created'];

const keysOf = (value: unknown): string[] => (value !== null && typeof value === 'object' ? Object.keys(value) : []);

/** What the fields of each event break of a rule of `fields`: undocumented ones, and documented ones it lacks. */
function fieldProblems(what: string, present: readonly string[], rule: Fields | undefined): string[] {
  if (!rule) return [`${what}: no row documents it`];
  const extra = present.filter((name) => !rule.has(name)).map((name) => `${what}: ${name} is not documented`);
  const missing = [...rule].filter(([name, optional]) => !optional && !present.includes(name)).map(([name]) => `${what}: lacks ${name}, documented as always there`);
  return [...extra, ...missing];
}

/**
 * The event types each projection folds (writes something for), at the version that folds them. A
 * projector of an older release with the same version would pass over a type added here in the
 * same build and move its checkpoint past it (src/projections/projections.ts): a type added takes
 * a new version, and then this table names both.
 */
const FOLDED: Record<string, { version: number; types: string[] }> = {
  leads: {
    version: 4,
    types: [
      'ConsumerErased', 'FeedbackRecorded', 'LeadDelivered', 'LeadDeliveryCancelled', 'LeadDeliveryFailed', 'LeadEnriched', 'LeadPersonalDataErased',
      'LeadPersonalDataExpired', 'LeadPingMatched', 'LeadReceived', 'LeadRedeliveryRequested', 'LeadRejected', 'LeadReturned', 'LeadRouted', 'LeadSold',
    ],
  },
  deliveries: {
    version: 3,
    types: [
      'ErasureNoticeFailed', 'ErasureNoticeRedeliveryRequested', 'ErasureNoticeSent', 'LeadDelivered', 'LeadDeliveryAttempted', 'LeadDeliveryCancelled',
      'LeadDeliveryFailed', 'LeadPersonalDataErased', 'LeadPersonalDataExpired', 'LeadRedeliveryRequested', 'LeadRouted', 'LeadSold',
    ],
  },
  feedback: { version: 1, types: ['FeedbackRecorded'] },
  reports: { version: 4, types: ['LeadPinged', 'LeadRejected', 'LeadReturned', 'LeadRouted', 'LeadSold', 'PingBidsCollected', 'PingPostReleased', 'PingPosted'] },
};

describe('docs/events.md: the event catalogue holds for every event the service writes', function () {
  this.timeout(120_000);
  let doc: EventsCatalogue;
  let flows: Flows;
  let events: RecordedEvent[];
  let dir: ReturnType<typeof tempDir>;
  let cli: (stream: string) => Promise<Array<Record<string, any>>>;

  before(async function () {
    doc = readCatalogue(readFileSync(DOC, 'utf8'));
    dir = tempDir('events-catalogue');
    flows = await runEveryFlow(dir.path);
    await flows.stop();
    const env = { LEADPOST_DATA_DIR: dir.path };
    const quiet = { out: { write: () => true }, err: { write: () => true } };
    // Writes its ClearLeadsSealed, and renames the older names the data dir may hold.
    expect(await runSealClearLeadsCommand([], quiet, env)).to.equal(0);
    const store = await openEventStore({ dataDir: dir.path });
    events = await store.readAll();
    await store.close();
    cli = async (stream) => {
      let out = '';
      const code = await runEventsCommand([stream, '--json'], { out: { write: (text: string) => (out += text) }, err: quiet.err }, env);
      expect(code, stream).to.equal(0);
      return out.trimEnd().split('\n').map((line) => JSON.parse(line) as Record<string, any>);
    };
  });
  after(() => dir?.remove());

  it('runs flows that write every type the code has, and documents no type the code lacks', function () {
    const written = new Set(events.map((event) => event.type));
    // Every type is written by the flows above, and the catalogue documents no type the code lacks.
    expect(Object.keys(CODE_TYPES).filter((type) => !written.has(type))).to.deep.equal([]);
    expect([...doc.types.keys()].filter((type) => !(type in CODE_TYPES))).to.deep.equal([]);
  });

  it('each projection folds the event types its version names: one that starts to fold another takes a new version', async function () {
    const received = new Map<number, LeadReceived['data']>();
    for (const event of events) if (event.type === 'LeadReceived') received.set((event.data as LeadReceived['data']).lead_id, event.data as LeadReceived['data']);
    const context = { received: (leadId: number) => received.get(leadId) ?? null, collection: (base: string) => base };
    const folded: Record<string, { version: number; types: string[] }> = {};
    for (const projection of PROJECTIONS) {
      const types = new Set<string>();
      for (const event of events) if ((await projection.handle(event, context)).length > 0) types.add(event.type);
      folded[projection.name] = { version: projection.version, types: [...types].sort() };
    }
    expect(folded).to.deep.equal(FOLDED);
  });

  it('documents every type the code can write, with its fields', function () {
    expect(Object.keys(CODE_TYPES).filter((type) => !doc.fields.has(type))).to.deep.equal([]);
  });

  it('documents each event under the stream it is in', function () {
    const problems = new Set<string>();
    for (const event of events) {
      const pattern = doc.streamOf(event.streamId);
      if (pattern === undefined) problems.add(`${event.type} in ${event.streamId}: no documented stream is named so`);
      else if (!doc.types.get(event.type)?.has(pattern)) problems.add(`${event.type} is in ${pattern}, not documented there`);
    }
    expect([...problems]).to.deep.equal([]);
  });

  it('names every data field of each event, and each field it says is always there is', function () {
    const problems = new Set<string>();
    for (const event of events) for (const problem of fieldProblems(event.type, keysOf(event.data), doc.fields.get(event.type))) problems.add(problem);
    expect([...problems]).to.deep.equal([]);
  });

  it('gives each event the metadata its stream carries, as the Metadata table says', function () {
    const problems = new Set<string>();
    for (const event of events) {
      const pattern = doc.metadataStreamOf(event.streamId);
      const rule = pattern === undefined ? undefined : doc.metadata.get(pattern);
      for (const problem of fieldProblems(`metadata of ${event.type} in ${pattern ?? event.streamId}`, keysOf(event.metadata), rule)) problems.add(problem);
    }
    expect([...problems]).to.deep.equal([]);
  });

  it("keeps no consumer's personal value in clear: a stored lead has the fields of the documented example, with the rest sealed", function () {
    const text = JSON.stringify(events);
    expect(flows.personalValues.filter((value) => text.includes(value))).to.deep.equal([]);
    const leads = events.filter((event) => event.type === 'LeadReceived').map((event) => (event.data as { lead: unknown }).lead);
    expect(leads.filter((lead) => lead !== null)).to.not.be.empty;
    for (const lead of leads.filter((lead) => lead !== null)) expect(keysOf(lead)).to.have.members(doc.storedLeadFields);
  });

  it('has, for each versioned type, the current version and the upcasters of the History table', function () {
    const problems: string[] = [];
    for (const type of Object.keys(CODE_TYPES)) {
      const documented = doc.versions.get(type);
      const current = EVENT_CODEC.currentSchema(type);
      if (current !== documented?.current) problems.push(`${type}: the codec's current version is ${current}, the docs say ${documented?.current}`);
      for (let from = 0; from < (current ?? 0); from++) {
        const upcasts = readsFrom(type, from);
        if (upcasts !== documented?.upcasters.has(from)) problems.push(`${type}: ${upcasts ? 'an' : 'no'} upcaster from ${from} to ${from + 1}, the docs say otherwise`);
      }
    }
    expect(problems).to.deep.equal([]);
  });

  it('`leadpost events STREAM --json` prints the fields "Reading a stream" lists, a lead opened or erased', async function () {
    for (const field of CLI_JSON_FIELDS) expect(doc.cliSection, field).to.include(`\`${field}\``);
    const kept = await cli(leadStream(flows.keptLead));
    const erased = await cli(leadStream(flows.erasedLead));
    for (const line of [...kept, ...erased]) {
      expect(Object.keys(line)).to.have.members(CLI_JSON_FIELDS);
      expect(new Date(line.created).toISOString()).to.equal(line.created);
      expect(Object.keys(line.position)).to.have.members(['commit', 'prepare']);
    }
    const opened = kept.find((line) => line.type === 'LeadReceived')!.data.lead;
    expect(opened).to.include.keys('first_name', 'last_name', 'email', 'mobile', 'certificate_url').and.not.have.key('pii');
    const gone = erased.find((line) => line.type === 'LeadReceived')!.data.lead;
    expect(gone).to.include({ erased: true }).and.not.have.any.keys('pii', 'first_name', 'email', 'mobile');
    // Revision order, each event as the store holds it.
    expect(kept.map((line) => line.revision)).to.deep.equal(kept.map((_, i) => i));
  });
});

/** Whether the codec reads a `type` event stored in version `from` on to the next: it has an upcaster for it. */
function readsFrom(type: string, from: number): boolean {
  const recorded: RecordedEvent = { id: '0', streamId: 'x-1', revision: 0, position: { commit: 0, prepare: 0 }, type, data: {}, metadata: { schema: from }, created: 0 };
  try {
    EVENT_CODEC.decode('x-1', recorded);
    return true;
  } catch (error) {
    return !String(error).includes(`no upcaster from schema ${from} `);
  }
}

import { expect } from 'chai';
import type { Position, RecordedEvent } from '../../src/event-store/port.js';
import { type LeadReceived, leadStream } from '../../src/events/lead-events.js';
import type { MaybePromise, Projection, ProjectionContext } from '../../src/projections/projections.js';
import { checkpointName, collectionName } from '../../src/projections/runner.js';
import { EmbeddedReadModelStore } from '../../src/read-models/embedded.js';
import type { ReadWrite } from '../../src/read-models/port.js';
import type { NewLeadEvent, OtherStreamEvent } from './lead-events.js';
import { tempDir } from './tmp.js';

// Specifications of one projection, given events then rows, in the manner of Emmett's projection
// specifications: no HTTP layer, no event store. The events are recorded in a log of their own,
// with positions and stream revisions; each batch is folded through the projection's `handle` as
// the runner does it, and its writes are committed, with the batch's last position as checkpoint,
// to a real embedded read-model store in a fresh directory, so that the position guards, the
// documents' JSON form and the write semantics are the store's own. What the spec compares is every
// document of every collection the projection owns.
//
//   await projectionSpec(leadsProjection)
//     .given(...soldLead(1, 'acme', 25))
//     .when(leadDelivered(1, 'acme', 1, '2026-11-20T15:05:00.000Z'))
//     .then({ leads: { '1': { ... } } });

/** Documents by id, per base collection name (`leads`, not `leads_v1`), without their `_id`. */
type Rows = Record<string, Record<string, Record<string, unknown>>>;

type SpecEvent = NewLeadEvent | OtherStreamEvent | RecordedEvent;

const isRecorded = (event: SpecEvent): event is RecordedEvent => 'position' in event;

/** A uuid for the event at `position` when its factory gave none: stable, so a spec can name it. */
export const eventIdAt = (position: number): string => `01937a4e-0000-7000-8000-${String(position).padStart(12, '0')}`;

/** The positions of an embedded store: both parts equal, from 1. */
const positionAt = (n: number): Position => ({ commit: n, prepare: n });

/** `$all` as far as a spec goes: every event it has recorded, with its stream revision and position. */
class EventLog {
  private readonly all: RecordedEvent[] = [];
  private readonly revisions = new Map<string, number>();
  private last = 0;

  /** Records new events after the last one; events recorded already (a replay) are kept as they are. */
  record(...events: SpecEvent[]): RecordedEvent[] {
    return events.map((event) => {
      if (isRecorded(event)) {
        this.know(event);
        return event;
      }
      const streamId = 'streamId' in event ? event.streamId : leadStream(event.data.lead_id);
      const revision = (this.revisions.get(streamId) ?? -1) + 1;
      const position = positionAt(this.last + 1);
      const recorded: RecordedEvent = {
        id: event.id ?? eventIdAt(position.commit),
        streamId,
        revision,
        position,
        type: event.type,
        data: event.data,
        metadata: event.metadata,
        created: Date.parse(String(event.metadata.occurred_at)),
      };
      this.know(recorded);
      return recorded;
    });
  }

  /** The first event of a lead's stream, if it is its LeadReceived: what the runner reads for a lead it does not remember. */
  received(leadId: number): LeadReceived['data'] | null {
    const first = this.all.find((e) => e.streamId === leadStream(leadId) && e.revision === 0);
    return first?.type === 'LeadReceived' ? (first.data as LeadReceived['data']) : null;
  }

  private know(event: RecordedEvent): void {
    if (!this.all.some((e) => e.position.commit === event.position.commit)) this.all.push(event);
    this.revisions.set(event.streamId, Math.max(this.revisions.get(event.streamId) ?? -1, event.revision));
    this.last = Math.max(this.last, event.position.commit);
  }
}

/** Events recorded in a log of their own, from position 1: a history a spec hands in twice. */
export const recorded = (...events: Array<NewLeadEvent | OtherStreamEvent>): RecordedEvent[] => new EventLog().record(...events);

const TAG = 'spec';

interface Scenario {
  /** Events handled in a later batch, by a runner that has just started (it remembers no lead). */
  when(...events: SpecEvent[]): Scenario;
  /** Every document of every collection of the projection, exactly; a collection left out must be empty. */
  then(expected: Rows): Promise<void>;
  /** The documents, for a spec that compares two scenarios. */
  rows(): Promise<Rows>;
}

export interface ProjectionSpec {
  given(...events: SpecEvent[]): Scenario;
}

export function projectionSpec(projection: Projection): ProjectionSpec {
  const scenario = (batches: readonly SpecEvent[][]): Scenario => ({
    when: (...events) => scenario([...batches, events]),
    then: async (expected) => {
      const actual = await project(projection, batches);
      const wanted = Object.fromEntries(projection.collections.map((base) => [base, expected[base] ?? {}]));
      expect(Object.keys(expected).filter((base) => !projection.collections.includes(base)), `collections ${projection.name} does not own`).to.deep.equal([]);
      expect(actual).to.deep.equal(wanted);
    },
    rows: () => project(projection, batches),
  });
  return { given: (...events) => scenario([events]) };
}

/** Folds each batch through the projection and commits it, as the runner does; then reads every document back. */
async function project(projection: Projection, batches: readonly SpecEvent[][]): Promise<Rows> {
  const dir = tempDir('projection-spec');
  const store = EmbeddedReadModelStore.open(dir.path);
  try {
    for (const [base, indexes] of Object.entries(projection.indexes)) await store.ensureIndexes(collectionName(base, TAG), indexes);
    const log = new EventLog();
    const recordedBatches = batches.map((batch) => log.record(...batch));
    for (const batch of recordedBatches) {
      if (batch.length === 0) continue;
      // The runner remembers the LeadReceived of the leads it has handled; a lead from before it
      // started is read from its stream, and the projection gets a promise.
      const remembered = new Map<number, LeadReceived['data']>();
      const context: ProjectionContext = {
        collection: (base) => collectionName(base, TAG),
        received: (leadId): MaybePromise<LeadReceived['data'] | null> => remembered.get(leadId) ?? Promise.resolve(log.received(leadId)),
      };
      const writes: ReadWrite[] = [];
      for (const event of batch) {
        if (event.type === 'LeadReceived') {
          const data = event.data as LeadReceived['data'];
          remembered.set(data.lead_id, data);
        }
        writes.push(...(await projection.handle(event, context)));
      }
      await store.commit(checkpointName(projection, TAG), batch.at(-1)!.position, writes);
    }
    const rows: Rows = {};
    for (const base of projection.collections) {
      const docs = await store.find(collectionName(base, TAG), { sort: { field: '_id', direction: 'asc' }, limit: 100_000 });
      rows[base] = Object.fromEntries(docs.map(({ _id, ...doc }) => [_id, doc]));
    }
    return rows;
  } finally {
    await store.close();
    dir.remove();
  }
}

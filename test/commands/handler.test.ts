import { expect } from 'chai';
import { type Decider, MAX_RACES, StreamContendedError, handleCommand } from '../../src/commands/handler.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import { type EventStore, EventStoreUnavailableError } from '../../src/event-store/index.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';

// The one command handler every write goes through: read, fold, decide, append at the revision
// read, and on a conflict read what came since and decide again.

type Counted = { type: 'Counted'; data: { n: number } };
/** A counter that refuses to pass `max`: the shape of a cap. */
const counter: Decider<{ max: number }, number, Counted> = {
  initialState: 0,
  evolve: (state, event) => Math.max(state, event.data.n),
  decide: ({ max }, state) => (state < max ? [{ type: 'Counted', data: { n: state + 1 } }] : []),
};

describe('command handler', () => {
  const dir = tempDir('handler');
  let store: EventStore;
  before(async () => (store = await EmbeddedEventStore.open(dir.path)));
  after(async () => {
    await store.close();
    dir.remove();
  });

  it('decides on the folded stream, appends at the revision read and stamps the metadata on every event', async () => {
    const first = await handleCommand(store, 'count-a', counter, { max: 5 }, { metadata: { trace_id: 'a'.repeat(32) } });
    const second = await handleCommand(store, 'count-a', counter, { max: 5 }, { metadata: (state) => ({ seen: state }) });
    expect([first.state, first.revision, second.state, second.revision]).to.deep.equal([1, 0, 2, 1]);
    const events = await store.readStream('count-a');
    expect(events.map((e) => [e.data, e.metadata])).to.deep.equal([
      [{ n: 1 }, { trace_id: 'a'.repeat(32) }],
      [{ n: 2 }, { seen: 1 }],
    ]);
  });

  it('a decision of nothing appends nothing', async () => {
    const handled = await handleCommand(store, 'count-b', counter, { max: 0 });
    expect(handled.events).to.deep.equal([]);
    expect(await store.readStream('count-b')).to.deep.equal([]);
  });

  it('concurrent commands on one stream each decide on what the others did: none is lost, the limit holds', async () => {
    const results = await Promise.all(Array.from({ length: 12 }, () => handleCommand(store, 'count-c', counter, { max: 10 })));
    expect(results.filter((r) => r.events.length > 0)).to.have.length(10);
    expect((await store.readStream('count-c')).map((e) => (e.data as { n: number }).n)).to.deep.equal([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });

  it('a stream assumed new, or a state the caller knows, is decided on without a read; a conflict then reads', async () => {
    let reads = 0;
    const counting = overriding(store, { readStream: (name, options) => (reads++, store.readStream(name, options)) });
    await handleCommand(counting, 'count-d', counter, { max: 5 }, { assumeNew: true });
    expect(reads).to.equal(0);
    const handled = await handleCommand(counting, 'count-d', counter, { max: 5 }, { assumeNew: true });
    expect([reads, handled.state, handled.revision]).to.deep.equal([1, 2, 1]);
    await handleCommand(counting, 'count-d', counter, { max: 5 }, { from: handled });
    expect(reads).to.equal(1);
  });

  it(`a stream that changes under every decision gives up after ${MAX_RACES} races as contention, a retryable unavailability`, async () => {
    let n = 100;
    // Another writer appends between every read and every append of the command.
    const busy = overriding(store, {
      readStream: async (name, options) => {
        const events = await store.readStream(name, options);
        await store.append(name, [{ type: 'Counted', data: { n: n++ } }]);
        return events;
      },
    });
    let thrown: unknown;
    try {
      await handleCommand(busy, 'count-e', counter, { max: 1_000_000 });
    } catch (error) {
      thrown = error;
    }
    expect(thrown).to.be.instanceOf(StreamContendedError).and.instanceOf(EventStoreUnavailableError);
    expect((thrown as Error).message).to.include("'count-e'");
  });
});

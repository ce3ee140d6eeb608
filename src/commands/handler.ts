import {
  type EventData,
  type EventMetadata,
  type EventStore,
  EventStoreUnavailableError,
  type ExpectedRevision,
  WrongExpectedRevisionError,
} from '../event-store/port.js';

// Every write of the service goes through `handleCommand`: read the stream, fold it with the
// decider, decide, append at the revision read, and on a conflict (another request or instance
// appended first) read what it did and decide again. Each rule that spans requests — one lead per
// idempotency key, one holder per contact, a cap never exceeded, unique lead ids — is a decider of
// its own stream, so it holds the same way with one process or many.

export interface DomainEvent<Type extends string = string, Data = unknown> {
  readonly type: Type;
  readonly data: Data;
}

/** An event as a fold sees it: read from the store (with its metadata) or just decided. */
type StreamEvent<Event extends DomainEvent> = Event & { readonly metadata?: EventMetadata };

export interface Decider<Command, State, Event extends DomainEvent> {
  readonly initialState: State;
  evolve(state: State, event: StreamEvent<Event>): State;
  /** The events the command causes in this state; none when there is nothing to do. Throws to refuse. */
  decide(command: Command, state: State): Event[] | Promise<Event[]>;
}

/** A stream folded up to `revision` (−1: the stream does not exist yet). */
export interface Folded<State> {
  readonly state: State;
  readonly revision: number;
}

export interface HandleOptions<State> {
  /** Stamped on every event appended: the trace, principal and cause of the change. */
  readonly metadata?: EventMetadata | ((state: State) => EventMetadata);
  /**
   * What the caller believes the stream holds (what it folded before, or what it just appended):
   * the first decision is made on it without a read, and only a conflict reads what came since.
   */
  readonly from?: Folded<State>;
  /** The stream is usually new (a fresh contact, key or lead): decide on it as new, before reading anything. */
  readonly assumeNew?: boolean;
}

export interface Handled<State, Event extends DomainEvent> extends Folded<State> {
  /** What this command appended (empty when it decided nothing). */
  readonly events: Event[];
}

/** How many conflicts in a row a command takes before giving up: the same for every stream. */
export const MAX_RACES = 50;

/** The stream kept changing under the command: contention, not a fault; a retry may succeed. */
export class StreamContendedError extends EventStoreUnavailableError {
  constructor(stream: string) {
    super(`stream '${stream}' changed ${MAX_RACES} times while a command was deciding on it`);
  }
}

export async function readFolded<State, Event extends DomainEvent>(
  store: EventStore,
  stream: string,
  decider: Pick<Decider<unknown, State, Event>, 'evolve' | 'initialState'>,
  from: Folded<State> = { state: decider.initialState, revision: -1 },
): Promise<Folded<State>> {
  const events = await store.readStream(stream, { fromRevision: from.revision + 1 });
  let { state, revision } = from;
  for (const event of events) {
    state = decider.evolve(state, event as unknown as StreamEvent<Event>);
    revision = event.revision;
  }
  return { state, revision };
}

export async function handleCommand<Command, State, Event extends DomainEvent>(
  store: EventStore,
  stream: string,
  decider: Decider<Command, State, Event>,
  command: Command,
  options: HandleOptions<State> = {},
): Promise<Handled<State, Event>> {
  const believed = options.from ?? (options.assumeNew ? { state: decider.initialState, revision: -1 } : undefined);
  let folded = believed ?? (await readFolded(store, stream, decider));
  for (let race = 0; race < MAX_RACES; race++) {
    // Most deciders answer at once; awaiting an array would still cost a turn of the microtask queue.
    const decided = decider.decide(command, folded.state);
    const events = Array.isArray(decided) ? decided : await decided;
    if (events.length === 0) return { ...folded, events };
    const metadata = typeof options.metadata === 'function' ? options.metadata(folded.state) : options.metadata;
    const data: EventData[] = events.map((event) => (metadata ? { type: event.type, data: event.data, metadata } : { type: event.type, data: event.data }));
    const expectedRevision: ExpectedRevision = folded.revision < 0 ? 'no_stream' : folded.revision;
    try {
      const appended = await store.append(stream, data, { expectedRevision });
      let state = folded.state;
      for (const event of events) state = decider.evolve(state, metadata ? { ...event, metadata } : event);
      return { state, revision: appended.nextExpectedRevision, events };
    } catch (error) {
      if (!(error instanceof WrongExpectedRevisionError)) throw error;
      folded = await readFolded(store, stream, decider, folded);
    }
  }
  throw new StreamContendedError(stream);
}

import type { EventData, EventMetadata, RecordedEvent } from '../../event-store/port.js';

// The one place between the domain and the event store where an event's stored form may differ
// from the form the domain reads. Events are facts and never rewritten: when the layout of a type
// changes, the type's version (`metadata.schema`) goes up by one and an upcaster turns data of
// the old version into the new one as it is read, so every reader (commands, projections, the
// CLI, a replay) only ever sees the current layout. The stored form of a type may also be sealed
// (its personal fields encrypted, src/events/codec/lead-received-sealer.ts) on encode, after the
// version is stamped; sealing may need the key store, so encode may return a promise. Decoding
// never opens sealed fields: the few readers that show personal data open them (openLead), so
// projections and replays, which never need them, pay nothing for encryption. An event with
// nothing to seal or upcast is returned as the same object.

/** Turns the data of one type from version `from` into version `to` (always `from + 1`). */
export interface Upcaster {
  readonly type: string;
  readonly from: number;
  readonly to: number;
  /** Pure: returns new data, never changes its input (the store may share decoded events between readers). */
  up(data: unknown, metadata: EventMetadata): unknown;
}

/** Where a sealed event belongs: its ciphertext is bound to these, so it cannot be moved. */
export interface SealContext {
  readonly streamId: string;
  readonly type: string;
}

/** Seals the personal fields of one type's data as it is stored (they are opened by the readers that show them). */
export interface Sealer {
  readonly type: string;
  /** The data as stored (the same object when there is nothing to seal). */
  seal(data: unknown, context: SealContext): unknown;
}

export interface EventCodecOptions {
  /** The current version of each type the codec knows. Types not named pass through as stored. */
  readonly current: Readonly<Record<string, number>>;
  readonly upcasters?: readonly Upcaster[];
  readonly sealers?: readonly Sealer[];
}

/** A value, or a promise of one when it needed the key store. */
export type MaybePromise<T> = T | Promise<T>;

/**
 * An event could not be read in the current layout. It names the event (type, version, stream,
 * revision, id) and never its data: a lead's data holds personal fields.
 */
export class EventDecodeError extends Error {
  override readonly name = 'EventDecodeError';
  constructor(
    readonly streamId: string,
    readonly eventType: string,
    readonly schema: unknown,
    reason: string,
    options?: { revision?: number; eventId?: string },
  ) {
    const where = options?.revision === undefined ? streamId : `${streamId}@${options.revision}`;
    super(`cannot read ${eventType} schema ${JSON.stringify(schema)} of stream ${where}${options?.eventId ? ` (event ${options.eventId})` : ''}: ${reason}`);
  }
}

/** An event was appended in a layout other than its type's current one: a bug in the writer. */
export class EventEncodeError extends Error {
  override readonly name = 'EventEncodeError';
  constructor(
    readonly streamId: string,
    readonly eventType: string,
    readonly schema: unknown,
    current: number,
  ) {
    super(`cannot append ${eventType} schema ${JSON.stringify(schema)} to stream ${streamId}: events are written in their current schema, ${current}`);
  }
}

/**
 * What an upcaster throws when data cannot be upcast. Its message is written for the error a
 * reader sees, so it says what is missing or wrong and never quotes a value of the event.
 */
export class UpcastError extends Error {
  override readonly name = 'UpcastError';
}

export class EventCodec {
  private readonly current: ReadonlyMap<string, number>;
  /** Upcasters by type, then by the version they read. */
  private readonly upcasters = new Map<string, Map<number, Upcaster>>();
  private readonly sealers = new Map<string, Sealer>();

  constructor(options: EventCodecOptions) {
    this.current = new Map(Object.entries(options.current));
    for (const [type, version] of this.current) {
      if (!Number.isSafeInteger(version) || version < 0) throw new Error(`the current schema of ${type} must be a whole number ≥ 0, not ${version}`);
    }
    for (const upcaster of options.upcasters ?? []) {
      const { type, from, to } = upcaster;
      const current = this.current.get(type);
      if (current === undefined) throw new Error(`an upcaster of ${type}, a type with no current schema`);
      if (!Number.isSafeInteger(from) || from < 0 || to !== from + 1 || to > current) {
        throw new Error(`the upcaster of ${type} from ${from} to ${to} must go one version up, to at most ${current}`);
      }
      const byVersion = this.upcasters.get(type) ?? new Map<number, Upcaster>();
      if (byVersion.has(from)) throw new Error(`two upcasters of ${type} from schema ${from}`);
      this.upcasters.set(type, byVersion.set(from, upcaster));
    }
    for (const sealer of options.sealers ?? []) {
      const current = this.current.get(sealer.type);
      if (current === undefined) throw new Error(`a sealer of ${sealer.type}, a type with no current schema`);
      if (this.sealers.has(sealer.type)) throw new Error(`two sealers of ${sealer.type}`);
      this.sealers.set(sealer.type, sealer);
    }
  }

  /** The current version of a type, or undefined when the codec does not know it. */
  currentSchema(type: string): number | undefined {
    return this.current.get(type);
  }

  /**
   * The event as it is stored. An event of a known type gets its current version stamped when it
   * has none; it is returned as is (the same object) when it already carries it and has nothing
   * to seal. A type with a sealer has its personal fields sealed (a promise when the key pool
   * had to be refilled first).
   */
  encode(streamId: string, event: EventData): MaybePromise<EventData> {
    const current = this.current.get(event.type);
    if (current === undefined) return event;
    const schema = event.metadata?.schema;
    if (schema !== current && schema !== undefined) throw new EventEncodeError(streamId, event.type, schema, current);
    const stamped = schema === current ? event : { ...event, metadata: { ...event.metadata, schema: current } };
    const sealer = this.sealers.get(event.type);
    if (!sealer) return stamped;
    const sealed = sealer.seal(stamped.data, { streamId, type: event.type });
    const withData = (data: unknown): EventData => (data === stamped.data ? stamped : { ...stamped, data });
    return sealed instanceof Promise ? sealed.then(withData) : withData(sealed);
  }

  /**
   * The event in its type's current layout. The usual case, an event written in the current
   * version or of a type the codec does not know, is one lookup and a comparison, and returns the
   * same object. An older event is upcast one version at a time; its metadata then says the
   * current version and, in `stored_schema`, the one it was written with. Sealed personal data
   * stays sealed: only the few readers that show it open it (openLead), so that projections and
   * replays, which never need it, pay nothing for it.
   */
  decode(streamId: string, recorded: RecordedEvent): RecordedEvent {
    const current = this.current.get(recorded.type);
    if (current === undefined) return recorded;
    const schema = recorded.metadata.schema ?? 0;
    if (schema === current) return recorded;
    return this.upcast(streamId, recorded, schema, current);
  }

  private upcast(streamId: string, recorded: RecordedEvent, schema: unknown, current: number): RecordedEvent {
    const fail = (reason: string) => new EventDecodeError(streamId, recorded.type, schema, reason, { revision: recorded.revision, eventId: recorded.id });
    if (typeof schema !== 'number' || !Number.isSafeInteger(schema) || schema < 0) throw fail('the schema is not a version number');
    if (schema > current) throw fail(`written by a newer release: this one reads up to schema ${current}`);
    const byVersion = this.upcasters.get(recorded.type);
    let data = recorded.data;
    for (let version = schema; version < current; version++) {
      const upcaster = byVersion?.get(version);
      if (!upcaster) throw fail(`no upcaster from schema ${version} to ${version + 1}`);
      try {
        data = upcaster.up(data, recorded.metadata);
      } catch (error) {
        // An UpcastError's message is written not to quote the data; any other error's message
        // might (a JSON.parse error does), and logs print causes too, so only its name is kept.
        const why = error instanceof UpcastError ? error.message : `${error instanceof Error ? error.name : typeof error} (its message is withheld: it may quote the event's data)`;
        throw fail(`the upcaster from schema ${version} to ${version + 1} failed: ${why}`);
      }
    }
    return { ...recorded, data, metadata: { ...recorded.metadata, schema: current, stored_schema: schema } };
  }
}

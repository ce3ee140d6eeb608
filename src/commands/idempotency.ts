import { hash } from 'node:crypto';
import { type EventStore, WrongExpectedRevisionError } from '../event-store/index.js';
import type { DecisionEnvelope } from '../http/envelope.js';
import { MAX_RACES, hashedStream } from './streams.js';

// Idempotency-Key, per supplier, kept 72 h. The key's stream records a claim before the lead is
// processed and the response after; the claim is an append at the revision read, so of several
// concurrent requests with one key exactly one processes the lead and the others see it in flight.

export const IDEMPOTENCY_TTL_MS = 72 * 3_600_000;
/** A claim older than this with no response is from a process that died: it may be taken over. */
export const IN_FLIGHT_STALE_MS = 30_000;

export interface StoredResponse {
  readonly status: number;
  readonly envelope: DecisionEnvelope;
}

export type IdempotencyClaim =
  | { readonly kind: 'claimed'; complete(response: StoredResponse): Promise<void>; abandon(): Promise<void> }
  | { readonly kind: 'replay'; readonly response: StoredResponse }
  | { readonly kind: 'in_flight' }
  | { readonly kind: 'other_body' };

type KeyState =
  | { readonly kind: 'free' }
  | { readonly kind: 'in_flight'; readonly hash: string; readonly at: number }
  | { readonly kind: 'done'; readonly hash: string; readonly at: number; readonly response: StoredResponse };

interface KeyEvent {
  readonly type: string;
  readonly data: { request_hash?: string; at: string; status?: number; envelope?: DecisionEnvelope };
}

function fold(events: readonly KeyEvent[]): KeyState {
  let state: KeyState = { kind: 'free' };
  for (const { type, data } of events) {
    if (type === 'IdempotencyKeyClaimed') state = { kind: 'in_flight', hash: data.request_hash!, at: Date.parse(data.at) };
    else if (type === 'IdempotencyKeyReleased') state = { kind: 'free' };
    else if (type === 'IdempotentResponseRecorded' && state.kind === 'in_flight') {
      state = { kind: 'done', hash: state.hash, at: state.at, response: { status: data.status!, envelope: data.envelope! } };
    }
  }
  return state;
}

export const requestHash = (body: Buffer): string => hash('sha256', body, 'hex');

export class IdempotencyKeys {
  constructor(
    private readonly store: EventStore,
    private readonly now: () => number = Date.now,
  ) {}

  async claim(supplier: string, key: string, body: Buffer): Promise<IdempotencyClaim> {
    const stream = hashedStream('idempotency', supplier, key);
    const hash = requestHash(body);
    for (let race = 0; race < MAX_RACES; race++) {
      // A key is usually new: the first try claims it as a new stream without reading it.
      const events = race === 0 ? [] : await this.store.readStream(stream);
      const state = fold(events as unknown as KeyEvent[]);
      const now = this.now();
      if (state.kind === 'done' && now - state.at < IDEMPOTENCY_TTL_MS) {
        return state.hash === hash ? { kind: 'replay', response: state.response } : { kind: 'other_body' };
      }
      if (state.kind === 'in_flight' && now - state.at < IN_FLIGHT_STALE_MS) {
        return state.hash === hash ? { kind: 'in_flight' } : { kind: 'other_body' };
      }
      try {
        const claimed = await this.store.append(
          stream,
          [{ type: 'IdempotencyKeyClaimed', data: { request_hash: hash, at: new Date(now).toISOString() } }],
          { expectedRevision: events.length === 0 ? 'no_stream' : events.length - 1 },
        );
        const revision = claimed.nextExpectedRevision;
        return {
          kind: 'claimed',
          complete: async (response) => {
            await this.store.append(
              stream,
              [{ type: 'IdempotentResponseRecorded', data: { at: new Date(this.now()).toISOString(), ...response } }],
              { expectedRevision: revision },
            );
          },
          // Nothing was recorded (the store failed): let the client's retry go through at once.
          abandon: async () => {
            await this.store.append(stream, [{ type: 'IdempotencyKeyReleased', data: { at: new Date(this.now()).toISOString() } }], {
              expectedRevision: revision,
            });
          },
        };
      } catch (error) {
        if (!(error instanceof WrongExpectedRevisionError)) throw error;
      }
    }
    throw new Error(`could not claim an idempotency key after ${MAX_RACES} races`);
  }
}

import type { LeadPinged, PingBid, PingBidsCollected, PingEvent, PingIssued, PingPosted } from '../../events/ping-events.js';
import type { NormalisedPing } from '../../leads/validate.js';
import type { Decider } from '../handler.js';

// The deciders of a ping's streams. The ping's own stream is written twice: once when it is
// answered (LeadPinged and PingBidsCollected in one append, new by construction) and once when
// its lead is posted (PingPosted at the revision read, so of two posts racing, one is refused).
// The lookup stream of a supplier's fields remembers its latest ping, so a repeat before expiry
// gets the same answer and no buyer is asked twice. Of two processes answering the same fields
// at once, the first to append the ping's stream is the one recorded (see ping.ts).

export interface PingState {
  readonly pinged: LeadPinged['data'] | null;
  readonly collected: PingBidsCollected['data'] | null;
  readonly posted: PingPosted['data'] | null;
}

const initialPingState: PingState = { pinged: null, collected: null, posted: null };

export interface AnswerPing {
  readonly type: 'AnswerPing';
  readonly pingId: string;
  readonly supplier: string;
  readonly keyId: string;
  readonly ping: NormalisedPing;
  readonly now: Date;
  readonly expiresAt: Date;
  readonly bids: PingBid[];
  readonly winner: PingBidsCollected['data']['winner'];
  readonly currency: string;
}

export interface PostPing {
  readonly type: 'PostPing';
  readonly leadId: number;
  /**
   * The lead of an earlier PingPosted that was never recorded (its post failed or its process
   * died between the two appends): this post takes the ping over from it.
   */
  readonly replacing?: number;
  readonly buyer: string | null;
  readonly amount: number | null;
  readonly now: Date;
}

/** The post of `leadId` could not record its lead: its PingPosted is taken back (nothing when another post holds the ping). */
export interface ReleasePing {
  readonly type: 'ReleasePing';
  readonly leadId: number;
  readonly now: Date;
}

export class PingConsumedError extends Error {
  constructor(pingId: string) {
    super(`ping ${pingId} was already posted`);
  }
}

export const pingDecider: Decider<AnswerPing | PostPing | ReleasePing, PingState, PingEvent> = {
  initialState: initialPingState,
  evolve(state, event) {
    switch (event.type) {
      case 'LeadPinged':
        return { ...state, pinged: event.data };
      case 'PingBidsCollected':
        return { ...state, collected: event.data };
      case 'PingPosted':
        return { ...state, posted: event.data };
      case 'PingPostReleased':
        return state.posted?.lead_id === event.data.lead_id ? { ...state, posted: null } : state;
      default:
        return state;
    }
  },
  decide(command, state) {
    if (command.type === 'AnswerPing') {
      // Answered already: another process ran the same round (the ping id is derived from the
      // round) and recorded it first. Its answer stands; this one records nothing.
      if (state.pinged) return [];
      const { ping, now } = command;
      const source = { ping_id: command.pingId, supplier: command.supplier, sid: ping.sid, accident_state: ping.accident_state, test: ping.test, pinged_at: now.toISOString() };
      return [
        { type: 'LeadPinged', data: { ...source, key_id: command.keyId, zip: ping.zip, s1: ping.s1, expires_at: command.expiresAt.toISOString() } },
        { type: 'PingBidsCollected', data: { ...source, bids: command.bids, winner: command.winner, currency: command.currency, collected_at: now.toISOString() } },
      ];
    }
    if (command.type === 'ReleasePing') {
      const posted = state.posted;
      if (!posted || posted.lead_id !== command.leadId) return [];
      const { posted_at: _postedAt, ...released } = posted;
      return [{ type: 'PingPostReleased', data: { ...released, released_at: command.now.toISOString() } }];
    }
    if (!state.pinged) throw new Error('a ping must be answered before it is posted');
    if (state.posted && state.posted.lead_id !== command.replacing) throw new PingConsumedError(state.pinged.ping_id);
    const { key_id: _keyId, zip: _zip, s1: _s1, expires_at: _expires, ...source } = state.pinged;
    return [{ type: 'PingPosted', data: { ...source, lead_id: command.leadId, buyer: command.buyer, amount: command.amount, posted_at: command.now.toISOString() } }];
  },
};

/** The latest ping of one supplier's fields: its id and expiry. */
export type PingLookup = PingIssued['data'] | null;

/** Remember a ping under its fields, in place of the one the lookup held when it was read (null: none). */
interface RecordPing {
  readonly issued: PingIssued['data'];
  readonly replaces: string | null;
}

export const pingLookupDecider: Decider<RecordPing, PingLookup, PingIssued> = {
  initialState: null,
  evolve: (_state, event) => event.data,
  // Recorded only over what was read, and once: when the lookup changed since, it holds this very
  // ping (another process answered the same round first) or a newer one, and stays as it is.
  decide: (command, state) => {
    const held = state?.ping_id ?? null;
    return held === command.replaces && held !== command.issued.ping_id ? [{ type: 'PingIssued', data: command.issued }] : [];
  },
};

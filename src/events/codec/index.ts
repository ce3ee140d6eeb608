import type { PersonalDataKeys } from '../../personal-data/index.js';
import { LEAD_EVENT_SCHEMA, LEAD_RECEIVED_SCHEMA, type LeadEvent } from '../lead-events.js';
import type { PingEvent } from '../ping-events.js';
import { EventCodec, type Upcaster } from './codec.js';
import { idempotentResponseV0 } from './idempotent-response-v0.js';
import { leadReceivedSealer } from './lead-received-sealer.js';
import { leadReceivedV0 } from './lead-received-v0.js';

export { EventCodec, EventDecodeError, EventEncodeError, UpcastError, type Upcaster,  } from './codec.js';
export { codedEventStore } from './coded-event-store.js';
export { SealedLeadError, openLead } from './lead-received-sealer.js';

// The versions and upcasters of leadpost's events (docs/events.md, "Schema versions and
// upcasting", tells their history). Types not listed here (the other support-stream events, the
// API keys) have never changed layout: they pass through as stored, and the first change of one lists it.

/** The current version of every event of a lead's stream: a type missing here fails to compile. */
const LEAD_EVENT_VERSIONS: Record<LeadEvent['type'], number> = {
  LeadReceived: LEAD_RECEIVED_SCHEMA,
  LeadRejected: LEAD_EVENT_SCHEMA,
  LeadEnriched: LEAD_EVENT_SCHEMA,
  LeadRouted: LEAD_EVENT_SCHEMA,
  LeadSold: LEAD_EVENT_SCHEMA,
  LeadPingMatched: LEAD_EVENT_SCHEMA,
  LeadDeliveryAttempted: LEAD_EVENT_SCHEMA,
  LeadDelivered: LEAD_EVENT_SCHEMA,
  LeadDeliveryFailed: LEAD_EVENT_SCHEMA,
  LeadRedeliveryRequested: LEAD_EVENT_SCHEMA,
  FeedbackRecorded: LEAD_EVENT_SCHEMA,
  LeadReturned: LEAD_EVENT_SCHEMA,
  LeadPersonalDataErased: LEAD_EVENT_SCHEMA,
  LeadPersonalDataExpired: LEAD_EVENT_SCHEMA,
  LeadDeliveryCancelled: LEAD_EVENT_SCHEMA,
  ErasureNoticeSent: LEAD_EVENT_SCHEMA,
  ErasureNoticeFailed: LEAD_EVENT_SCHEMA,
  ErasureNoticeRedeliveryRequested: LEAD_EVENT_SCHEMA,
};

/** Version 1 only began stamping the version: apart from LeadReceived the data did not change. */
const stampedOnly = (type: string): Upcaster => ({ type, from: 0, to: 1, up: (data) => data });

/** Lead events with nothing to upcast: LeadReceived has upcasters of its own, the others were first written at version 1. */
const WRITTEN_FROM_VERSION_1 = new Set(['LeadReceived', 'LeadPingMatched', 'LeadRedeliveryRequested', 'ErasureNoticeRedeliveryRequested']);

/** Version 2 of LeadReceived only encrypted the personal fields: a version-1 event is read as written, in clear. */
const leadReceivedV1: Upcaster = { type: 'LeadReceived', from: 1, to: 2, up: (data) => data };

/** A ping's stream (src/events/ping-events.ts): written from version 1 on, so no upcaster yet. */
const PING_EVENT_VERSIONS: Record<PingEvent['type'], number> = { LeadPinged: 1, PingBidsCollected: 1, PingPosted: 1, PingPostReleased: 1 };

/** Support-stream events whose layout changed: the idempotency stream once kept an HTTP answer. */
const SUPPORT_EVENT_VERSIONS = { IdempotentResponseRecorded: 1 };

/**
 * The codec of leadpost's events, sealing personal data with `keys`. Without keys (a benchmark
 * measuring what encryption costs) leads are written in clear, and an encrypted one cannot be read.
 */
export function eventCodec(keys: PersonalDataKeys | null): EventCodec {
  return new EventCodec({
    current: { ...LEAD_EVENT_VERSIONS, ...PING_EVENT_VERSIONS, ...SUPPORT_EVENT_VERSIONS },
    upcasters: [
      leadReceivedV0,
      leadReceivedV1,
      idempotentResponseV0,
      ...Object.keys(LEAD_EVENT_VERSIONS).filter((type) => !WRITTEN_FROM_VERSION_1.has(type)).map(stampedOnly),
    ],
    sealers: [leadReceivedSealer(keys)],
  });
}

/** The codec without data keys: versions and upcasters only. */
export const EVENT_CODEC = eventCodec(null);

import { LEAD_EVENT_SCHEMA, type LeadEvent } from '../lead-events.js';
import type { PingEvent } from '../ping-events.js';
import { EventCodec, type Upcaster } from './codec.js';
import { idempotentResponseV0 } from './idempotent-response-v0.js';
import { leadReceivedV0 } from './lead-received-v0.js';

export { EventCodec, EventDecodeError, EventEncodeError, UpcastError, type Upcaster,  } from './codec.js';
export { codedEventStore } from './coded-event-store.js';

// The versions and upcasters of leadpost's events (docs/events.md, "Schema versions and
// upcasting", tells their history). Types not listed here (the other support-stream events, the
// API keys) have never changed layout: they pass through as stored, and the first change of one lists it.

/** The current version of every event of a lead's stream: a type missing here fails to compile. */
const LEAD_EVENT_VERSIONS: Record<LeadEvent['type'], number> = {
  LeadReceived: LEAD_EVENT_SCHEMA,
  LeadRejected: LEAD_EVENT_SCHEMA,
  LeadEnriched: LEAD_EVENT_SCHEMA,
  LeadRouted: LEAD_EVENT_SCHEMA,
  LeadSold: LEAD_EVENT_SCHEMA,
  LeadPingMatched: LEAD_EVENT_SCHEMA,
  LeadDeliveryAttempted: LEAD_EVENT_SCHEMA,
  LeadDelivered: LEAD_EVENT_SCHEMA,
  LeadDeliveryFailed: LEAD_EVENT_SCHEMA,
  FeedbackRecorded: LEAD_EVENT_SCHEMA,
  LeadReturned: LEAD_EVENT_SCHEMA,
};

/** Version 1 only began stamping the version: apart from LeadReceived the data did not change. */
const stampedOnly = (type: string): Upcaster => ({ type, from: 0, to: 1, up: (data) => data });

/** A ping's stream (src/events/ping-events.ts): written from version 1 on, so no upcaster yet. */
const PING_EVENT_VERSIONS: Record<PingEvent['type'], number> = { LeadPinged: 1, PingBidsCollected: 1, PingPosted: 1 };

/** Support-stream events whose layout changed: the idempotency stream once kept an HTTP answer. */
const SUPPORT_EVENT_VERSIONS = { IdempotentResponseRecorded: 1 };

export const EVENT_CODEC = new EventCodec({
  current: { ...LEAD_EVENT_VERSIONS, ...PING_EVENT_VERSIONS, ...SUPPORT_EVENT_VERSIONS },
  upcasters: [leadReceivedV0, idempotentResponseV0, ...Object.keys(LEAD_EVENT_VERSIONS).filter((type) => type !== 'LeadReceived' && type !== 'LeadPingMatched').map(stampedOnly)],
});

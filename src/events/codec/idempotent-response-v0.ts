import type { LeadOutcome } from '../../leads/outcome.js';
import { UpcastError, type Upcaster } from './codec.js';

// IdempotentResponseRecorded as it was first written (version 0): the HTTP answer itself, status
// and decision envelope, so the wire shape had become an event's shape. Version 1 keeps what the
// domain decided, the lead's outcome, and the trace id of the request that got it; the HTTP shell
// renders a replay from those exactly as it rendered the original.

interface ResponseV0 {
  readonly at: string;
  readonly status: number;
  readonly envelope: Omit<LeadOutcome, 'errors' | 'test'> & { trace_id: string; errors?: LeadOutcome['errors']; test?: true };
}

export const idempotentResponseV0: Upcaster = {
  type: 'IdempotentResponseRecorded',
  from: 0,
  to: 1,
  up(data) {
    const { at, envelope } = data as Partial<ResponseV0>;
    if (typeof at !== 'string' || typeof envelope !== 'object' || envelope === null || typeof envelope.trace_id !== 'string') {
      throw new UpcastError('a version-0 IdempotentResponseRecorded needs at and an envelope with a trace_id');
    }
    const { lead_id, code, lead_status, sold, revenue, currency, errors, test } = envelope;
    const outcome: LeadOutcome = {
      lead_id,
      code,
      lead_status,
      sold,
      revenue,
      currency,
      ...(errors ? { errors } : {}),
      ...(test ? { test } : {}),
    };
    return { at, outcome, trace_id: envelope.trace_id };
  },
};

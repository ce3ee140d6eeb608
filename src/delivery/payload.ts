import type { LeadReceived, LeadSold } from '../events/lead-events.js';
import { type ErasedLead, type NormalisedLead, isErased } from '../leads/lead.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, signDelivery } from './signature.js';

// What a buyer's endpoint receives: the lead as we normalised it, the supplier's tracking fields
// and the price the buyer pays. Internal fields (certificate id, test flag, key id) stay home.

/** The consumer fields a buyer receives. */
type DeliveredLead = Pick<
  NormalisedLead,
  'first_name' | 'last_name' | 'email' | 'mobile' | 'mobile_national' | 'zip' | 'zip4' | 'accident_state' | 'certificate_url'
>;

export interface DeliveryBody {
  readonly lead_id: number;
  readonly sid: string | null;
  readonly s1: string | null;
  readonly price: number;
  readonly currency: string;
  readonly lead: DeliveredLead | null;
}

/** The body of a delivery; `lead` is the received lead opened (its personal fields in clear, or erased). */
export function deliveryBody(received: LeadReceived['data'], lead: NormalisedLead | ErasedLead | null, sale: LeadSold['data']): DeliveryBody {
  return {
    lead_id: sale.lead_id,
    sid: received.sid,
    s1: received.s1,
    price: sale.revenue,
    currency: sale.currency,
    // An erased lead has no personal data left to deliver.
    lead: lead === null || isErased(lead) ? null : {
      first_name: lead.first_name,
      last_name: lead.last_name,
      email: lead.email,
      mobile: lead.mobile,
      mobile_national: lead.mobile_national,
      zip: lead.zip,
      zip4: lead.zip4,
      accident_state: lead.accident_state,
      certificate_url: lead.certificate_url,
    },
  };
}

/** The same key on every attempt of a lead, so the buyer can drop a copy we could not know it had. */
const idempotencyKey = (leadId: number): string => `lead-${leadId}`;

export function deliveryHeaders(leadId: number, body: string, now: Date, secret: string | null): Record<string, string> {
  const timestamp = String(Math.floor(now.getTime() / 1000));
  const headers: Record<string, string> = {
    'Content-Type': 'application/json',
    'Idempotency-Key': idempotencyKey(leadId),
    [TIMESTAMP_HEADER]: timestamp,
  };
  if (secret) headers[SIGNATURE_HEADER] = signDelivery(secret, timestamp, body);
  return headers;
}

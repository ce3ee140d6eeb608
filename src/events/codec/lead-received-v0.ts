import type { LeadReceived } from '../lead-events.js';
import type { NormalisedLead } from '../../leads/lead.js';
import { UpcastError, type Upcaster } from './codec.js';

// LeadReceived as the first releases wrote it, before lead events carried `metadata.schema`
// (version 0). The supplier's source fields and the state were kept only inside the normalised
// lead, so a lead that failed validation (lead null) recorded none of them; the lead kept the ZIP
// code as posted (five digits, or ZIP+4 as `90210-1234`) and the mobile only in E.164. Those
// releases took North American (+1) numbers only.

/** The normalised lead of a version-0 LeadReceived. */
interface LeadV0 {
  readonly first_name: string;
  readonly last_name: string;
  readonly email: string;
  /** E.164, always +1 in version 0. */
  readonly mobile: string;
  /** As posted: `90210` or `90210-1234`. */
  readonly zip: string;
  readonly accident_state: string;
  readonly certificate_url: string;
  readonly certificate_id: string;
  readonly sid: string;
  readonly s1: string | null;
  readonly test: boolean;
}

export interface LeadReceivedV0Data {
  readonly lead_id: number;
  readonly supplier: string;
  readonly key_id: string;
  readonly test: boolean;
  readonly lead: LeadV0 | null;
  readonly received_at: string;
}

const NANP = /^\+1(\d{10})$/;
const ZIP = /^(\d{5})(?:-(\d{4}))?$/;

function upcastLead(lead: LeadV0): NormalisedLead {
  const national = NANP.exec(lead.mobile);
  if (!national) throw new UpcastError('the mobile is not a North American E.164 number');
  const zip = ZIP.exec(lead.zip);
  if (!zip) throw new UpcastError('the ZIP code is neither five digits nor ZIP+4');
  return {
    first_name: lead.first_name,
    last_name: lead.last_name,
    email: lead.email,
    mobile: lead.mobile,
    mobile_national: national[1]!,
    zip: zip[1]!,
    zip4: zip[2] ?? null,
    accident_state: lead.accident_state,
    certificate_url: lead.certificate_url,
    certificate_id: lead.certificate_id,
    sid: lead.sid,
    s1: lead.s1,
    test: lead.test,
  };
}

export const leadReceivedV0: Upcaster = {
  type: 'LeadReceived',
  from: 0,
  to: 1,
  up(data): LeadReceived['data'] {
    if (typeof data !== 'object' || data === null) throw new UpcastError('the data is not an object');
    const v0 = data as LeadReceivedV0Data;
    if (v0.lead != null && (typeof v0.lead !== 'object' || typeof v0.lead.mobile !== 'string' || typeof v0.lead.zip !== 'string')) {
      throw new UpcastError('the lead has no mobile or ZIP code');
    }
    const lead = v0.lead == null ? null : upcastLead(v0.lead);
    return {
      lead_id: v0.lead_id,
      supplier: v0.supplier,
      key_id: v0.key_id,
      sid: lead?.sid ?? null,
      s1: lead?.s1 ?? null,
      accident_state: lead?.accident_state ?? null,
      test: v0.test,
      lead,
      received_at: v0.received_at,
    };
  },
};

import type { PersonalDataKeys } from '../../personal-data/index.js';
import { type Sealed, open, seal } from '../../personal-data/aes-gcm.js';
import { type DataKey, UnknownDataKeyError } from '../../personal-data/data-keys.js';
import { type ErasedLead, type NormalisedLead, PERSONAL_FIELDS, type PiiEnvelope, type StoredLead } from '../../leads/lead.js';
import { leadStream } from '../lead-events.js';
import type { SealContext, Sealer } from './codec.js';

// LeadReceived version 2: the consumer's personal fields (names, e-mail, mobile, consent
// certificate) are stored as one envelope encrypted with a data key of the lead, in place of the
// fields; the rest of the lead (ZIP, state, sid, s1, test) stays clear for projections and
// reports. AES-256-GCM with the stream and the event type as additional data, so an envelope
// moved to another event does not open. The envelope names its key; destroying the key erases
// the lead's personal data for good.
//
// Events are decoded with the envelope still sealed: projections, reports and replays never need
// a consumer's fields and never pay for opening them. The readers that show them (the lead view
// and the events of a lead to those allowed, a buyer's delivery, the events CLI) call openLead,
// which gives the fields in clear, or the lead with `erased: true` once its key was destroyed.

type LeadRecord = Record<string, unknown>;

const aad = (context: SealContext) => Buffer.from(`${context.streamId}\n${context.type}`, 'utf8');
const isRecord = (value: unknown): value is LeadRecord => typeof value === 'object' && value !== null && !Array.isArray(value);

const NOT_CLEAR: ReadonlySet<string> = new Set<string>([...PERSONAL_FIELDS, 'pii']);

/** The lead's fields other than the personal ones and the envelope, in their order. */
function clearFields(lead: LeadRecord): LeadRecord {
  const clear: LeadRecord = {};
  for (const field in lead) if (!NOT_CLEAR.has(field)) clear[field] = lead[field];
  return clear;
}

function sealWith(key: DataKey, data: LeadRecord, lead: LeadRecord, context: SealContext): LeadRecord {
  const personal: LeadRecord = {};
  for (const field of PERSONAL_FIELDS) personal[field] = lead[field];
  const sealed = seal(key.key, JSON.stringify(personal), aad(context));
  const pii: PiiEnvelope = { v: 1, key: key.id, iv: sealed.iv.toString('base64'), ct: sealed.ct.toString('base64'), tag: sealed.tag.toString('base64') };
  return { ...data, lead: { ...clearFields(lead), pii } };
}

function openWith(key: DataKey | null, envelope: PiiEnvelope, lead: LeadRecord, context: SealContext): NormalisedLead | ErasedLead {
  if (key === null) return { ...clearFields(lead), erased: true } as unknown as ErasedLead;
  let personal: unknown;
  try {
    const sealed: Sealed = { iv: Buffer.from(envelope.iv, 'base64'), ct: Buffer.from(envelope.ct, 'base64'), tag: Buffer.from(envelope.tag, 'base64') };
    personal = JSON.parse(open(key.key, sealed, aad(context)).toString('utf8'));
  } catch {
    // Never the cause: a JSON error would quote the plaintext.
    throw new SealedLeadError(`the personal data of ${context.streamId} does not open with data key ${key.id} (altered, or moved from another event)`);
  }
  if (!isRecord(personal)) throw new SealedLeadError(`the personal data of ${context.streamId} is not a set of fields`);
  // The domain's field order, as the lead was normalised.
  const { zip, zip4, accident_state, sid, s1, test, ...rest } = clearFields(lead);
  return { first_name: personal.first_name, last_name: personal.last_name, email: personal.email, mobile: personal.mobile, mobile_national: personal.mobile_national, zip, zip4, accident_state, certificate_url: personal.certificate_url, certificate_id: personal.certificate_id, sid, s1, test, ...rest } as unknown as NormalisedLead;
}

function envelopeOf(lead: LeadRecord, streamId: string): PiiEnvelope | undefined {
  const pii = lead.pii;
  if (pii === undefined) return undefined;
  if (!isRecord(pii) || pii.v !== 1 || typeof pii.key !== 'string' || typeof pii.iv !== 'string' || typeof pii.ct !== 'string' || typeof pii.tag !== 'string') {
    throw new SealedLeadError(`the personal-data envelope of ${streamId} is not version 1 with key, iv, ct and tag`);
  }
  return pii as unknown as PiiEnvelope;
}

/** The personal data of a lead cannot be opened: altered, moved, or a key store that never had its key. */
export class SealedLeadError extends Error {
  override readonly name = 'SealedLeadError';
}

/**
 * A lead as a reader allowed to see its consumer shows it: the personal fields opened with the
 * lead's data key, or without them and with `erased: true` when that key was destroyed. A lead
 * written in clear (before encryption) is returned as it is. A promise only when the key was not in
 * memory. Rejects with SealedLeadError when the envelope does not open (its message names no value).
 */
export function openLead(keys: PersonalDataKeys, leadId: number, lead: StoredLead): NormalisedLead | ErasedLead | Promise<NormalisedLead | ErasedLead> {
  const record = lead as LeadRecord;
  const context = { streamId: leadStream(leadId), type: 'LeadReceived' };
  const envelope = envelopeOf(record, context.streamId);
  if (envelope === undefined) return lead as NormalisedLead | ErasedLead;
  const key = keys.get(envelope.key);
  if (!(key instanceof Promise)) return openWith(key, envelope, record, context);
  return key.then(
    (k) => openWith(k, envelope, record, context),
    (error: unknown) => {
      throw error instanceof UnknownDataKeyError ? new SealedLeadError(error.message) : error;
    },
  );
}

/**
 * The sealer of LeadReceived. Without data keys (a benchmark measuring the cost of encryption)
 * it writes the lead in clear.
 */
export function leadReceivedSealer(keys: PersonalDataKeys | null): Sealer {
  return {
    type: 'LeadReceived',
    seal(data, context) {
      if (!isRecord(data) || !isRecord(data.lead) || keys === null) return data;
      const lead = data.lead;
      const key = keys.take();
      return key instanceof Promise ? key.then((k) => sealWith(k, data, lead, context)) : sealWith(key, data, lead, context);
    },
  };
}

import type { PersonalDataKeys } from '../../personal-data/index.js';
import { type Sealed, open, seal } from '../../personal-data/aes-gcm.js';
import { type DataKey, UnknownDataKeyError } from '../../personal-data/data-keys.js';
import { PERSONAL_FIELDS } from '../../leads/lead.js';
import { type SealContext, type Sealer, UpcastError } from './codec.js';

// LeadReceived version 2: the consumer's personal fields (names, e-mail, mobile, consent
// certificate) are stored as one envelope encrypted with a data key of the lead, in place of the
// fields; the rest of the lead (ZIP, state, sid, s1, test) stays clear for projections and
// reports. AES-256-GCM with the stream and the event type as additional data, so an envelope
// moved to another event does not open. The envelope names its key; destroying the key erases
// the lead's personal data for good, and the event then reads with the lead's other fields and
// `erased: true`.

/** The encrypted personal fields, as stored in `data.lead.pii`. Binary parts are base64. */
interface PiiEnvelope {
  readonly v: 1;
  /** The data key's id. */
  readonly key: string;
  readonly iv: string;
  readonly ct: string;
  readonly tag: string;
}

type LeadRecord = Record<string, unknown>;

const aad = (context: SealContext) => Buffer.from(`${context.streamId}\n${context.type}`, 'utf8');
const isRecord = (value: unknown): value is LeadRecord => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The lead's fields other than the personal ones and the envelope, in their order. */
function clearFields(lead: LeadRecord): LeadRecord {
  const clear: LeadRecord = {};
  for (const [field, value] of Object.entries(lead)) {
    if (field !== 'pii' && !(PERSONAL_FIELDS as readonly string[]).includes(field)) clear[field] = value;
  }
  return clear;
}

function sealWith(key: DataKey, data: LeadRecord, lead: LeadRecord, context: SealContext): LeadRecord {
  const personal: LeadRecord = {};
  for (const field of PERSONAL_FIELDS) personal[field] = lead[field];
  const sealed = seal(key.key, Buffer.from(JSON.stringify(personal), 'utf8'), aad(context));
  const pii: PiiEnvelope = { v: 1, key: key.id, iv: sealed.iv.toString('base64'), ct: sealed.ct.toString('base64'), tag: sealed.tag.toString('base64') };
  return { ...data, lead: { ...clearFields(lead), pii } };
}

function openWith(key: DataKey | null, envelope: PiiEnvelope, data: LeadRecord, lead: LeadRecord, context: SealContext): LeadRecord {
  if (key === null) return { ...data, lead: { ...clearFields(lead), erased: true } };
  let personal: unknown;
  try {
    const sealed: Sealed = { iv: Buffer.from(envelope.iv, 'base64'), ct: Buffer.from(envelope.ct, 'base64'), tag: Buffer.from(envelope.tag, 'base64') };
    personal = JSON.parse(open(key.key, sealed, aad(context)).toString('utf8'));
  } catch {
    // Never the cause: a JSON error would quote the plaintext.
    throw new UpcastError(`the envelope does not open with data key ${key.id} (altered, or moved from another event)`);
  }
  if (!isRecord(personal)) throw new UpcastError('the envelope does not hold the personal fields');
  // The domain's field order, as the lead was normalised.
  const { zip, zip4, accident_state, sid, s1, test, ...rest } = clearFields(lead);
  return { ...data, lead: { first_name: personal.first_name, last_name: personal.last_name, email: personal.email, mobile: personal.mobile, mobile_national: personal.mobile_national, zip, zip4, accident_state, certificate_url: personal.certificate_url, certificate_id: personal.certificate_id, sid, s1, test, ...rest } };
}

function envelopeOf(lead: LeadRecord): PiiEnvelope | undefined {
  const pii = lead.pii;
  if (pii === undefined) return undefined;
  if (!isRecord(pii) || pii.v !== 1 || typeof pii.key !== 'string' || typeof pii.iv !== 'string' || typeof pii.ct !== 'string' || typeof pii.tag !== 'string') {
    throw new UpcastError('the personal-data envelope is not version 1 with key, iv, ct and tag');
  }
  return pii as unknown as PiiEnvelope;
}

/**
 * The sealer of LeadReceived. Without data keys (a benchmark measuring the cost of encryption)
 * it writes the lead in clear, and refuses to read an encrypted one.
 */
export function leadReceivedSealer(keys: PersonalDataKeys | null): Sealer {
  return {
    type: 'LeadReceived',
    since: 2,
    seal(data, context) {
      if (!isRecord(data) || !isRecord(data.lead) || keys === null) return data;
      const lead = data.lead;
      const key = keys.take();
      return key instanceof Promise ? key.then((k) => sealWith(k, data, lead, context)) : sealWith(key, data, lead, context);
    },
    open(data, context) {
      if (!isRecord(data) || !isRecord(data.lead)) return data;
      const lead = data.lead;
      const envelope = envelopeOf(lead);
      if (envelope === undefined) return data;
      if (keys === null) throw new UpcastError('its personal data is encrypted and no key store was opened');
      const key = keys.get(envelope.key);
      if (!(key instanceof Promise)) return openWith(key, envelope, data, lead, context);
      return key.then(
        (k) => openWith(k, envelope, data, lead, context),
        (error: unknown) => {
          throw error instanceof UnknownDataKeyError ? new UpcastError(error.message) : error;
        },
      );
    },
  };
}

// A consumer's lead as the service keeps it once validated and normalised.

export interface NormalisedLead {
  readonly first_name: string;
  readonly last_name: string;
  /** Trimmed, lower-cased. */
  readonly email: string;
  /** E.164, e.g. +12025550143. */
  readonly mobile: string;
  /** National significant number, e.g. 2025550143. */
  readonly mobile_national: string;
  /** Five digits. */
  readonly zip: string;
  /** The four-digit extension, or null. */
  readonly zip4: string | null;
  /** USPS two-letter code, upper case. */
  readonly accident_state: string;
  readonly certificate_url: string;
  /** The 40-hex certificate id taken from the URL, lower case. */
  readonly certificate_id: string;
  readonly sid: string;
  readonly s1: string | null;
  readonly test: boolean;
}

/** The fields that identify the consumer: encrypted in the event store, gone once erased. */
export const PERSONAL_FIELDS = ['first_name', 'last_name', 'email', 'mobile', 'mobile_national', 'certificate_url', 'certificate_id'] as const;

type PersonalField = (typeof PERSONAL_FIELDS)[number];

/** The personal fields of a lead, encrypted with its data key (AES-256-GCM); binary parts in base64. */
export interface PiiEnvelope {
  readonly v: 1;
  /** The data key's id. */
  readonly key: string;
  readonly iv: string;
  readonly ct: string;
  readonly tag: string;
}

/** A lead as stored and read back from the event store: the personal fields sealed in `pii`. */
type SealedLead = Omit<NormalisedLead, PersonalField> & { readonly pii: PiiEnvelope };

/** A lead as events hold it: in clear when appended (and in events written before encryption), sealed when read back. */
export type StoredLead = NormalisedLead | SealedLead;

/** A lead whose personal data was erased (its data key destroyed): the rest of it, and `erased: true`. */
export type ErasedLead = Omit<NormalisedLead, PersonalField> & { readonly erased: true };

export const isErased = (lead: NormalisedLead | ErasedLead): lead is ErasedLead => 'erased' in lead && lead.erased === true;

/**
 * What a read model keeps of a lead once its personal data is gone: the fields that are not
 * personal, no envelope, and `erased: true` (as openLead gives a lead whose key was destroyed).
 */
export function scrubbedLead(lead: StoredLead | ErasedLead | null | undefined): ErasedLead | null {
  if (!lead) return null;
  const kept: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(lead)) {
    if (field !== 'pii' && !(PERSONAL_FIELDS as readonly string[]).includes(field)) kept[field] = value;
  }
  return { ...kept, erased: true } as unknown as ErasedLead;
}

// What became of a posted lead, in the lead business's terms: the outcome code, whether the lead
// was accepted, the money, and every field that failed. HTTP turns an outcome into a status and
// the decision envelope; the domain never knows either.

export type Acceptance = 'accepted' | 'rejected' | 'error';
export type LeadStatus = 'sold' | 'unsold' | 'rejected';

/** A named failing input: which field, a stable code, and a message that never echoes the value. */
export interface FieldError {
  readonly field: string;
  readonly code: string;
  readonly message: string;
}

/**
 * A member name that reads as a field name: a letter or `_`, then letters, digits, `_` or `-`, at
 * most 64 in all. Any other (an e-mail, a phone number, a form flattened into a name) may well be
 * a consumer's data, and a lead's errors are recorded in clear, where no erasure finds them.
 */
const FIELD_NAME = /^[A-Za-z_][A-Za-z0-9_-]{0,63}$/;

/** The error for an unknown member of a body; `notA`: what it is not ("a lead field"). */
export function unknownField(name: string, notA: string): FieldError {
  return FIELD_NAME.test(name)
    ? { field: name, code: 'unknown_field', message: `${name} is not ${notA}` }
    : { field: '*', code: 'unknown_field', message: `a field named with other characters than letters, digits, _ and - is not ${notA} (its name is not repeated)` };
}

/** The errors for a body's unknown members: each named as unknownField does, the unnamed ones once, as `*`. */
export function unknownFields(names: readonly string[], notA: string): FieldError[] {
  const errors = new Map<string, FieldError>();
  for (const name of names) {
    const error = unknownField(name, notA);
    if (!errors.has(error.field)) errors.set(error.field, error);
  }
  return [...errors.values()];
}

/**
 * The errors for the known fields a body gives more than once: JSON keeps the last value without a
 * word, while the client's own code, a proxy or a log may have read the other, so neither is taken.
 * An unknown member given twice is named once, by unknownFields.
 */
export function repeatedFields(repeated: readonly string[], known: (name: string) => boolean): FieldError[] {
  return repeated.filter(known).map((field) => ({ field, code: 'repeated', message: `${field} is given more than once in the body` }));
}

/** The first error of each field, in order: one entry per field when several rules name it. */
export function oncePerField(errors: readonly FieldError[]): FieldError[] {
  const named = new Set<string>();
  return errors.filter((error) => !named.has(error.field) && named.add(error.field));
}

/** Every outcome of a recorded lead, with whether it counts as accepted and its default message. */
export const LEAD_OUTCOMES = {
  SOLD: { acceptance: 'accepted', message: 'Lead accepted and sold.' },
  UNSOLD: { acceptance: 'accepted', message: 'Lead accepted; no buyer took it.' },
  INVALID: { acceptance: 'rejected', message: 'Lead rejected: one or more fields are invalid.' },
  VERIFICATION_FAILED: { acceptance: 'rejected', message: 'Lead rejected: phone or e-mail verification failed.' },
  DUPLICATE: { acceptance: 'rejected', message: 'Lead rejected: the same mobile or e-mail was accepted recently.' },
  SUPPRESSED: { acceptance: 'rejected', message: 'Lead rejected: the mobile or e-mail is on the suppression list.' },
  PING_EXPIRED: { acceptance: 'rejected', message: 'Lead rejected: its ping_id is past its expiry; ping again.' },
  PING_CONSUMED: { acceptance: 'rejected', message: 'Lead rejected: its ping_id was already posted.' },
  PING_MISMATCH: { acceptance: 'rejected', message: "Lead rejected: its zip, accident_state, sid or test differ from its ping's; errors names each." },
} as const satisfies Record<string, { acceptance: Acceptance; message: string }>;

export type LeadOutcomeCode = keyof typeof LEAD_OUTCOMES;

/** The answer to a lead post, folded from the lead's events. */
export interface LeadOutcome {
  readonly lead_id: number;
  readonly code: LeadOutcomeCode;
  readonly lead_status: LeadStatus;
  readonly sold: boolean;
  readonly revenue: number;
  /** The currency its routing recorded; for a lead never routed, the routing file's (its revenue is 0). */
  readonly currency: string;
  /** Every field that failed (INVALID), or each one concerned (DUPLICATE, VERIFICATION_FAILED, SUPPRESSED, PING_*). */
  readonly errors?: readonly FieldError[];
  readonly test?: true;
}

/** Money as the service states it: a number with at most 2 decimals. */
export const money = (amount: number): number => Math.round(amount * 100) / 100;

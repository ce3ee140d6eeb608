// Shared by the post-lead tests that drive the real service over HTTPS: the outcome table of
// The HTTP contract written out again here (not imported from src, so a drift in src is caught), an
// envelope checker, deterministic unique leads, a seeded generator and event-stream readers.

import { openLead } from '../../src/events/codec/index.js';
import type { LeadReceived } from '../../src/events/lead-events.js';
import type { RecordedEvent } from '../../src/event-store/index.js';
import { CERT_URL, ENVELOPE_FIELDS, type Reply, type TestService, leadWith, testMobile } from '../support/service.js';

export { CERT_URL,  };

interface OutcomeRow {
  /** HTTP statuses the code may come with (first: the contract's). */
  readonly status: readonly number[];
  readonly acceptance: 'accepted' | 'rejected' | 'error' | 'by-status';
  /** Whether a lead is recorded: lead_id is an integer exactly then. */
  readonly recorded: boolean;
}

/** The outcomes of a lead post: code, status, acceptance, whether a lead is recorded. */
const OUTCOME_TABLE: Readonly<Record<string, OutcomeRow>> = {
  SOLD: { status: [201], acceptance: 'accepted', recorded: true },
  UNSOLD: { status: [201], acceptance: 'accepted', recorded: true },
  INVALID: { status: [422], acceptance: 'rejected', recorded: true },
  VERIFICATION_FAILED: { status: [422], acceptance: 'rejected', recorded: true },
  DUPLICATE: { status: [409], acceptance: 'rejected', recorded: true },
  // A contact claimed by a lead another process has not recorded yet: retry after Retry-After.
  DUPLICATE_PENDING: { status: [409], acceptance: 'error', recorded: false },
  MALFORMED_JSON: { status: [400], acceptance: 'rejected', recorded: false },
  UNSUPPORTED_MEDIA_TYPE: { status: [415], acceptance: 'rejected', recorded: false },
  // 431: request headers over Node's limit, answered by the clientError handler with this code.
  PAYLOAD_TOO_LARGE: { status: [413, 431], acceptance: 'rejected', recorded: false },
  UNAUTHORIZED: { status: [401], acceptance: 'rejected', recorded: false },
  FORBIDDEN: { status: [403], acceptance: 'rejected', recorded: false },
  HTTPS_REQUIRED: { status: [403], acceptance: 'rejected', recorded: false },
  NOT_FOUND: { status: [404], acceptance: 'rejected', recorded: false },
  METHOD_NOT_ALLOWED: { status: [405], acceptance: 'rejected', recorded: false },
  RATE_LIMITED: { status: [429], acceptance: 'error', recorded: false },
  // Headers or body not received within HEADERS_TIMEOUT_MS / REQUEST_TIMEOUT_MS.
  REQUEST_TIMEOUT: { status: [408], acceptance: 'error', recorded: false },
  // 409 in flight → error; 422 reused with another body (or a malformed key) → rejected.
  IDEMPOTENCY_CONFLICT: { status: [409, 422], acceptance: 'by-status', recorded: false },
  UNAVAILABLE: { status: [503], acceptance: 'error', recorded: false },
  INTERNAL_ERROR: { status: [500], acceptance: 'error', recorded: false },
};

const RESPONSE_WORD = { accepted: 'Success', rejected: 'Failure', error: 'Error' } as const;
const LEAD_STATUS_OF: Readonly<Record<string, string>> = { SOLD: 'sold', UNSOLD: 'unsold' };

const header = (reply: Reply, name: string): string | undefined => {
  const value = reply.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
};

/**
 * Every problem with a response's envelope, as text (empty: none): each of the 11 fields present
 * with its type, the code from the outcome table with its status, and the fields consistent with
 * each other and with the code.
 */
export function envelopeProblems(reply: Reply): string[] {
  const problems: string[] = [];
  const fail = (text: string) => problems.push(text);
  if (reply.status >= 500) fail(`status ${reply.status} >= 500`);
  let body: unknown;
  try {
    body = JSON.parse(reply.text);
  } catch {
    return [...problems, `body is not JSON: ${JSON.stringify(reply.text.slice(0, 200))}`];
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return [...problems, 'body is not a JSON object'];
  const b = body as Record<string, unknown>;
  const contentType = header(reply, 'content-type') ?? '';
  if (!/^application\/json\b/i.test(contentType)) fail(`content-type ${contentType}`);
  for (const field of ENVELOPE_FIELDS) if (!Object.hasOwn(b, field)) fail(`missing envelope field ${field}`);

  if (typeof b.ok !== 'boolean') fail(`ok is ${typeof b.ok}`);
  if (typeof b.trace_id !== 'string' || !/^[0-9a-f]{32}$/.test(b.trace_id)) fail(`trace_id ${String(b.trace_id)}`);
  if (b.trace_id !== header(reply, 'x-trace-id')) fail(`trace_id ${String(b.trace_id)} != X-Trace-Id ${header(reply, 'x-trace-id')}`);
  if (!['accepted', 'rejected', 'error'].includes(b.acceptance as string)) fail(`acceptance ${String(b.acceptance)}`);
  if (!(b.lead_id === null || (Number.isSafeInteger(b.lead_id) && (b.lead_id as number) >= 0))) fail(`lead_id ${String(b.lead_id)}`);
  if (!(b.lead_status === null || ['sold', 'unsold', 'rejected'].includes(b.lead_status as string))) fail(`lead_status ${String(b.lead_status)}`);
  if (typeof b.sold !== 'boolean') fail(`sold is ${typeof b.sold}`);
  if (typeof b.revenue !== 'number' || !Number.isFinite(b.revenue) || Math.round(b.revenue * 100) / 100 !== b.revenue) fail(`revenue ${String(b.revenue)}`);
  if (b.currency !== 'USD') fail(`currency ${String(b.currency)}`);
  if (typeof b.message !== 'string' || b.message === '') fail(`message ${String(b.message)}`);
  if (!['Success', 'Failure', 'Error'].includes(b.Response as string)) fail(`Response ${String(b.Response)}`);

  const code = b.code;
  const row = typeof code === 'string' && Object.hasOwn(OUTCOME_TABLE, code) ? OUTCOME_TABLE[code] : undefined;
  if (!row) return [...problems, `code ${String(code)} is not in the outcome table`];
  if (!row.status.includes(reply.status)) fail(`${String(code)} with HTTP ${reply.status}`);
  const acceptance = row.acceptance === 'by-status' ? (reply.status === 409 ? 'error' : 'rejected') : row.acceptance;
  if (b.acceptance !== acceptance) fail(`${String(code)} with acceptance ${String(b.acceptance)}`);
  if (b.ok !== (b.acceptance === 'accepted')) fail(`ok ${String(b.ok)} with acceptance ${String(b.acceptance)}`);
  if (b.Response !== RESPONSE_WORD[b.acceptance as keyof typeof RESPONSE_WORD]) fail(`Response ${String(b.Response)} with acceptance ${String(b.acceptance)}`);
  if ((b.lead_id !== null) !== row.recorded) fail(`${String(code)} with lead_id ${String(b.lead_id)}`);
  const status = row.recorded ? (LEAD_STATUS_OF[code as string] ?? 'rejected') : null;
  if (b.lead_status !== status) fail(`${String(code)} with lead_status ${String(b.lead_status)}`);
  if (b.sold !== (code === 'SOLD')) fail(`${String(code)} with sold ${String(b.sold)}`);
  if (code === 'SOLD' ? !((b.revenue as number) > 0) : b.revenue !== 0) fail(`${String(code)} with revenue ${String(b.revenue)}`);
  if (code === 'INVALID') {
    const errors = b.errors;
    if (!Array.isArray(errors) || errors.length === 0) fail('INVALID without errors');
    else if (!errors.every((e: Record<string, unknown>) => typeof e?.field === 'string' && typeof e.code === 'string' && typeof e.message === 'string')) {
      fail(`malformed errors ${JSON.stringify(errors).slice(0, 200)}`);
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// Leads whose mobile and e-mail are unique within a run, from a counter: deterministic, so the
// same run posts the same numbers. Exchanges 300–899 of area code 213 (555 left for the tests'
// own fixed numbers), any line: all valid numbers.

let serial = 0;

export interface Contact {
  readonly serial: number;
  readonly email: string;
  readonly mobile: string;
  readonly national: string;
}

export function uniqueContact(): Contact {
  serial += 1;
  const mobile = testMobile(serial);
  return { serial, email: `lead.${serial}@example.com`, mobile, national: mobile.slice(2) };
}

export function uniqueLead(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const contact = uniqueContact();
  return leadWith(contact.email, contact.mobile, overrides);
}

/** A lead as JSON text with raw members appended (keys JSON.stringify would drop or mangle). */
export function withRawMembers(lead: Record<string, unknown>, ...members: string[]): string {
  const text = JSON.stringify(lead);
  return members.length === 0 ? text : `${text.slice(0, -1)},${members.join(',')}}`;
}

// ---------------------------------------------------------------------------------------------

/** The lead's events, its LeadReceived's personal fields opened as a reader allowed to see them would. */
export async function leadEvents(svc: TestService, leadId: number): Promise<RecordedEvent[]> {
  const events = await svc.service.store.readStream(`lead-${leadId}`);
  return Promise.all(
    events.map(async (event) => {
      const data = event.data as LeadReceived['data'];
      if (event.type !== 'LeadReceived' || !data.lead) return event;
      return { ...event, data: { ...data, lead: await openLead(svc.service.personalData, leadId, data.lead) } };
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// mulberry32: a tiny, well-mixed 32-bit generator; enough to make a fuzz run reproducible.

export class Rng {
  private state: number;
  constructor(readonly seed: number) {
    this.state = seed >>> 0;
  }
  /** [0, 1) */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  /** An integer in [lo, hi], both included. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(0, items.length - 1)]!;
  }
}

/** Runs `work` over `items`, at most `limit` at a time, results in the items' order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

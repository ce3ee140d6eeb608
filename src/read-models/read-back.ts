import type { EventStore, Position } from '../event-store/port.js';
import { leadStream } from '../events/lead-events.js';
import { openLead } from '../events/codec/index.js';
import { type StoredLead, scrubbedLead } from '../leads/lead.js';
import type { PersonalDataKeys } from '../personal-data/index.js';
import { type PingBidsCollected, pingStream } from '../events/ping-events.js';
import { type FieldError, unknownFields } from '../leads/outcome.js';
import type { Principal } from '../keys/principal.js';
import { type LeadView, leadViewFromEvents, viewCurrency } from '../projections/lead-view.js';
import type { RoutingConfig } from '../routing/load-config.js';
import { leadCounterField } from '../projections/report-counters.js';
import { deliveryRowFromEvents } from '../projections/delivery-row.js';
import type { AggregateOptions, Filter, GroupValue, ReadDoc, ReadModelStore } from './port.js';
import { deliveryKindOf } from './delivery-kind.js';
import { GROUP_BY, type GroupBy, PING_COUNTERS, type ReportRow, SUMMED, addDays, daySteps, firstHourOfLocalDay, isCalendarDay, keyOrder, localDay, parseInstant, reportRow } from './report.js';

// The queries behind the read-back routes, with their scope rules: a supplier sees
// its own leads, a buyer the leads it bought, an analyst everything without consumer PII, an admin
// everything. What a caller may not see does not exist for it (404), and list filters are forced
// to the caller's scope before the query runs.

export class ReadBackInputError extends Error {
  constructor(readonly errors: FieldError[]) {
    super('invalid query');
  }
}

export class ReadBackForbiddenError extends Error {}

export interface ReadBackDeps {
  readonly events: EventStore;
  /** Opens the personal fields of a lead for callers allowed to see them. */
  readonly personalData: PersonalDataKeys;
  readonly readModels: ReadModelStore;
  /** The physical collection a projection's base collection is served from now (blue/green). */
  readonly collection: (base: 'leads' | 'deliveries' | 'report_buckets' | 'feedback' | 'erasures') => string;
  /** The position the read models reflect. */
  readonly position: () => Position;
  /** The service's clock: a report without from/to ends on its today. The wall clock when not given. */
  readonly now?: () => Date;
  /**
   * The routing file in force: its currency states the money of a lead no routing priced, and its
   * buyers' delivery says how a delivery not yet made will reach its buyer.
   */
  readonly routing: () => Pick<RoutingConfig, 'currency' | 'buyers'>;
}

export interface Page<T> {
  readonly items: T[];
  readonly next_cursor: string | null;
}

type Query = Readonly<Record<string, string | string[] | undefined>>;

// Exported for the OpenAPI document, which describes the query parameters with these very values.
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 500;
export const DELIVERY_STATUSES = ['pending', 'delivered', 'failed', 'cancelled'];
export const REPORT_TEST_MODES = ['exclude', 'only', 'include'];
export const LEAD_STATUSES = ['received', 'sold', 'unsold', 'rejected'];
/** An outcome code: SOLD, UNSOLD, INVALID, DUPLICATE, … (upper case and underscores). */
const OUTCOME_CODE = /^[A-Z][A-Z_]{0,39}$/;
/** A source id as a lead may carry it. */
const SOURCE_ID = /^[A-Za-z0-9._-]{1,64}$/;
const seesPii = (principal: Principal, view: { supplier?: unknown; buyer?: unknown }) =>
  principal.role === 'admin' ||
  (principal.role === 'supplier' && view.supplier === principal.name) ||
  (principal.role === 'buyer' && view.buyer === principal.name);

/** Who may read a lead at all: a buyer only once it bought it. */
const mayRead = (principal: Principal, view: { supplier?: unknown; buyer?: unknown; lead_status?: unknown }) =>
  principal.role === 'admin' ||
  principal.role === 'analyst' ||
  (principal.role === 'supplier' && view.supplier === principal.name) ||
  (principal.role === 'buyer' && view.buyer === principal.name && view.lead_status === 'sold');

/** One event of a lead as the events route gives it. */
interface LeadEventRow {
  readonly revision: number;
  readonly type: string;
  readonly occurred_at: string;
  readonly trace_id: string | null;
  readonly data: unknown;
}

/**
 * The fields of a received lead that are not personal data: kept for callers without the right to
 * it. A list of what may stay, so a consumer field added later is hidden until named here.
 */
const ROUTING_FIELDS = ['accident_state', 'sid', 's1', 'test'] as const;

function withoutConsumer(type: string, data: unknown): unknown {
  if (typeof data !== 'object' || data === null) return data;
  // A lead's ZIP must equal its ping's, so the ping's is the consumer's too.
  if (type === 'LeadPinged') {
    const { zip: _zip, ...pinged } = data as Record<string, unknown>;
    return pinged;
  }
  if (type !== 'LeadReceived') return data;
  const received = data as { lead?: Record<string, unknown> | null };
  if (!received.lead) return data;
  const lead = received.lead;
  return { ...received, lead: Object.fromEntries(ROUTING_FIELDS.filter((field) => field in lead).map((field) => [field, lead[field]])) };
}

/**
 * A buyer sees its own place among a lead's routing candidates, not the other buyers or what they
 * would have paid or bid, nor which of the supplier's keys sent the lead or its ping.
 */
function forBuyer(buyer: string, type: string, data: unknown): unknown {
  if (typeof data !== 'object' || data === null) return data;
  if (type === 'LeadRouted') {
    const routed = data as { candidates?: Array<{ buyer?: unknown }> };
    return Array.isArray(routed.candidates) ? { ...routed, candidates: routed.candidates.filter((c) => c.buyer === buyer) } : data;
  }
  if (type === 'LeadReceived' || type === 'LeadPinged') {
    const { key_id: _keyId, ...received } = data as Record<string, unknown>;
    return received;
  }
  if (type === 'PingBidsCollected') {
    // Its own bid only; the best bid too when it was its own (a lead it bought at the next bid
    // standing must not tell it what the winner offered).
    const { bids, winner, ...collected } = data as { bids?: Array<{ buyer?: unknown }>; winner?: { buyer?: unknown } | null };
    return {
      ...collected,
      bids: Array.isArray(bids) ? bids.filter((b) => b.buyer === buyer) : [],
      ...(winner?.buyer === buyer ? { winner } : {}),
    };
  }
  return data;
}

/** A LeadReceived of an erased lead: the lead without its envelope, `erased: true`. */
/** A LeadReceived whose lead is shown without its consumer, said to be erased. */
function markedErased(type: string, data: unknown): unknown {
  if (type !== 'LeadReceived') return data;
  const received = data as { lead?: Record<string, unknown> | null } | null;
  return received?.lead ? { ...received, lead: { ...received.lead, erased: true } } : data;
}

function scrubReceived(type: string, data: unknown): unknown {
  if (type !== 'LeadReceived' || typeof data !== 'object' || data === null) return data;
  const received = data as { lead?: StoredLead | null };
  return received.lead ? { ...received, lead: scrubbedLead(received.lead) } : data;
}

/** Which operator asked for a redelivery (of a lead or of its notice) is the service's own business: a supplier or buyer sees only that an admin did. */
function withoutOperator(type: string, data: unknown): unknown {
  if ((type !== 'LeadRedeliveryRequested' && type !== 'ErasureNoticeRedeliveryRequested') || typeof data !== 'object' || data === null) return data;
  const requested = data as { requested_by?: { role?: unknown } };
  return { ...requested, requested_by: { role: requested.requested_by?.role } };
}

/**
 * The keyed hashes of the consumer's e-mail and mobile that a LeadReceived records (how an erasure
 * finds the lead) name no one, but they are one value per consumer, the same on every lead, also
 * once it is erased: whoever reads them can tell which leads of different suppliers are one person.
 * An admin, who answers erasure and access requests, reads them; nobody else.
 */
function withoutContactHashes(type: string, data: unknown): unknown {
  if (type !== 'LeadReceived' || typeof data !== 'object' || data === null || !('contacts' in data)) return data;
  const { contacts: _hashes, ...rest } = data as Record<string, unknown>;
  return rest;
}

const visible = (principal: Principal, type: string, data: unknown): unknown => {
  if (principal.role === 'admin') return data;
  const shown = withoutContactHashes(type, data);
  if (principal.role === 'buyer') return withoutOperator(type, forBuyer(principal.name, type, shown));
  return principal.role === 'supplier' ? withoutOperator(type, shown) : shown;
};

function one(query: Query, name: string, errors: FieldError[]): string | undefined {
  const value = query[name];
  if (Array.isArray(value)) {
    errors.push({ field: name, code: 'repeated', message: `${name} may be given once` });
    return undefined;
  }
  return value === '' ? undefined : value;
}

/**
 * A parameter a list does not take is refused by name, as an unknown field of a body is: ignored,
 * a misspelt filter (`stauts=sold`) would answer every row as if it had been applied. A name that
 * does not read as a parameter's (an e-mail or a phone number sent without its `email=`, say) is
 * not repeated in the answer: it is answered as `*`, once.
 */
function unknownParameters(query: Query, known: readonly string[], errors: FieldError[]): void {
  const unknown = Object.keys(query).filter((name) => !known.includes(name));
  // `?=1` has a parameter without a name: the answer must still name something the client can find.
  if (unknown.includes('')) errors.push({ field: '*', code: 'unknown_field', message: 'a parameter with no name (`=` at the start of a pair) is not a parameter of this list' });
  errors.push(...unknownFields(unknown.filter((name) => name !== '').slice(0, 20), 'a parameter of this list'));
}

const PAGING = ['limit', 'cursor'] as const;
const LEADS_PARAMETERS = ['status', 'code', 'sid', 'since', 'until', ...PAGING];
const DELIVERIES_PARAMETERS = ['status', 'buyer', 'bucket', 'since', 'until', ...PAGING];
const FEEDBACK_PARAMETERS = ['type', 'since', ...PAGING];
const ERASURES_PARAMETERS = ['since', 'until', ...PAGING];
const REPORT_PARAMETERS = ['from', 'to', 'tz', 'group_by', 'test', 'totals', ...PAGING];

function limitOf(query: Query, errors: FieldError[]): number {
  const raw = one(query, 'limit', errors);
  if (raw === undefined) return DEFAULT_LIMIT;
  const limit = Number(raw);
  if (!/^\d+$/.test(raw) || limit < 1 || limit > MAX_LIMIT) {
    errors.push({ field: 'limit', code: 'out_of_range', message: `limit must be a whole number from 1 to ${MAX_LIMIT}` });
    return DEFAULT_LIMIT;
  }
  return limit;
}

/**
 * An ISO 8601 date, or date and time with an optional offset (RFC 3339's profile; seconds and
 * their fraction optional). Checked by its form before Date.parse, which also takes what V8's
 * legacy parser guesses at (`2026-11-01 1:00 AM EST`, `… GMT+0600`, a comment in brackets).
 */

function instant(query: Query, name: string, errors: FieldError[]): string | undefined {
  const raw = one(query, name, errors);
  if (raw === undefined) return undefined;
  const at = parseInstant(raw);
  if (at === null) {
    errors.push({ field: name, code: 'invalid_format', message: `${name} must be an ISO 8601 date or time` });
    return undefined;
  }
  return at;
}

function cursorOf(query: Query, errors: FieldError[]): { value: string; id: string } | undefined {
  const raw = one(query, 'cursor', errors);
  if (raw === undefined) return undefined;
  try {
    const [value, id] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown[];
    if (typeof value === 'string' && typeof id === 'string') return { value, id };
  } catch {
    // Falls through to the error below: a cursor is only what a previous page gave.
  }
  errors.push({ field: 'cursor', code: 'invalid_format', message: 'cursor must be a next_cursor from a previous page' });
  return undefined;
}

/** A list's `since` (inclusive) and `until` (exclusive), as a filter on its time field. */
const between = (since: string | undefined, until: string | undefined): Filter[string] => ({ ...(since ? { $gte: since } : {}), ...(until ? { $lt: until } : {}) });

const encodeCursor = (value: unknown, id: string) => Buffer.from(JSON.stringify([value, id])).toString('base64url');

async function page<T>(docs: ReadDoc[], limit: number, sortField: string, map: (doc: ReadDoc) => T | Promise<T>): Promise<Page<T>> {
  const items = docs.slice(0, limit);
  const last = items.at(-1);
  return { items: await Promise.all(items.map(map)), next_cursor: docs.length > limit && last ? encodeCursor(last[sortField], last._id) : null };
}

function strip({ _id, ...rest }: ReadDoc): Record<string, unknown> {
  void _id;
  return rest;
}

export class ReadBack {
  private readonly stepsCache = new Map<string, Array<{ from: string; label: string }>>();

  constructor(private readonly deps: ReadBackDeps) {}

  get position(): Position {
    return this.deps.position();
  }

  /** The lead as the caller may see it; null when it does not exist for the caller. */
  async lead(principal: Principal, leadId: string): Promise<Record<string, unknown> | null> {
    if (!/^[1-9]\d{0,15}$/.test(leadId)) return null;
    // Folded from the lead's own stream, never from the read model: a read model may be behind
    // (a projector catching up after a restart, or another instance's projector), and one lead's
    // stream is a handful of events, so a supplier always reads the outcome it was answered.
    const view = leadViewFromEvents(await this.deps.events.readStream(leadStream(Number(leadId))));
    if (!view || !mayRead(principal, view)) return null;
    const row = await this.leadRow(principal, view);
    if (view.ping) row.ping = { ...view.ping, ...(await this.pingBids(principal, view.ping.ping_id)) };
    return row;
  }

  /** What the buyers bid on a lead's ping, as the caller may see it: a buyer only its own bid. */
  private async pingBids(principal: Principal, pingId: string): Promise<{ expires_at: string | null; bids: unknown[] }> {
    const events = await this.deps.events.readStream(pingStream(pingId));
    const pinged = events.find((e) => e.type === 'LeadPinged')?.data as { expires_at?: string } | undefined;
    const collected = events.find((e) => e.type === 'PingBidsCollected')?.data as PingBidsCollected['data'] | undefined;
    const bids = (collected?.bids ?? []).filter((bid) => principal.role !== 'buyer' || bid.buyer === principal.name);
    return { expires_at: pinged?.expires_at ?? null, bids };
  }

  /**
   * The lead's stream in revision order, for whoever may read the lead; null when it does not
   * exist for the caller. Folded from the stream itself, so it is never behind the read model.
   * Without the right to the lead's personal data, LeadReceived keeps only its routing fields.
   */
  async leadEvents(principal: Principal, leadId: string): Promise<LeadEventRow[] | null> {
    if (!/^[1-9]\d{0,15}$/.test(leadId)) return null;
    const recorded = await this.deps.events.readStream(leadStream(Number(leadId)));
    const view = leadViewFromEvents(recorded);
    if (!view || !mayRead(principal, view)) return null;
    const pii = seesPii(principal, view);
    return Promise.all(recorded.map((event) => this.eventRow(principal, event, pii, view.erased === true)));
  }

  /**
   * The events of the ping a lead was posted with (none: an empty list), for whoever may read the
   * lead; its ZIP, the consumer's, only for those who may see the lead's consumer fields.
   */
  async leadPingEvents(principal: Principal, leadId: string): Promise<LeadEventRow[]> {
    const recorded = await this.deps.events.readStream(leadStream(Number(leadId)));
    const matched = recorded.find((e) => e.type === 'LeadPingMatched')?.data as { ping_id?: string } | undefined;
    const view = leadViewFromEvents(recorded);
    if (!matched?.ping_id || !view) return [];
    const pii = seesPii(principal, view);
    return Promise.all((await this.deps.events.readStream(pingStream(matched.ping_id))).map((event) => this.eventRow(principal, event, pii, false)));
  }

  /** One event as the caller may see it; `erased`: the lead's envelope is never opened, even where a key is still cached in memory. */
  private async eventRow(principal: Principal, event: Awaited<ReturnType<EventStore['readStream']>>[number], pii: boolean, erased: boolean): Promise<LeadEventRow> {
    // An erased lead shows no more than it did before: its scrubbed fields (ZIP, ZIP+4) only to
    // those who could see its consumer, the others its routing fields and that it was erased.
    const shown = erased
      ? pii
        ? scrubReceived(event.type, event.data)
        : markedErased(event.type, withoutConsumer(event.type, scrubReceived(event.type, event.data)))
      : pii
        ? await this.openReceived(event.type, event.data)
        : withoutConsumer(event.type, event.data);
    return {
      revision: event.revision,
      type: event.type,
      occurred_at: typeof event.metadata.occurred_at === 'string' ? event.metadata.occurred_at : new Date(event.created).toISOString(),
      trace_id: typeof event.metadata.trace_id === 'string' ? event.metadata.trace_id : null,
      data: visible(principal, event.type, shown),
    };
  }

  /**
   * The leads the caller may read, newest first: a supplier its own, a buyer those it bought, an
   * analyst or admin all; each row is the lead view with the same rule for consumer fields.
   */
  async leads(principal: Principal, query: Query): Promise<Page<Record<string, unknown>>> {
    const errors: FieldError[] = [];
    const filter: Record<string, Filter[string]> = {};
    const status = one(query, 'status', errors);
    if (status !== undefined) {
      if (LEAD_STATUSES.includes(status)) filter.lead_status = status;
      else errors.push({ field: 'status', code: 'invalid_value', message: `status must be one of ${LEAD_STATUSES.join(', ')}` });
    }
    const code = one(query, 'code', errors);
    if (code !== undefined) {
      if (OUTCOME_CODE.test(code)) filter.code = code;
      else errors.push({ field: 'code', code: 'invalid_format', message: 'code must be an outcome code, e.g. INVALID or SOLD' });
    }
    const sid = one(query, 'sid', errors);
    if (sid !== undefined) {
      if (SOURCE_ID.test(sid)) filter.sid = sid;
      else errors.push({ field: 'sid', code: 'invalid_format', message: 'sid must be 1 to 64 letters, digits, dots, underscores or hyphens' });
    }
    const since = instant(query, 'since', errors);
    const until = instant(query, 'until', errors);
    if (since || until) filter.received_at = between(since, until);
    const limit = limitOf(query, errors);
    const after = cursorOf(query, errors);
    unknownParameters(query, LEADS_PARAMETERS, errors);
    if (errors.length > 0) throw new ReadBackInputError(errors);
    if (principal.role === 'buyer') {
      // A buyer reads a lead only once it bought it: a lead routed to it but not sold is not its.
      if (status !== undefined && status !== 'sold') return { items: [], next_cursor: null };
      filter.lead_status = 'sold';
    }
    return this.newestFirst(principal, 'leads', 'received_at', filter, limit, after, (doc) => this.leadRow(principal, doc as unknown as LeadView));
  }

  async deliveries(principal: Principal, query: Query): Promise<Page<Record<string, unknown>>> {
    const errors: FieldError[] = [];
    const filter: Record<string, Filter[string]> = {};
    const status = one(query, 'status', errors);
    if (status !== undefined) {
      if (DELIVERY_STATUSES.includes(status)) filter.status = status;
      else errors.push({ field: 'status', code: 'invalid_value', message: `status must be one of ${DELIVERY_STATUSES.join(', ')}` });
    }
    for (const field of ['buyer', 'bucket'] as const) {
      const value = one(query, field, errors);
      if (value !== undefined) filter[field] = value;
    }
    const since = instant(query, 'since', errors);
    const until = instant(query, 'until', errors);
    if (since || until) filter.created_at = between(since, until);
    const limit = limitOf(query, errors);
    const after = cursorOf(query, errors);
    unknownParameters(query, DELIVERIES_PARAMETERS, errors);
    if (errors.length > 0) throw new ReadBackInputError(errors);

    const routing = this.deps.routing();
    return this.newestFirst(principal, 'deliveries', 'created_at', filter, limit, after, (doc) => this.deliveryRow(principal, strip(doc), routing));
  }

  /**
   * One lead's delivery row as the deliveries list shows it, folded from the lead's own stream, so
   * it shows a change just recorded (a redelivery's answer); null when the lead has no delivery.
   * For callers who may read every delivery (the redelivery route is an admin's).
   */
  async delivery(principal: Principal, leadId: number): Promise<Record<string, unknown> | null> {
    const row = await deliveryRowFromEvents(await this.deps.events.readStream(leadStream(leadId)));
    return row && this.deliveryRow(principal, row, this.deps.routing());
  }

  private async deliveryRow(principal: Principal, row: Record<string, unknown>, routing: Pick<RoutingConfig, 'buyers'>): Promise<Record<string, unknown>> {
    const shown = { ...row };
    delete shown.supplier;
    // Answered as delivery_kind, with the routing file filling in a delivery not yet made.
    delete shown.via;
    shown.delivery_kind = deliveryKindOf(row, routing);
    // A pending lead of a buyer that pulls is listed and acknowledged, never sent by the worker
    // (also one left by webhook attempts before its buyer switched to pull): no webhook failure or
    // retry time describes it.
    if (shown.delivery_kind === 'pull' && shown.status === 'pending') {
      shown.last_error = null;
      shown.last_status_code = null;
      shown.next_attempt_at = shown.created_at ?? null;
    }
    // The row holds no copy of the lead: it is folded from the lead's stream for those who may see it.
    if (principal.role === 'admin' || (principal.role === 'buyer' && row.buyer === principal.name)) shown.lead = await this.leadOf(row.lead_id);
    return shown;
  }

  async feedback(principal: Principal, query: Query): Promise<Page<Record<string, unknown>>> {
    const errors: FieldError[] = [];
    const filter: Record<string, Filter[string]> = {};
    const type = one(query, 'type', errors);
    if (type !== undefined) {
      if (['return', 'conversion', 'contacted'].includes(type)) filter.type = type;
      else errors.push({ field: 'type', code: 'invalid_value', message: 'type must be one of return, conversion, contacted' });
    }
    const since = instant(query, 'since', errors);
    if (since) filter.recorded_at = { $gte: since };
    const limit = limitOf(query, errors);
    const after = cursorOf(query, errors);
    unknownParameters(query, FEEDBACK_PARAMETERS, errors);
    if (errors.length > 0) throw new ReadBackInputError(errors);
    return this.newestFirst(principal, 'feedback', 'recorded_at', filter, limit, after, (doc) => {
      const row = strip(doc);
      delete row.supplier;
      return row;
    });
  }

  /** The requests recorded for erasures, the newest first: for admins (the route allows no one else). */
  async erasures(principal: Principal, query: Query): Promise<Page<Record<string, unknown>>> {
    const errors: FieldError[] = [];
    const since = instant(query, 'since', errors);
    const until = instant(query, 'until', errors);
    const limit = limitOf(query, errors);
    const after = cursorOf(query, errors);
    unknownParameters(query, ERASURES_PARAMETERS, errors);
    if (errors.length > 0) throw new ReadBackInputError(errors);
    const filter: Record<string, Filter[string]> = {};
    if (since || until) filter.erased_at = between(since, until);
    return this.newestFirst(principal, 'erasures', 'erased_at', filter, limit, after, strip);
  }

  /** One page of a list, newest first, with the caller's scope forced onto the filter. */
  private async newestFirst(
    principal: Principal,
    base: 'leads' | 'deliveries' | 'feedback' | 'erasures',
    sortField: string,
    filter: Record<string, Filter[string]>,
    limit: number,
    after: { value: string; id: string } | undefined,
    row: (doc: ReadDoc) => Record<string, unknown> | Promise<Record<string, unknown>>,
  ): Promise<Page<Record<string, unknown>>> {
    // The caller's scope is put on what it asked for: a filter outside it (a buyer asking for
    // another buyer's deliveries) meets no row, rather than being replaced by the caller's own.
    for (const [role, field] of [['supplier', 'supplier'], ['buyer', 'buyer']] as const) {
      if (principal.role !== role) continue;
      if (filter[field] !== undefined && filter[field] !== principal.name) return { items: [], next_cursor: null };
      filter[field] = principal.name;
    }
    const docs = await this.deps.readModels.find(this.deps.collection(base), {
      filter,
      sort: { field: sortField, direction: 'desc' },
      ...(after ? { after } : {}),
      limit: limit + 1,
    });
    return page(docs, limit, sortField, row);
  }

  /** One page of the summary report, in the order of its group key (see `keyOrder`). */
  async report(principal: Principal, query: Query): Promise<ReportPage> {
    const plan = this.reportPlan(principal, query);
    const currency = await this.reportCurrency(plan);
    const [page, totals] = await Promise.all([this.reportPage(plan, plan.after, plan.limit), plan.totals ? this.reportTotals(plan) : undefined]);
    return { ...reportHead(plan), currency, items: page.rows, next_cursor: page.last ? encodeReportCursor(plan.order, page.last) : null, ...(totals ? { totals } : {}) };
  }

  /**
   * The whole range's totals, the report's metrics with no dimension: summed from the hour
   * buckets whatever the report walks, so one query of a few rows an hour, not a walk of every
   * lead. A report by s1 sums lead views, which hold no pings (a ping has no click id): its totals
   * count none either, and so are its rows' sums. Its other counters are the buckets' own, added
   * by the same events.
   */
  private async reportTotals(plan: ReportPlan): Promise<ReportRow> {
    const [group] = await this.deps.readModels.aggregate(this.deps.collection(BUCKETS.collection), { filter: plan.moneyFilter, key: [], sum: SUMMED, limit: 1 });
    const sums: Record<string, number> = { ...group?.sums };
    if (plan.collection === LEAD_VIEWS.collection) for (const counter of [...PING_COUNTERS, 'bid_cents']) sums[counter] = 0;
    return reportRow({}, sums);
  }

  /**
   * The currency of the money a report adds up: null when the range holds none. The buckets of the
   * range say, whatever the report sums (lead views hold the same money). Money of two currencies
   * (the routing file's currency changed within the range) is not added up: the dates are refused.
   */
  private async reportCurrency(plan: ReportPlan): Promise<string | null> {
    const groups = await this.deps.readModels.aggregate(this.deps.collection(BUCKETS.collection), { filter: plan.moneyFilter, key: [{ field: 'currency' }], sum: [], limit: 3 });
    const currencies = groups.map((group) => group.key[0]).filter((currency) => typeof currency === 'string');
    if (currencies.length <= 1) return currencies[0] ?? null;
    const message = `the money from ${plan.from} to ${plan.to} was recorded in ${currencies.join(' and ')} (the routing file's currency changed): a report adds up one currency, so ask for the days before the change or after it`;
    throw new ReadBackInputError(['from', 'to'].map((field) => ({ field, code: 'mixed_currencies', message })));
  }

  /**
   * Every row of the report, read from the store a page at a time as the caller pulls them (for
   * CSV). The first page is read before this returns, so a store that cannot answer fails the
   * request rather than a response already under way.
   */
  async reportRows(principal: Principal, query: Query): Promise<ReportHead & { currency: string | null; rows: AsyncIterable<ReportRow[]> }> {
    const plan = this.reportPlan(principal, query);
    const currency = await this.reportCurrency(plan);
    const first = await this.reportPage(plan, undefined, MAX_LIMIT);
    const pages = async function* (this: ReadBack): AsyncGenerator<ReportRow[]> {
      let page = first;
      yield page.rows;
      while (page.last) {
        page = await this.reportPage(plan, page.last, MAX_LIMIT);
        yield page.rows;
      }
    };
    return { ...reportHead(plan), currency, rows: pages.call(this) };
  }

  /** Rows after `after`, at most `limit`; `last` is the key to go on from, absent on the last page. */
  private async reportPage(plan: ReportPlan, after: GroupValue[] | undefined, limit: number): Promise<{ rows: ReportRow[]; last?: GroupValue[] }> {
    const groups = await this.deps.readModels.aggregate(this.deps.collection(plan.collection), {
      ...plan.options,
      ...(after ? { after } : {}),
      limit: limit + 1,
    });
    const rows = groups.slice(0, limit).map((group) => {
      const dims: ReportRow = {};
      for (const dimension of plan.groupBy) dims[dimension] = group.key[plan.order.indexOf(dimension)] ?? null;
      const sums: Record<string, number> = {};
      plan.options.sum.forEach((field, i) => (sums[SUMMED[i]!] = group.sums[field] ?? 0));
      return reportRow(dims, sums);
    });
    return groups.length > limit ? { rows, last: groups[limit - 1]!.key } : { rows };
  }

  /** The report a query asks for, checked, as a grouping of buckets or of lead views. */
  private reportPlan(principal: Principal, query: Query): ReportPlan {
    if (principal.role === 'buyer') throw new ReadBackForbiddenError();
    const errors: FieldError[] = [];
    let tz = one(query, 'tz', errors) ?? 'UTC';
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
    } catch {
      errors.push({ field: 'tz', code: 'invalid_value', message: 'tz must be an IANA time zone, e.g. America/New_York' });
      tz = 'UTC';
    }
    // The days are the report's zone's: its today may be yesterday or tomorrow in UTC.
    const today = localDay(this.deps.now?.() ?? new Date(), tz);
    const from = one(query, 'from', errors) ?? addDays(today, -6);
    const to = one(query, 'to', errors) ?? today;
    for (const [name, value] of [['from', from], ['to', to]] as const) {
      if (!isCalendarDay(value)) {
        errors.push({ field: name, code: 'invalid_format', message: `${name} must be a date, YYYY-MM-DD` });
      }
    }
    if (errors.length === 0 && from > to) errors.push({ field: 'from', code: 'out_of_range', message: 'from must not be after to' });
    if (errors.length === 0 && Date.parse(to) - Date.parse(from) > 366 * 86_400_000) {
      errors.push({ field: 'to', code: 'out_of_range', message: 'to must be at most 366 days after from' });
    }
    const groupByRaw = one(query, 'group_by', errors) ?? 'day';
    const groupBy = groupByRaw.split(',').map((g) => g.trim()).filter(Boolean);
    const unknown = groupBy.filter((g) => !(GROUP_BY as readonly string[]).includes(g));
    const groupByValid = unknown.length === 0 && new Set(groupBy).size === groupBy.length;
    if (!groupByValid) {
      errors.push({ field: 'group_by', code: 'invalid_value', message: `group_by takes distinct names from ${GROUP_BY.join(', ')}` });
    }
    const testMode = one(query, 'test', errors) ?? 'exclude';
    if (!REPORT_TEST_MODES.includes(testMode)) {
      errors.push({ field: 'test', code: 'invalid_value', message: 'test must be exclude, only or include' });
    }
    const totalsRaw = one(query, 'totals', errors) ?? 'false';
    if (totalsRaw !== 'true' && totalsRaw !== 'false') errors.push({ field: 'totals', code: 'invalid_value', message: 'totals must be true or false' });
    const limit = limitOf(query, errors);
    const order = keyOrder(groupByValid ? (groupBy as GroupBy[]) : []);
    const after = groupByValid ? reportCursorOf(query, order, errors) : undefined;
    unknownParameters(query, REPORT_PARAMETERS, errors);
    if (errors.length > 0) throw new ReadBackInputError(errors);

    // A local day is the UTC hour buckets that start on it (as `dayOf` labels them): where its
    // midnight is off the hour (Asia/Kolkata), the hour holding it belongs to the day before.
    const start = firstHourOfLocalDay(from, tz);
    const end = firstHourOfLocalDay(addDays(to, 1), tz);
    // s1 is a click id, about one per lead: never a bucket key, so a report by s1 sums the counters
    // each lead's view carries, walked along that collection's index on s1 a page at a time.
    const source = groupBy.includes('s1') ? LEAD_VIEWS : BUCKETS;
    const filter: Record<string, Filter[string]> = { [source.hour]: { $gte: start, $lt: end }, ...source.filter };
    // The buckets of the same leads, pings and range, for the currency of their money.
    const moneyFilter: Record<string, Filter[string]> = { [BUCKETS.hour]: { $gte: start, $lt: end } };
    for (const scoped of [filter, moneyFilter]) {
      if (principal.role === 'supplier') scoped.supplier = principal.name;
      if (testMode !== 'include') scoped.test = testMode === 'only';
    }
    const key = order.map((dimension) =>
      dimension === 'day' ? { field: source.hour, steps: this.daySteps(start, end, tz) } : { field: source.fields[dimension] ?? dimension },
    );
    return {
      collection: source.collection,
      options: { filter, key, sum: source.sum },
      moneyFilter,
      totals: totalsRaw === 'true',
      groupBy: groupBy as GroupBy[],
      order,
      after,
      limit,
      from,
      to,
      tz,
    };
  }

  /** The steps that fold hours into local days; the pages of one report ask for the same ones. */
  private daySteps(start: string, end: string, tz: string): Array<{ from: string; label: string }> {
    const id = `${tz} ${start} ${end}`;
    let steps = this.stepsCache.get(id);
    if (!steps) {
      if (this.stepsCache.size >= 64) this.stepsCache.clear();
      this.stepsCache.set(id, (steps = daySteps(start, end, tz)));
    }
    return steps;
  }

  /** The lead view as the caller may see it: consumer fields only for those who may see them. */
  private async leadRow(principal: Principal, view: LeadView): Promise<Record<string, unknown>> {
    const checks = view.enrichment as Record<string, { result?: string }> | null;
    return {
      lead_id: view.lead_id,
      supplier: view.supplier,
      sid: view.sid,
      s1: view.s1,
      lead_status: view.lead_status,
      code: view.code,
      sold: view.sold,
      revenue: view.revenue,
      currency: viewCurrency(view, this.deps.routing().currency),
      buyer: view.buyer,
      bucket: view.bucket,
      test: view.test,
      received_at: view.received_at,
      errors: view.errors,
      enrichment: checks ? { phone: checks.phone?.result ?? null, email: checks.email?.result ?? null, consent: checks.consent?.result ?? null } : null,
      delivery: view.delivery,
      feedback: view.feedback ?? [],
      ping: view.ping ?? null,
      // Not personal itself: an analyst counting a consumer's requests may see it, and an erased lead's `lead` tells it nothing.
      personal_data_erased: view.erased === true,
      lead: seesPii(principal, view) ? await this.open(view.lead_id, view.lead) : null,
    };
  }

  /** The lead as its view has it, folded from its stream: opened, or without personal fields once erased; null for none. */
  private async leadOf(leadId: unknown): Promise<unknown> {
    if (typeof leadId !== 'number') return null;
    const view = leadViewFromEvents(await this.deps.events.readStream(leadStream(leadId)));
    if (!view) return null;
    // Once erased, the envelope is not opened, even where a key is still cached in memory.
    return view.erased ? view.lead : this.open(leadId, view.lead);
  }

  /** A stored lead with its personal fields opened (or marked erased); null for no lead. */
  private async open(leadId: unknown, lead: unknown): Promise<unknown> {
    if (typeof lead !== 'object' || lead === null || typeof leadId !== 'number') return lead ?? null;
    return openLead(this.deps.personalData, leadId, lead as StoredLead);
  }

  /** A LeadReceived's data with its lead opened, for a caller allowed to see it; other events as they are. */
  private async openReceived(type: string, data: unknown): Promise<unknown> {
    if (type !== 'LeadReceived') return data;
    const received = data as { lead_id?: unknown; lead?: unknown };
    return received.lead ? { ...received, lead: await this.open(received.lead_id, received.lead) } : data;
  }
}

export interface ReportHead {
  readonly groupBy: GroupBy[];
  readonly from: string;
  readonly to: string;
  readonly tz: string;
}

export interface ReportPage extends ReportHead {
  /** The currency of the report's money; null when its range holds none. */
  readonly currency: string | null;
  readonly items: ReportRow[];
  readonly next_cursor: string | null;
  /** The whole range's totals, when asked for (`totals=true`). */
  readonly totals?: ReportRow;
}

/** Where a report's rows are summed from, and under which names the collection holds its fields. */
interface ReportSource {
  readonly collection: 'report_buckets' | 'leads';
  /** The field holding when the lead was received, in UTC: an hour (`2026-11-21T15`) or an instant within it. */
  readonly hour: string;
  /** The field of a dimension, where it is not named as the dimension. */
  readonly fields: Partial<Record<GroupBy, string>>;
  /** The fields summed, one per entry of SUMMED, in its order. */
  readonly sum: readonly string[];
  /** What else a document must hold to be counted. */
  readonly filter: Filter;
}

const BUCKETS: ReportSource = { collection: 'report_buckets', hour: 'hour', fields: {}, sum: SUMMED, filter: {} };

/**
 * The lead views: one per lead, with the counters its events added. An instant compares with the
 * hour bounds as its hour does (`2026-11-21T15:20:00.000Z` sorts between `…T15` and `…T16`). A
 * lead with no outcome yet has added nothing, and makes no row.
 */
const LEAD_VIEWS: ReportSource = {
  collection: 'leads',
  hour: 'received_at',
  fields: { state: 'accident_state' },
  sum: SUMMED.map(leadCounterField),
  filter: { [leadCounterField('received')]: 1 },
};

interface ReportPlan extends ReportHead {
  readonly collection: ReportSource['collection'];
  readonly moneyFilter: Filter;
  /** Whether a JSON page also carries the whole range's totals. */
  readonly totals: boolean;
  readonly options: Pick<AggregateOptions, 'filter' | 'key' | 'sum'>;
  /** The dimensions in the order of the group key. */
  readonly order: GroupBy[];
  readonly after: GroupValue[] | undefined;
  readonly limit: number;
}

const reportHead = ({ groupBy, from, to, tz }: ReportHead): ReportHead => ({ groupBy, from, to, tz });

/** A report cursor names the grouping it belongs to, so that one from another grouping is refused. */
const encodeReportCursor = (order: readonly GroupBy[], key: readonly GroupValue[]) =>
  Buffer.from(JSON.stringify([order.join(','), key])).toString('base64url');

function reportCursorOf(query: Query, order: readonly GroupBy[], errors: FieldError[]): GroupValue[] | undefined {
  const raw = one(query, 'cursor', errors);
  if (raw === undefined) return undefined;
  try {
    const [grouping, key] = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8')) as unknown[];
    if (
      grouping === order.join(',') &&
      Array.isArray(key) &&
      key.length === order.length &&
      key.every((value: unknown) => value === null || typeof value === 'string')
    ) {
      return key as GroupValue[];
    }
  } catch {
    // Falls through to the error below: a cursor is only what a previous page of this report gave.
  }
  errors.push({ field: 'cursor', code: 'invalid_format', message: 'cursor must be a next_cursor from a previous page of this report' });
  return undefined;
}

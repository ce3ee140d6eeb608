// Which buyers may take a lead and in what order they are tried. Pure: the clock
// comes in as `now`, and cap usage stays with the caller, which reserves slots after ranking.
import type { CheckName, CheckOutcome, Enrichment } from '../enrichment/check.js';
import type { NormalisedLead } from '../leads/lead.js';
import type { CapPeriod, Requirement } from './config-schema.js';
import type { Buyer, Hours, RoutingConfig } from './load-config.js';
import { isoWeek, localTime, pad } from './local-time.js';

type SkipReason = 'inactive' | 'state_not_allowed' | 'zip_not_allowed' | 'requirement_failed' | 'outside_hours' | 'cap_reached';

export interface CandidateDecision {
  readonly buyer: string;
  readonly price: number;
  readonly eligible: boolean;
  readonly reason: 'eligible' | SkipReason;
  /** Why, in a few machine-readable words (`phone:unknown`, `day cap 100`); never PII. */
  readonly detail?: string;
}

export interface CapPeriodSlot {
  /** Position of the cap in the buyer's `caps`, so two caps of one period stay apart. */
  readonly index: number;
  readonly period: CapPeriod;
  readonly max: number;
  readonly tz: string;
  /** The current period in the cap's zone: `2026-11-21T14`, `2026-11-21`, `2026-W47`, `2026-11`. */
  readonly key: string;
}

const CHECKS: readonly CheckName[] = ['phone', 'email', 'consent'];

/** Every buyer in file order, with the first reason it cannot take the lead; caps are not looked at. */
export function evaluateBuyers(config: RoutingConfig, lead: NormalisedLead, enrichment: Enrichment, now: Date): CandidateDecision[] {
  return config.buyers.map((buyer): CandidateDecision => {
    const skip = firstSkip(buyer, lead, enrichment, now);
    const decision = { buyer: buyer.id, price: buyer.price };
    return skip ? { ...decision, eligible: false, ...skip } : { ...decision, eligible: true, reason: 'eligible' };
  });
}

/**
 * The first reason a buyer cannot bid on a ping of these fields, caps not looked at. Nothing is
 * verified at ping time, so a buyer's requirements are met or not only when the lead is posted.
 */
export function pingSkip(buyer: Buyer, fields: Pick<NormalisedLead, 'zip' | 'accident_state'>, now: Date): { reason: SkipReason; detail?: string } | null {
  return firstSkip(buyer, fields, null, now);
}

function firstSkip(
  buyer: Buyer,
  lead: Pick<NormalisedLead, 'zip' | 'accident_state'>,
  enrichment: Enrichment | null,
  now: Date,
): { reason: SkipReason; detail?: string } | null {
  if (!buyer.active) return { reason: 'inactive' };
  if (buyer.states && !buyer.states.includes(lead.accident_state)) return { reason: 'state_not_allowed', detail: `state:${lead.accident_state}` };
  // The ZIP itself narrows a consumer down too far to be written into an event as a reason.
  if (!matchesZip(buyer.zip_prefixes, lead.zip)) return { reason: 'zip_not_allowed' };
  const failed = enrichment ? CHECKS.filter((check) => !meets(buyer.require[check], enrichment[check].result)) : [];
  if (failed.length > 0) return { reason: 'requirement_failed', detail: failed.map((c) => `${c}:${enrichment![c].result}`).join(',') };
  if (buyer.hours && !isWithinHours(buyer.hours, now)) {
    const local = localTime(now, buyer.hours.tz);
    return { reason: 'outside_hours', detail: `${local.weekday} ${pad(local.hour)}:${pad(local.minute)} ${buyer.hours.tz}` };
  }
  return null;
}

function meets(requirement: Requirement | undefined, result: CheckOutcome): boolean {
  if (requirement === 'pass') return result === 'pass';
  if (requirement === 'not_fail') return result !== 'fail';
  return true;
}

function matchesZip(prefixes: readonly string[] | null, zip: string): boolean {
  return prefixes === null || prefixes.some((prefix) => zip.startsWith(prefix));
}

/**
 * The decision to record once the caller found every slot of this cap taken: the cap that refused,
 * by its period and max, and (given the slot) the period it counts and its zone, so that two caps
 * of a buyer, or one cap in two zones, are told apart.
 */
export function capReached(decision: Pick<CandidateDecision, 'buyer' | 'price'>, cap: { period: CapPeriod; max: number; key?: string; tz?: string }): CandidateDecision {
  const when = cap.key !== undefined && cap.tz !== undefined ? ` (${cap.key} ${cap.tz})` : '';
  return { buyer: decision.buyer, price: decision.price, eligible: false, reason: 'cap_reached', detail: `${cap.period} cap ${cap.max}${when}` };
}

/**
 * Eligible buyer ids in the order the strategy tries them. `lastSold` numbers the buyers by when
 * each last got a lead (higher: more recently; absent: never), for round_robin.
 */
export function rankEligible(config: RoutingConfig, decisions: readonly CandidateDecision[], lastSold: ReadonlyMap<string, number> = NO_SALES): string[] {
  const position = new Map(config.buyers.map((b, i) => [b.id, i]));
  const priority = new Map(config.buyers.map((b) => [b.id, b.priority]));
  const eligible = decisions
    .filter((d) => d.eligible)
    .sort((a, b) => position.get(a.buyer)! - position.get(b.buyer)!);
  const byPriority = (a: CandidateDecision, b: CandidateDecision) =>
    priority.get(a.buyer)! - priority.get(b.buyer)! || position.get(a.buyer)! - position.get(b.buyer)!;
  switch (config.strategy) {
    case 'highest_price':
      return eligible.sort((a, b) => b.price - a.price || byPriority(a, b)).map((d) => d.buyer);
    case 'priority':
      return eligible.sort(byPriority).map((d) => d.buyer);
    // The eligible buyer that has waited longest since its last lead goes first. A turn counted
    // over all leads rotated by a number that leads of other states, zips or hours moved too: with
    // traffic alternating between two states, one of a state's two buyers got every lead.
    case 'round_robin': {
      const since = (d: CandidateDecision) => lastSold.get(d.buyer) ?? -1;
      return eligible.sort((a, b) => since(a) - since(b) || position.get(a.buyer)! - position.get(b.buyer)!).map((d) => d.buyer);
    }
  }
}

const NO_SALES: ReadonlyMap<string, number> = new Map();

/** The period each of the buyer's caps is counting right now. */
export function capPeriods(buyer: Buyer, now: Date): CapPeriodSlot[] {
  return buyer.caps.map((cap, index) => ({ index, period: cap.period, max: cap.max, tz: cap.tz, key: periodKey(cap.period, now, cap.tz) }));
}

// In the hour repeated when DST ends, both real hours share one key: the cap then covers two
// hours, which can only under-sell, never exceed it.
function periodKey(period: CapPeriod, now: Date, tz: string): string {
  const t = localTime(now, tz);
  const month = `${pad(t.year, 4)}-${pad(t.month)}`;
  switch (period) {
    case 'hour':
      return `${month}-${pad(t.day)}T${pad(t.hour)}`;
    case 'day':
      return `${month}-${pad(t.day)}`;
    case 'week': {
      const w = isoWeek(t.year, t.month, t.day);
      return `${pad(w.year, 4)}-W${pad(w.week)}`;
    }
    case 'month':
      return month;
  }
}

/**
 * `days` are the days a window opens on: an overnight Friday 22:00-06:00 window still runs at
 * 02:00 on Saturday even when Saturday is not listed.
 */
export function isWithinHours(hours: Hours, now: Date): boolean {
  const t = localTime(now, hours.tz);
  const minute = t.hour * 60 + t.minute;
  const [start, end] = [minutesOf(hours.start), minutesOf(hours.end)];
  if (start < end) return hours.days.includes(t.weekday) && minute >= start && minute < end;
  const yesterday = PREVIOUS_DAY[t.weekday];
  return (hours.days.includes(t.weekday) && minute >= start) || (hours.days.includes(yesterday) && minute < end);
}

const PREVIOUS_DAY = { mon: 'sun', tue: 'mon', wed: 'tue', thu: 'wed', fri: 'thu', sat: 'fri', sun: 'sat' } as const;

function minutesOf(clock: string): number {
  const [h, m] = clock.split(':').map(Number);
  return (h ?? 0) * 60 + (m ?? 0);
}

/** Where an unsold lead waits: the first bucket whose filters match, else the default one. */
export function chooseBucket(config: RoutingConfig, lead: NormalisedLead): string {
  const match = config.buckets.find(
    (b) => !b.default && (b.states === null || b.states.includes(lead.accident_state)) && matchesZip(b.zip_prefixes, lead.zip),
  );
  return (match ?? config.buckets.find((b) => b.default))?.id ?? 'unsold';
}

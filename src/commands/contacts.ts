import { randomBytes } from 'node:crypto';
import type { EventStore } from '../event-store/index.js';
import { type LeadContacts, leadStream } from '../events/lead-events.js';
import { type Decider, handleCommand, readFolded } from './handler.js';
import { type ContactHashes, type ContactKind, contactStream } from '../personal-data/contact-hashes.js';

// Duplicate detection. Each normalised mobile and e-mail has a stream named by its keyed hash
// (src/personal-data/contact-hashes.ts); a lead
// that is accepted holds a claim on both for the duplicate window. A claim is decided at the
// revision just read, so of two leads racing for one contact exactly one gets it (also across
// instances on EventStoreDB); the other re-reads, sees the claim and is a duplicate.

export interface ContactClaimed {
  readonly type: 'ContactClaimed';
  /**
   * `instance`: the process that claimed it (a random name per start; absent from claims of
   * releases before it). While the lead is not recorded, only that process knows it is still being
   * posted rather than lost with a process that died.
   */
  readonly data: { readonly lead_id: number; readonly claimed_at: string; readonly instance?: string };
}

interface ContactReleased {
  readonly type: 'ContactReleased';
  readonly data: { readonly lead_id: number; readonly released_at: string };
}

/**
 * The consumer asked, with an erasure, never to be taken again: every later lead with this contact
 * is rejected SUPPRESSED, decided by the same read of the stream a claim makes anyway.
 */
interface ContactSuppressed {
  readonly type: 'ContactSuppressed';
  readonly data: { readonly erasure_id: string; readonly suppressed_at: string };
}

export type ContactEvent = ContactClaimed | ContactReleased | ContactSuppressed;

/** The claim on the contact that was not given back, if any; whether the contact is suppressed. */
export interface ContactState {
  readonly holder: ContactClaimed['data'] | null;
  readonly suppressed: boolean;
}

export type ContactCommand =
  | {
      readonly type: 'ClaimContact';
      readonly leadId: number;
      readonly instance?: string;
      readonly now: Date;
      readonly windowMs: number;
      /** Whether an unexpired claim still holds: its lead was accepted, or is still being posted. It reads the lead's stream. */
      readonly holds: (claim: ContactClaimed['data']) => Promise<boolean>;
    }
  | { readonly type: 'ReleaseContact'; readonly leadId: number; readonly now: Date }
  | { readonly type: 'SuppressContact'; readonly erasureId: string; readonly now: Date };

export const contactDecider: Decider<ContactCommand, ContactState, ContactEvent> = {
  initialState: { holder: null, suppressed: false },
  evolve(state, event) {
    if (event.type === 'ContactClaimed') return { ...state, holder: event.data };
    if (event.type === 'ContactReleased' && state.holder?.lead_id === event.data.lead_id) return { ...state, holder: null };
    if (event.type === 'ContactSuppressed') return { ...state, suppressed: true };
    return state;
  },
  decide(command, { holder, suppressed }) {
    const at = command.now.toISOString();
    if (command.type === 'ReleaseContact') {
      return holder?.lead_id === command.leadId ? [{ type: 'ContactReleased', data: { lead_id: command.leadId, released_at: at } }] : [];
    }
    if (command.type === 'SuppressContact') {
      return suppressed ? [] : [{ type: 'ContactSuppressed', data: { erasure_id: command.erasureId, suppressed_at: at } }];
    }
    // A suppressed contact is never claimed again: the registry reads the state to say why.
    if (suppressed) return [];
    const unexpired = holder !== null && command.now.getTime() - Date.parse(holder.claimed_at) < command.windowMs;
    const data = command.instance === undefined ? { lead_id: command.leadId, claimed_at: at } : { lead_id: command.leadId, claimed_at: at, instance: command.instance };
    const claim: ContactEvent[] = [{ type: 'ContactClaimed', data }];
    // Only an unexpired claim needs its lead's stream read; a new contact is decided at once.
    return unexpired ? command.holds(holder).then((holds) => (holds ? [] : claim)) : claim;
  },
};

export type { ContactKind };

/** A lead's mobile or e-mail, normalised; and its keyed hash when the caller has it already (else it is computed). */
export type Contact = readonly [kind: ContactKind, value: string, hash?: string];

export interface ContactClaim {
  readonly stream: string;
  readonly revision: number;
  readonly leadId: number;
}

/**
 * What a claim came to: every contact claimed, or the contacts another accepted lead holds, those
 * suppressed by an erasure and those claimed by a lead not recorded yet (nothing claimed).
 */
export type ContactClaims = { readonly claims: ContactClaim[] } | ContactsTaken;

/**
 * The contacts a lead may not have: held by another accepted lead, or suppressed; or, for now,
 * claimed by a lead that another process (or this one before a restart) has not recorded (each
 * present only when some are).
 */
interface ContactsTaken {
  readonly duplicates: ContactKind[];
  readonly suppressed?: ContactKind[];
  readonly pending?: PendingContacts;
}

/**
 * Contacts claimed by leads not recorded yet by other processes: posts still under way, or lost
 * with a process that died. Which, no one here can tell before `until`, when such a claim lapses.
 */
export interface PendingContacts {
  readonly kinds: ContactKind[];
  readonly until: number;
}

/**
 * When a post told its contacts are pending had better ask again: soon while the post holding them
 * may still be answered any moment (its claim younger than RECORD_BY_MS), else when the claim
 * lapses (its process most likely died).
 */
export function pendingRetryAfterMs(pending: PendingContacts, now: number): number {
  const left = pending.until - now;
  return CLAIM_IN_FLIGHT_MS - left < RECORD_BY_MS ? Math.min(left, SOON_MS) : left;
}

const SOON_MS = 2_000;

/** Claimed by a lead not recorded yet, in another process: see PendingContacts. */
interface Pending {
  readonly until: number;
}

type Standing = 'free' | 'held' | 'suppressed' | Pending;

/** A process's name in its claims: random, new at every start. */
const instanceName = (): string => randomBytes(9).toString('base64url');

/**
 * A lead whose stream is still missing this long after its claim will never be recorded: its post
 * records it within RECORD_BY_MS, and the append then takes at most the store's lock wait (10 s).
 */
export const CLAIM_IN_FLIGHT_MS = 30_000;

/**
 * A post that has not begun its lead's append this long after its claims records nothing (503): the
 * append may wait for the store's lock (10 s at most), and must land before the claims lapse, since
 * another post may take the contacts then. A post takes a second or two; this is a stalled store.
 */
export const RECORD_BY_MS = 15_000;

/**
 * How long a post waits, in all, for posts of its process that hold its contacts: one post's
 * checks (their deadline is a second) and appends, with room. Posts queued behind more than that
 * are told to retry (DUPLICATE_PENDING) rather than wait on, so no answer waits for a queue, and a
 * post always records its lead well inside its claims' CLAIM_IN_FLIGHT_MS.
 */
export const SAME_PROCESS_WAIT_MS = 3_000;

/** What a claim or a look is decided at: its time, the duplicate window, and until when (Date.now()) it may wait. */
interface Asking {
  readonly now: Date;
  readonly windowDays: number;
  readonly waitUntil: number;
}

const askingAt = (now: Date, windowDays: number): Asking => ({ now, windowDays, waitUntil: Date.now() + SAME_PROCESS_WAIT_MS });
const DAY_MS = 86_400_000;
const RELEASE_RETRY_MS = 250;

/**
 * Runs a give-back (of contact claims, cap slots) in the background, again every RELEASE_RETRY_MS
 * while it fails, for as long as an unreleased claim could block a retry (CLAIM_IN_FLIGHT_MS, or
 * `forMs`): the store that just failed may still be failing. One that never lands errs on the safe side.
 */
export function retryWhileClaimsBlock(giveBack: () => Promise<void>, forMs = CLAIM_IN_FLIGHT_MS): void {
  const until = Date.now() + forMs;
  const attempt = (): void => {
    giveBack().catch(() => {
      if (Date.now() < until) setTimeout(attempt, RELEASE_RETRY_MS).unref();
    });
  };
  attempt();
}

export class ContactRegistry {
  /**
   * The leads this process is posting that claim contacts, from their claim to their end (see
   * `ended`), with the posts waiting for that end (null: none yet).
   */
  private readonly underWay = new Map<number, Array<() => void> | null>();
  /**
   * Leads of this process whose post ended with an append the store may still write (see
   * mayLandLater), each until its claims would lapse: those claims hold, as another process's
   * post under way does, rather than count as given back.
   */
  private readonly unsettled = new Map<number, number>();
  /** The posts of this process waiting for others' to end, and which. */
  private readonly waiting = new Map<number, Set<number>>();

  constructor(
    private readonly store: EventStore,
    private readonly hashes: ContactHashes,
    /** This process's name in the claims it makes. */
    private readonly instance: string = instanceName(),
  ) {}

  /**
   * The ClaimContact command for `leadId` (null: a look that claims nothing), and what it found of
   * a claim whose lead is not recorded yet. A claim holds while its lead is accepted, or while the
   * lead may still be on its way. Another process's post under way is pending (see
   * PendingContacts). This process's own is waited for: it ends in a second or so, and then its
   * lead says whether the contact is taken, rather than a guess; unless it is waiting (itself, or
   * through others) for this very post, which is then pending instead, so that no two posts wait
   * for each other. A post of this process that ended without recording its lead holds nothing:
   * its claims are being given back; unless its append may still land, which holds them, pending.
   */
  private claimCommand(leadId: number | null, { now, windowDays, waitUntil }: Asking): { command: ContactCommand; pending: () => Pending | null } {
    let pending: Pending | null = null;
    const holds = async (claim: ContactClaimed['data']): Promise<boolean> => {
      pending = null;
      const recorded = await this.recordedLead(claim.lead_id);
      if (recorded !== null) return recorded;
      const until = Date.parse(claim.claimed_at) + CLAIM_IN_FLIGHT_MS;
      if (now.getTime() >= until) return false;
      if (claim.instance !== this.instance || this.unsettled.has(claim.lead_id)) {
        pending = { until };
        return true;
      }
      // Its post ended without its lead (its claims are on their way back), or it is this very lead's.
      if (!this.underWay.has(claim.lead_id) || claim.lead_id === leadId) return false;
      // A wait that would close a circle, or outlast this post's time for waiting: told to retry.
      const withinMs = Math.min(until - now.getTime(), waitUntil - Date.now());
      if (withinMs <= 0 || (leadId !== null && this.waitsFor(claim.lead_id, leadId))) {
        pending = { until };
        return true;
      }
      // A look (a test lead) claims nothing, so nobody waits for it: it may wait without a record.
      const waits = leadId === null ? null : (this.waiting.get(leadId) ?? new Set<number>());
      if (waits !== null) this.waiting.set(leadId!, waits.add(claim.lead_id));
      let ended: boolean;
      try {
        ended = await this.endOf(claim.lead_id, withinMs);
      } finally {
        waits?.delete(claim.lead_id);
        if (waits?.size === 0) this.waiting.delete(leadId!);
      }
      if (!ended || this.unsettled.has(claim.lead_id)) {
        pending = { until };
        return true;
      }
      return (await this.recordedLead(claim.lead_id)) === true;
    };
    return { command: { type: 'ClaimContact', leadId: leadId ?? 0, instance: this.instance, now, windowMs: windowDays * DAY_MS, holds }, pending: () => pending };
  }

  /** Whether the post of `from` waits, itself or through the posts it waits for, for the post of `to`. */
  private waitsFor(from: number, to: number, seen = new Set<number>()): boolean {
    if (from === to) return true;
    if (seen.has(from)) return false;
    seen.add(from);
    for (const next of this.waiting.get(from) ?? []) if (this.waitsFor(next, to, seen)) return true;
    return false;
  }

  /** Whether the lead was accepted (true) or rejected (false), or null when it is not recorded. */
  private async recordedLead(leadId: number): Promise<boolean | null> {
    const lead = await this.store.readStream(leadStream(leadId));
    return lead.length === 0 ? null : !lead.some((event) => event.type === 'LeadRejected');
  }

  /** Whether this process's post of the lead ended (see `ended`) within `withinMs`. */
  private endOf(leadId: number, withinMs: number): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => resolve(false), Math.max(0, withinMs));
      const waiters = this.underWay.get(leadId);
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      if (waiters === undefined) done();
      else this.underWay.set(leadId, waiters ? [...waiters, done] : [done]);
    });
  }

  /**
   * The post of `leadId` has ended, its lead recorded or not: the posts of this process waiting to
   * learn whether its claims hold are told. A post that claimed every contact says so once it ends.
   * `mayLandLater`: its lead's append failed with the store unable to say whether it will still be
   * written; its claims then hold, pending, until they lapse (see mayLandLater in the port).
   */
  ended(leadId: number, mayLandLater = false): void {
    const waiters = this.underWay.get(leadId);
    this.underWay.delete(leadId);
    if (mayLandLater) this.unsettle(leadId);
    waiters?.forEach((wake) => wake());
  }

  /** Remembers a lead whose append may still land for as long as its claims could hold; forgets those past it. */
  private unsettle(leadId: number): void {
    const at = Date.now();
    for (const [lead, until] of this.unsettled) {
      if (until > at) break;
      this.unsettled.delete(lead);
    }
    this.unsettled.set(leadId, at + CLAIM_IN_FLIGHT_MS);
  }

  private async standing([kind, value, hash]: Contact, asking: Asking): Promise<Standing> {
    const keyed = await this.standingIn(contactStream(hash ?? this.hashes.hash(kind, value)), asking);
    if (keyed !== 'free') return keyed;
    const older = this.hashes.olderStream(kind, value, asking.now, asking.windowDays);
    return older === null ? 'free' : this.standingIn(older, asking);
  }

  private async standingIn(stream: string, asking: Asking): Promise<Standing> {
    const { state } = await readFolded(this.store, stream, contactDecider);
    if (state.suppressed) return 'suppressed';
    // Held exactly when a claim would be refused: the decider says so without writing anything.
    const { command, pending } = this.claimCommand(null, asking);
    const claim = await contactDecider.decide(command, state);
    return claim.length > 0 ? 'free' : (pending() ?? 'held');
  }

  /**
   * Which of the contacts are held by an accepted lead inside the window (none: not a duplicate),
   * and which are suppressed? Reads only.
   */
  async taken(contacts: readonly Contact[], now: Date, windowDays: number): Promise<ContactsTaken> {
    const asking = askingAt(now, windowDays);
    const standings = await Promise.all(contacts.map((contact) => this.standing(contact, asking)));
    return takenOf(contacts, standings);
  }

  /** Which of the contacts are held by an accepted lead inside the window, or suppressed (none: the lead may have them)? Reads only. */
  async duplicates(contacts: readonly Contact[], now: Date, windowDays: number): Promise<ContactKind[]> {
    const { duplicates, suppressed = [] } = await this.taken(contacts, now, windowDays);
    return [...duplicates, ...suppressed];
  }

  /** Suppresses the contact (its keyed hash): later leads with it are rejected SUPPRESSED. Idempotent. */
  async suppress(hash: string, erasureId: string, now: Date): Promise<void> {
    await handleCommand(this.store, contactStream(hash), contactDecider, { type: 'SuppressContact', erasureId, now });
  }

  /** The keyed hashes a lead records of its contacts. */
  hashesOf(lead: { readonly mobile: string; readonly email: string }): LeadContacts {
    return { mobile: this.hashes.hash('mobile', lead.mobile), email: this.hashes.hash('email', lead.email) };
  }

  /**
   * Claims every contact for the lead, or none: on a duplicate the claims taken are released, and
   * every contact held (or suppressed) is named, so the supplier learns each field that matched.
   * The claims are made at once, not one after another: each is a durable append, and a post waits
   * for them before anything else, so side by side they cost one commit's wait instead of two
   * (they usually land in one group commit). A contact that was free is claimed and given back
   * when another is held, which one read would have told; a duplicate is the rarer case, and pays
   * for it. A lead that gets every contact is under way until its post tells `ended`: a post of
   * this process that meets its claims meanwhile waits for that (see claimCommand).
   */
  async claim(contacts: readonly Contact[], leadId: number, now: Date, windowDays: number): Promise<ContactClaims> {
    this.underWay.set(leadId, null);
    let claimed: ContactClaims | undefined;
    try {
      claimed = await this.claimAll(contacts, leadId, askingAt(now, windowDays));
      return claimed;
    } finally {
      // Without every contact the lead will be rejected (or not recorded): its claims are given back already.
      if (claimed === undefined || !('claims' in claimed)) this.ended(leadId);
    }
  }

  private async claimAll(contacts: readonly Contact[], leadId: number, asking: Asking): Promise<ContactClaims> {
    const { now } = asking;
    const settled = await Promise.allSettled(contacts.map((contact) => this.claimKeyed(contact, leadId, asking)));
    const taken: ContactClaim[] = [];
    const standings: Standing[] = [];
    let failure: PromiseRejectedResult | undefined;
    settled.forEach((result) => {
      if (result.status === 'rejected') failure ??= result;
      else if (typeof result.value === 'object' && 'stream' in result.value) {
        taken.push(result.value);
        standings.push('free');
      } else standings.push(result.value);
    });
    try {
      if (failure) throw failure.reason;
      if (taken.length < contacts.length) await this.release(taken, now);
    } catch (error) {
      // The store failed with some contacts claimed: the caller never learns of them, so they are
      // given back from here, or they would make the supplier's retry a DUPLICATE.
      this.releaseLater(taken, now);
      throw error;
    }
    return taken.length === contacts.length ? { claims: taken } : takenOf(contacts, standings);
  }

  /**
   * Gives the contacts back in the background, retrying while the store is failing, for as long
   * as the claims could block anyone (CLAIM_IN_FLIGHT_MS); after that they lapse by themselves.
   */
  releaseLater(claims: readonly ContactClaim[], now: Date): void {
    if (claims.length > 0) retryWhileClaimsBlock(() => this.release(claims, now));
  }

  /** Gives the contacts back: the lead that held them was not accepted after all. */
  async release(claims: readonly ContactClaim[], now: Date): Promise<void> {
    for (const claim of claims) {
      await handleCommand(this.store, claim.stream, contactDecider, { type: 'ReleaseContact', leadId: claim.leadId, now });
    }
  }

  /** A claim under the contact's keyed name; else what stops it, also under its name from before keyed hashes (for one window). */
  private async claimKeyed([kind, value, hash]: Contact, leadId: number, asking: Asking): Promise<ContactClaim | Exclude<Standing, 'free'>> {
    const { now, windowDays } = asking;
    const older = this.hashes.olderStream(kind, value, now, windowDays);
    if (older !== null) {
      const standing = await this.standingIn(older, asking);
      // Suppression came with keyed names: an older name's stream holding one is taken as held.
      if (standing !== 'free') return standing === 'suppressed' ? 'held' : standing;
    }
    return this.claimOne(contactStream(hash ?? this.hashes.hash(kind, value)), leadId, asking);
  }

  private async claimOne(stream: string, leadId: number, asking: Asking): Promise<ContactClaim | Exclude<Standing, 'free'>> {
    const { command, pending } = this.claimCommand(leadId, asking);
    // Most contacts have never been seen: the claim is first tried as a new stream, which needs no
    // read before the append. Only a stream that exists is read and checked.
    const handled = await handleCommand(this.store, stream, contactDecider, command, { assumeNew: true });
    if (handled.events.length > 0) return { stream, revision: handled.revision, leadId };
    return handled.state.suppressed ? 'suppressed' : (pending() ?? 'held');
  }
}

/** The contacts taken, by what took them (see ContactsTaken); the standings are the contacts', in order. */
function takenOf(contacts: readonly Contact[], standings: readonly Standing[]): ContactsTaken {
  const duplicates: ContactKind[] = [];
  const suppressed: ContactKind[] = [];
  const pendingKinds: ContactKind[] = [];
  let until = 0;
  standings.forEach((standing, i) => {
    const kind = contacts[i]![0];
    if (standing === 'held') duplicates.push(kind);
    else if (standing === 'suppressed') suppressed.push(kind);
    else if (standing !== 'free') {
      pendingKinds.push(kind);
      until = Math.max(until, standing.until);
    }
  });
  return {
    duplicates,
    ...(suppressed.length > 0 ? { suppressed } : {}),
    ...(pendingKinds.length > 0 ? { pending: { kinds: pendingKinds, until } } : {}),
  };
}

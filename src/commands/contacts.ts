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
  readonly data: { readonly lead_id: number; readonly claimed_at: string };
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
    const claim: ContactEvent[] = [{ type: 'ContactClaimed', data: { lead_id: command.leadId, claimed_at: at } }];
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
 * What a claim came to: every contact claimed, or the contacts another accepted lead holds and
 * those suppressed by an erasure (nothing claimed).
 */
export type ContactClaims = { readonly claims: ContactClaim[] } | ContactsTaken;

/** The contacts a lead may not have: held by another accepted lead, or suppressed (present only when some are). */
interface ContactsTaken {
  readonly duplicates: ContactKind[];
  readonly suppressed?: ContactKind[];
}

type Standing = 'free' | 'held' | 'suppressed';

/** A lead whose stream is still missing this long after its claim will never be recorded. */
export const CLAIM_IN_FLIGHT_MS = 10_000;
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
  constructor(
    private readonly store: EventStore,
    private readonly hashes: ContactHashes,
  ) {}

  /** A claim holds while its lead is accepted, or while the lead may still be on its way. */
  private async holds(claim: ContactClaimed['data'], now: Date): Promise<boolean> {
    const lead = await this.store.readStream(leadStream(claim.lead_id));
    if (lead.length === 0) return now.getTime() - Date.parse(claim.claimed_at) < CLAIM_IN_FLIGHT_MS;
    return !lead.some((event) => event.type === 'LeadRejected');
  }

  private async standing([kind, value, hash]: Contact, now: Date, windowDays: number): Promise<Standing> {
    const keyed = await this.standingIn(contactStream(hash ?? this.hashes.hash(kind, value)), now, windowDays);
    if (keyed !== 'free') return keyed;
    const older = this.hashes.olderStream(kind, value, now, windowDays);
    return older === null ? 'free' : this.standingIn(older, now, windowDays);
  }

  private async standingIn(stream: string, now: Date, windowDays: number): Promise<Standing> {
    const { state } = await readFolded(this.store, stream, contactDecider);
    if (state.suppressed) return 'suppressed';
    // Held exactly when a claim would be refused: the decider says so without writing anything.
    const claim = await contactDecider.decide({ type: 'ClaimContact', leadId: 0, now, windowMs: windowDays * DAY_MS, holds: (c) => this.holds(c, now) }, state);
    return claim.length === 0 ? 'held' : 'free';
  }

  private async heldIn(stream: string, now: Date, windowDays: number): Promise<boolean> {
    return (await this.standingIn(stream, now, windowDays)) !== 'free';
  }

  /**
   * Which of the contacts are held by an accepted lead inside the window (none: not a duplicate),
   * and which are suppressed? Reads only.
   */
  async taken(contacts: readonly Contact[], now: Date, windowDays: number): Promise<ContactsTaken> {
    const standings = await Promise.all(contacts.map((contact) => this.standing(contact, now, windowDays)));
    const duplicates = contacts.filter((_, i) => standings[i] === 'held').map(([kind]) => kind);
    const suppressed = contacts.filter((_, i) => standings[i] === 'suppressed').map(([kind]) => kind);
    return suppressed.length > 0 ? { duplicates, suppressed } : { duplicates };
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
   * for it.
   */
  async claim(contacts: readonly Contact[], leadId: number, now: Date, windowDays: number): Promise<ContactClaims> {
    const settled = await Promise.allSettled(contacts.map((contact) => this.claimKeyed(contact, leadId, now, windowDays)));
    const taken: ContactClaim[] = [];
    const duplicates: ContactKind[] = [];
    const suppressed: ContactKind[] = [];
    let failure: PromiseRejectedResult | undefined;
    settled.forEach((result, index) => {
      const kind = contacts[index]![0];
      if (result.status === 'rejected') failure ??= result;
      else if (result.value === 'suppressed') suppressed.push(kind);
      else if (result.value === null) duplicates.push(kind);
      else taken.push(result.value);
    });
    try {
      if (failure) throw failure.reason;
      if (duplicates.length > 0 || suppressed.length > 0) await this.release(taken, now);
    } catch (error) {
      // The store failed with some contacts claimed: the caller never learns of them, so they are
      // given back from here, or they would make the supplier's retry a DUPLICATE.
      this.releaseLater(taken, now);
      throw error;
    }
    if (duplicates.length === 0 && suppressed.length === 0) return { claims: taken };
    return suppressed.length > 0 ? { duplicates, suppressed } : { duplicates };
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

  /** A claim under the contact's keyed name; null when held, also when held under its name from before keyed hashes (for one window). */
  private async claimKeyed([kind, value, hash]: Contact, leadId: number, now: Date, windowDays: number): Promise<ContactClaim | 'suppressed' | null> {
    const older = this.hashes.olderStream(kind, value, now, windowDays);
    if (older !== null && (await this.heldIn(older, now, windowDays))) return null;
    return this.claimOne(contactStream(hash ?? this.hashes.hash(kind, value)), leadId, now, windowDays);
  }

  private async claimOne(stream: string, leadId: number, now: Date, windowDays: number): Promise<ContactClaim | 'suppressed' | null> {
    const command: ContactCommand = { type: 'ClaimContact', leadId, now, windowMs: windowDays * DAY_MS, holds: (c) => this.holds(c, now) };
    // Most contacts have never been seen: the claim is first tried as a new stream, which needs no
    // read before the append. Only a stream that exists is read and checked.
    const handled = await handleCommand(this.store, stream, contactDecider, command, { assumeNew: true });
    if (handled.events.length > 0) return { stream, revision: handled.revision, leadId };
    return handled.state.suppressed ? 'suppressed' : null;
  }
}

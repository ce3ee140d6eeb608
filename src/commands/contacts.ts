import { type EventStore, type RecordedEvent, WrongExpectedRevisionError } from '../event-store/index.js';
import { leadStream } from '../events/lead-events.js';
import { MAX_RACES, hashedStream } from './streams.js';

// Duplicate detection. Each normalised mobile and e-mail has a stream named by its hash; a lead
// that is accepted holds a claim on both for the duplicate window. A claim is an append at the
// revision just read, so of two leads racing for one contact exactly one gets it (also across
// instances on EventStoreDB); the other re-reads, sees the claim and is a duplicate.

interface ContactClaimed {
  readonly lead_id: number;
  readonly claimed_at: string;
}

export type ContactKind = 'mobile' | 'email';

export const contactStream = (kind: ContactKind, value: string): string => hashedStream('contact', kind, value);

export interface ContactClaim {
  readonly stream: string;
  readonly revision: number;
  readonly leadId: number;
}

/** What a claim came to: every contact claimed, or the contacts another accepted lead holds (nothing claimed). */
export type ContactClaims = { readonly claims: ContactClaim[] } | { readonly duplicates: ContactKind[] };

/** A lead whose stream is still missing this long after its claim will never be recorded. */
export const CLAIM_IN_FLIGHT_MS = 10_000;
const RELEASE_RETRY_MS = 250;

/**
 * Runs a give-back (of contact claims, cap slots) in the background, again every RELEASE_RETRY_MS
 * while it fails, for as long as an unreleased claim could block a retry (CLAIM_IN_FLIGHT_MS): the
 * store that just failed may still be failing. One that never lands errs on the safe side.
 */
export function retryWhileClaimsBlock(giveBack: () => Promise<void>): void {
  const until = Date.now() + CLAIM_IN_FLIGHT_MS;
  const attempt = (): void => {
    giveBack().catch(() => {
      if (Date.now() < until) setTimeout(attempt, RELEASE_RETRY_MS).unref();
    });
  };
  attempt();
}

/** The latest claim inside the window that was not released. */
function latestClaim(events: RecordedEvent[], now: number, windowMs: number): ContactClaimed | null {
  let holder: ContactClaimed | null = null;
  for (const event of events) {
    if (event.type === 'ContactClaimed') holder = event.data as ContactClaimed;
    else if (event.type === 'ContactReleased' && holder?.lead_id === (event.data as { lead_id: number }).lead_id) holder = null;
  }
  return holder && now - Date.parse(holder.claimed_at) < windowMs ? holder : null;
}

export class ContactRegistry {
  constructor(private readonly store: EventStore) {}

  private async held(events: RecordedEvent[], now: number, windowDays: number): Promise<boolean> {
    const claim = latestClaim(events, now, windowDays * 86_400_000);
    if (!claim) return false;
    const lead = await this.store.readStream(leadStream(claim.lead_id));
    if (lead.length === 0) return now - Date.parse(claim.claimed_at) < CLAIM_IN_FLIGHT_MS;
    return !lead.some((event) => event.type === 'LeadRejected');
  }

  /** Which of the contacts are held by an accepted lead inside the window (none: not a duplicate)? Reads only. */
  async duplicates(contacts: ReadonlyArray<[ContactKind, string]>, now: Date, windowDays: number): Promise<ContactKind[]> {
    const held: ContactKind[] = [];
    for (const [kind, value] of contacts) {
      if (await this.held(await this.store.readStream(contactStream(kind, value)), now.getTime(), windowDays)) held.push(kind);
    }
    return held;
  }

  /**
   * Claims every contact for the lead, or none: on a duplicate the claims already taken are
   * released, the contacts after the first one found held are only looked at, and every one held
   * is named, so the supplier learns each field that matched.
   */
  async claim(contacts: ReadonlyArray<[ContactKind, string]>, leadId: number, now: Date, windowDays: number): Promise<ContactClaims> {
    const taken: ContactClaim[] = [];
    let firstHeld = -1;
    try {
      for (const [index, [kind, value]] of contacts.entries()) {
        const claim = await this.claimOne(contactStream(kind, value), leadId, now, windowDays);
        if (!claim) {
          firstHeld = index;
          break;
        }
        taken.push(claim);
      }
      if (firstHeld >= 0) await this.release(taken, now);
    } catch (error) {
      // The store failed with some contacts claimed: the caller never learns of them, so they are
      // given back from here, or they would make the supplier's retry a DUPLICATE.
      this.releaseLater(taken, now);
      throw error;
    }
    if (firstHeld < 0) return { claims: taken };
    // The contacts before the first one held were free (this lead just had them).
    const later = await this.duplicates(contacts.slice(firstHeld + 1), now, windowDays);
    return { duplicates: [contacts[firstHeld]![0], ...later] };
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
      await this.store.append(claim.stream, [{ type: 'ContactReleased', data: { lead_id: claim.leadId, released_at: now.toISOString() } }]);
    }
  }

  private async claimOne(stream: string, leadId: number, now: Date, windowDays: number): Promise<ContactClaim | null> {
    for (let race = 0; race < MAX_RACES; race++) {
      // Most contacts have never been seen: the first try claims the stream as new, which needs no
      // read (two reads per lead were 3–4% of a post). Only a stream that exists is read and checked.
      const events = race === 0 ? [] : await this.store.readStream(stream);
      if (await this.held(events, now.getTime(), windowDays)) return null;
      const last = events.at(-1);
      try {
        const data: ContactClaimed = { lead_id: leadId, claimed_at: now.toISOString() };
        const result = await this.store.append(stream, [{ type: 'ContactClaimed', data }], {
          expectedRevision: last ? last.revision : 'no_stream',
        });
        return { stream, revision: result.nextExpectedRevision, leadId };
      } catch (error) {
        if (!(error instanceof WrongExpectedRevisionError)) throw error;
      }
    }
    throw new Error(`could not claim a contact after ${MAX_RACES} races`);
  }
}

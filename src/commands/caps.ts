import { randomUUID } from 'node:crypto';
import type { EventStore } from '../event-store/index.js';
import { leadStream } from '../events/lead-events.js';
import { retryWhileClaimsBlock } from './contacts.js';
import { type Decider, type Folded, handleCommand, readFolded } from './handler.js';

// Buyer caps. Each cap period of a buyer is a stream (`cap-acme-law-0-2026-11-21`); a sale takes
// a slot by a decision at the revision it read, so the count can never pass the cap, however many
// posts or instances race for the last slot. What this instance has read of each stream is kept,
// so a check reads only what others appended since.
//
// A period with much room left is not appended to at every sale: the instance reserves a block of
// slots in one append (as lead ids are given out) and hands them to its sales from memory, so a
// capped sale waits for one durable append fewer, the contact claims' and the lead's. The block is
// a small share of the room left (BLOCK_SHARE), so near the cap the slots go one sale at a time
// again, each in the stream under its lead's id. A stop gives back the slots in hand, and so does
// a reload of the routing file (a cap lowered below what the instances hold must count only the
// slots sold); a process killed with some leaves them taken for the rest of the period: the cap
// then sells that many fewer, never more.

export interface CapPeriod {
  /** Position of the cap in the buyer's `caps` list. */
  readonly index: number;
  readonly max: number;
  /** The current period in the cap's time zone, e.g. `2026-11-21`. */
  readonly key: string;
}

export type CapEvent =
  | { readonly type: 'CapSlotTaken'; readonly data: { readonly lead_id: number } }
  | { readonly type: 'CapSlotReleased'; readonly data: { readonly lead_id: number } }
  /** Slots one instance hands to its sales from memory, each counted as used from here on. */
  | { readonly type: 'CapSlotsReserved'; readonly data: { readonly block: string; readonly slots: number } }
  /** The slots of a block its instance never handed out, given back as it stopped. */
  | { readonly type: 'CapSlotsReturned'; readonly data: { readonly block: string; readonly slots: number } };

/** Slots in use in one cap period, the leads that gave theirs back (rare: a sale not recorded), and the blocks given back. */
export interface CapUsage {
  readonly used: number;
  readonly released: ReadonlySet<number>;
  readonly returned: ReadonlySet<string>;
}

export type CapCommand =
  /**
   * Sales that arrived together get a slot in order while there is room under each one's own cap:
   * a reload of the routing file may change the cap between two of them, and a sale routed by the
   * new file is held to the new cap, never to the one of the sale before it.
   */
  | {
      readonly type: 'TakeCapSlots';
      readonly takes: ReadonlyArray<{ readonly leadId: number; readonly max: number }>;
      /**
       * The id for a block of slots, when the instance may take one: taken instead, sized by
       * blockSize on the room the stream has left, when that is more than the sales need.
       */
      readonly block?: string;
    }
  | { readonly type: 'ReleaseCapSlot'; readonly leadId: number }
  | { readonly type: 'ReturnCapSlots'; readonly block: string; readonly slots: number };

/**
 * A block is at most a BLOCK_SHARE-th of the room left under the cap: a process killed with a
 * block in hand leaves its slots taken for the rest of the period, so a cap of 1,000 loses at most
 * 15 of them to one kill, and one with less than 2 × BLOCK_SHARE left goes a sale at a time.
 */
const BLOCK_SHARE = 64;
/** And at most this many slots: one append per this many sales to a buyer with a large cap. */
const MAX_BLOCK = 64;

/** The block a period with `room` left gives out (0: none, below 1). */
const blockSize = (room: number): number => Math.max(0, Math.min(MAX_BLOCK, Math.floor(room / BLOCK_SHARE)));

export const capDecider: Decider<CapCommand, CapUsage, CapEvent> = {
  initialState: { used: 0, released: new Set(), returned: new Set() },
  evolve(state, event) {
    switch (event.type) {
      case 'CapSlotTaken':
        return { ...state, used: state.used + 1 };
      case 'CapSlotsReserved':
        return { ...state, used: state.used + event.data.slots };
      // A block comes back once: a return retried after its append landed unseen frees nothing more.
      case 'CapSlotsReturned':
        if (state.returned.has(event.data.block)) return state;
        return { ...state, used: state.used - event.data.slots, returned: new Set(state.returned).add(event.data.block) };
      case 'CapSlotReleased':
        // A lead gives its slot back once: a give-back retried after its append landed unseen (or
        // recorded twice before this rule) frees nothing more, so the cap is never exceeded.
        if (state.released.has(event.data.lead_id)) return state;
        return { ...state, used: state.used - 1, released: new Set(state.released).add(event.data.lead_id) };
    }
  },
  decide(command, state) {
    if (command.type === 'ReleaseCapSlot') return state.released.has(command.leadId) ? [] : [{ type: 'CapSlotReleased', data: { lead_id: command.leadId } }];
    if (command.type === 'ReturnCapSlots') return state.returned.has(command.block) ? [] : [{ type: 'CapSlotsReturned', data: { block: command.block, slots: command.slots } }];
    // Sized on the stream as read at this revision, never on what an instance last knew: a
    // stale count (a fresh process's, or one that sold nothing for a while) would take a block
    // sized for room that is gone, or all that is left.
    if (command.block !== undefined) {
      const slots = blockSize(Math.min(...command.takes.map((take) => take.max)) - state.used);
      if (slots > command.takes.length) return [{ type: 'CapSlotsReserved', data: { block: command.block, slots } }];
    }
    const events: CapEvent[] = [];
    for (const { leadId, max } of command.takes) if (state.used + events.length < max) events.push({ type: 'CapSlotTaken', data: { lead_id: leadId } });
    return events;
  },
};

type Usage = Folded<CapUsage>;
const UNREAD: Usage = { state: capDecider.initialState, revision: -1 };

const MAX_CACHED_PERIODS = 10_000;

/**
 * How long after its cap slot a sale's lead must be recorded, else the slot is given back. Far
 * longer than any post takes (its checks are time-boxed to seconds): a post still under way when
 * its slot went back would pass the cap by one.
 */
const ORPHAN_SLOT_MS = 5 * 60_000;

const capStream = (buyer: string, cap: CapPeriod): string => `cap-${buyer}-${cap.index}-${cap.key}`;

/** Slots this instance reserved in one period: `next` of `end` handed out, under the cap `max` the block was reserved at. */
interface Block {
  readonly id: string;
  next: number;
  readonly end: number;
  readonly max: number;
}

/**
 * Whether `block` has a slot for a sale held to `max`. Not after a reload lowered the cap below the
 * one the block was reserved under: how many of the other instances' blocks they have sold, this
 * one cannot know, so its slots are given back and the sale decided on the stream (see grant).
 */
const hasSlot = (block: Block | undefined, max: number): block is Block => block !== undefined && block.next < block.end && max >= block.max;

/** Hands a sale held to `max` the next slot of `block`: whether it had one (see hasSlot). */
function takeSlot(block: Block | undefined, max: number): boolean {
  if (!hasSlot(block, max)) return false;
  block.next++;
  return true;
}

interface PendingTake {
  readonly leadId: number;
  readonly max: number;
  resolve(taken: boolean): void;
  reject(error: unknown): void;
}

export class CapLedger {
  private readonly usage = new Map<string, Usage>();
  /** Takes waiting for a period stream; while one append to it is under way the next ones gather. */
  private readonly waiting = new Map<string, PendingTake[]>();
  private readonly busy = new Set<string>();

  /** Per period stream, the revision up to which every slot taken is known to be a recorded lead's or given back. */
  private readonly vouched = new Map<string, number>();
  /** Per period stream, the block of slots in hand. */
  private readonly blocks = new Map<string, Block>();
  /** Set once the blocks in hand are given back: every take after that goes to the stream. */
  private returning = false;
  /** One more at every giveBack: a block reserved across one is given back as soon as it lands. */
  private givenBack = 0;

  constructor(
    private readonly store: EventStore,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Takes one slot in every cap of the buyer, or none: null when it took them, else the cap it
   * found full (so that the routing decision names the cap that refused, not all of them). A take
   * that fails (the store) gives back the slots already taken, in the background while the store fails.
   */
  async reserve<Cap extends CapPeriod>(buyer: string, caps: readonly Cap[], leadId: number): Promise<Cap | null> {
    const taken: string[] = [];
    for (const cap of caps) {
      let took: boolean;
      try {
        took = await this.take(capStream(buyer, cap), cap.max, leadId);
      } catch (error) {
        retryWhileClaimsBlock(async () => {
          for (const stream of taken) await this.give(stream, leadId);
        });
        throw error;
      }
      if (!took) {
        for (const stream of taken) await this.give(stream, leadId);
        return cap;
      }
      taken.push(capStream(buyer, cap));
    }
    return null;
  }

  /**
   * The first cap of the buyer that a reservation would find full now, or null: reads only, takes
   * nothing. The answer for a test lead, which must meet a full cap as a real lead would but use no slot.
   */
  async fullCap<Cap extends CapPeriod>(buyer: string, caps: readonly Cap[]): Promise<Cap | null> {
    for (const cap of caps) {
      const stream = capStream(buyer, cap);
      if (!hasSlot(this.blocks.get(stream), cap.max) && (await this.peek(stream)) >= cap.max) return cap;
    }
    return null;
  }

  /** Would a reservation get a slot in every cap of the buyer now? (See fullCap.) */
  async hasRoom(buyer: string, caps: readonly CapPeriod[]): Promise<boolean> {
    return (await this.fullCap(buyer, caps)) === null;
  }

  /**
   * Gives back the slots of a reservation whose lead was not recorded. Also a slot handed out of a
   * block: in the stream under the lead's id like any other, so that every instance can use it.
   */
  async release(buyer: string, caps: readonly CapPeriod[], leadId: number): Promise<void> {
    for (const cap of caps) await this.give(capStream(buyer, cap), leadId);
  }

  /**
   * Gives back the slots of every block in hand, once no sale will take one: as the service stops,
   * after its requests in flight. A block whose return fails stays taken (the period sells that
   * many fewer); the others are still given back, and the first failure is thrown after them.
   */
  async returnUnused(): Promise<void> {
    this.returning = true;
    await this.giveBack();
  }

  /**
   * Gives back the slots of every block in hand; the next sales take new blocks, sized on the caps
   * then in force. After a reload of the routing file: a cap lowered below what the instances hold
   * in blocks then counts only the slots sold, also in an instance that sells nothing more to that
   * buyer (one that does gives its block back at its next sale anyway, see grant).
   */
  async giveBack(): Promise<void> {
    this.givenBack++;
    let failure: { error: unknown } | undefined;
    for (const [stream, block] of this.blocks) {
      try {
        await this.giveBlock(stream, block);
      } catch (error) {
        failure ??= { error };
      }
    }
    if (failure) throw failure.error;
  }

  /**
   * A popular buyer's period stream is hot: every sale appends to it. A sale takes its slot from
   * the block in hand when there is one; takes that arrive while an append is under way are
   * granted together in the next one, so a hot cap costs one commit per block, or per group of
   * sales near the cap, instead of one per sale.
   */
  private take(stream: string, max: number, leadId: number): boolean | Promise<boolean> {
    if (takeSlot(this.blocks.get(stream), max)) return true;
    return new Promise<boolean>((resolve, reject) => {
      const queue = this.waiting.get(stream) ?? [];
      queue.push({ leadId, max, resolve, reject });
      this.waiting.set(stream, queue);
      if (!this.busy.has(stream)) void this.grantWaiting(stream);
    });
  }

  /** Grants the takes waiting on a stream, a group per append, until none is left. */
  private async grantWaiting(stream: string): Promise<void> {
    this.busy.add(stream);
    try {
      for (let group = this.waiting.get(stream); group && group.length > 0; group = this.waiting.get(stream)) {
        this.waiting.delete(stream);
        try {
          await this.grant(stream, group);
        } catch (error) {
          for (const take of group) take.reject(error);
        }
      }
    } finally {
      this.busy.delete(stream);
    }
  }

  private async grant(stream: string, waiting: PendingTake[]): Promise<void> {
    const givenBack = this.givenBack;
    // Those that queued while the append before reserved a block are served from it first.
    const inHand = this.blocks.get(stream);
    const group = waiting.filter((take) => {
      if (!takeSlot(inHand, take.max)) return true;
      take.resolve(true);
      return false;
    });
    if (group.length === 0) return;
    // A block that still holds slots but had none for these sales was reserved under a cap a reload
    // has lowered since: its slots go back first, so the stream counts only those sold.
    if (inHand && inHand.next < inHand.end) await this.giveBlock(stream, inHand);
    // Once the blocks in hand are given back (a stop), no new one is taken.
    const block = this.returning ? {} : { block: randomUUID() };
    const command: CapCommand = { type: 'TakeCapSlots', takes: group.map(({ leadId, max }) => ({ leadId, max })), ...block };
    let known = this.usage.get(stream) ?? UNREAD;
    // What this instance knows may be full while slots were given back since (here or elsewhere):
    // a refusal is only decided on what the stream holds now. Room is decided at once, and a
    // conflict then reads what came since.
    const full = () => group.some((take, index) => known.state.used + index >= take.max);
    if (full()) {
      known = await readFolded(this.store, stream, capDecider, known);
      if (full() && (await this.freeOrphans(stream, known.state.released))) known = await readFolded(this.store, stream, capDecider, known);
    }
    const handled = await handleCommand(this.store, stream, capDecider, command, { from: known });
    this.remember(stream, handled);
    const [first] = handled.events;
    if (first?.type === 'CapSlotsReserved') {
      const block = this.handOut(stream, group, first.data);
      // A reload gave the blocks back while this one was being reserved, for sales routed by the
      // file before it: kept, it would hold slots under a cap the reload may have lowered until
      // this instance's next sale to the buyer. Its slots not handed out go back at once.
      if (this.givenBack !== givenBack) await this.giveBlock(stream, block);
      return;
    }
    const granted = new Set(handled.events.map((event) => (event.data as { lead_id: number }).lead_id));
    for (const take of group) take.resolve(granted.has(take.leadId));
  }

  /**
   * A block just reserved: its first slots go to the sales waiting, the rest stay in hand for the
   * next ones, in place of the block before it (used up, or given back in grant).
   */
  private handOut(stream: string, group: PendingTake[], reserved: { readonly block: string; readonly slots: number }): Block {
    // Reserved under the lowest cap of the sales waiting, as the decider sized it.
    const block: Block = { id: reserved.block, next: 0, end: reserved.slots, max: Math.min(...group.map((take) => take.max)) };
    this.keep(stream, block);
    for (const take of group) take.resolve(takeSlot(block, take.max));
    return block;
  }

  /** Gives back a block's slots not handed out, and forgets it. */
  private async giveBlock(stream: string, block: Block): Promise<void> {
    if (this.blocks.get(stream) === block) this.blocks.delete(stream);
    const unused = block.end - block.next;
    if (unused <= 0) return;
    const handled = await handleCommand(this.store, stream, capDecider, { type: 'ReturnCapSlots', block: block.id, slots: unused }, { from: this.usage.get(stream) ?? UNREAD });
    this.remember(stream, handled);
  }

  private keep(stream: string, block: Block): void {
    // A past period's block is of no use: the oldest is forgotten, its slots taken as if sold.
    if (!this.blocks.has(stream) && this.blocks.size >= MAX_CACHED_PERIODS) this.blocks.delete(this.blocks.keys().next().value!);
    this.blocks.set(stream, block);
  }

  /**
   * Gives back the slots of a full period whose leads were never recorded, ORPHAN_SLOT_MS after
   * they were taken: a process killed between a sale's cap slot and its lead's append left them,
   * and nothing else would, so the cap sold fewer leads than its max for the rest of the period.
   * Each slot's lead is looked up once: the revision up to which all are vouched for is remembered.
   * True when one was given back.
   */
  private async freeOrphans(stream: string, released: ReadonlySet<number>): Promise<boolean> {
    const from = this.vouched.get(stream) ?? -1;
    const events = await this.store.readStream(stream, { fromRevision: from + 1 });
    const givenBack = new Set(released);
    for (const event of events) if (event.type === 'CapSlotReleased') givenBack.add((event.data as { lead_id: number }).lead_id);
    let through = from;
    let young = false;
    let freed = false;
    for (const event of events) {
      const leadId = (event.data as { lead_id: number }).lead_id;
      if (event.type === 'CapSlotTaken' && !givenBack.has(leadId)) {
        if (this.now() - event.created < ORPHAN_SLOT_MS) young = true;
        else if ((await this.store.readStream(leadStream(leadId), { maxCount: 1 })).length === 0) {
          await this.give(stream, leadId);
          freed = true;
        }
      }
      // A young slot may yet be a lead's: it is looked at again next time, and so is all after it.
      if (!young) through = event.revision;
    }
    if (!this.vouched.has(stream) && this.vouched.size >= MAX_CACHED_PERIODS) this.vouched.delete(this.vouched.keys().next().value!);
    this.vouched.set(stream, through);
    return freed;
  }

  private async give(stream: string, leadId: number): Promise<void> {
    await handleCommand(this.store, stream, capDecider, { type: 'ReleaseCapSlot', leadId }, { from: this.usage.get(stream) ?? UNREAD });
  }

  /**
   * The slots in use, counted from what this instance knows plus what was appended since. The
   * shared count is left alone: only a stream's own take queue moves it, so a read racing an
   * append can never count one slot twice.
   */
  private async peek(stream: string): Promise<number> {
    return (await readFolded(this.store, stream, capDecider, this.usage.get(stream) ?? UNREAD)).state.used;
  }

  private remember(stream: string, usage: Usage): void {
    if (!this.usage.has(stream) && this.usage.size >= MAX_CACHED_PERIODS) this.usage.delete(this.usage.keys().next().value!);
    this.usage.set(stream, { state: usage.state, revision: usage.revision });
  }
}

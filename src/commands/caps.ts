import { type EventStore, WrongExpectedRevisionError } from '../event-store/index.js';
import { MAX_RACES } from './streams.js';

// Buyer caps. Each cap period of a buyer is a stream (`cap-acme-law-0-2026-11-21`); a sale takes
// a slot by appending at the revision it read, so the count can never pass the cap, however many
// posts or instances race for the last slot. What this instance has read of each stream is kept,
// so a check reads only what others appended since.

export interface CapPeriod {
  /** Position of the cap in the buyer's `caps` list. */
  readonly index: number;
  readonly max: number;
  /** The current period in the cap's time zone, e.g. `2026-11-21`. */
  readonly key: string;
}

interface Usage {
  revision: number | 'no_stream';
  used: number;
}

const MAX_CACHED_PERIODS = 10_000;

export const capStream = (buyer: string, cap: CapPeriod): string => `cap-${buyer}-${cap.index}-${cap.key}`;

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

  constructor(private readonly store: EventStore) {}

  /** Takes one slot in every cap of the buyer, or none (false: a cap is full). */
  async reserve(buyer: string, caps: readonly CapPeriod[], leadId: number): Promise<boolean> {
    const taken: string[] = [];
    for (const cap of caps) {
      if (!(await this.take(capStream(buyer, cap), cap.max, leadId))) {
        for (const stream of taken) await this.give(stream, leadId);
        return false;
      }
      taken.push(capStream(buyer, cap));
    }
    return true;
  }

  /**
   * Would a reservation get a slot in every cap of the buyer now? Reads only, takes nothing: the
   * answer for a test lead, which must meet a full cap as a real lead would but use no slot.
   */
  async hasRoom(buyer: string, caps: readonly CapPeriod[]): Promise<boolean> {
    for (const cap of caps) {
      if ((await this.peek(capStream(buyer, cap))) >= cap.max) return false;
    }
    return true;
  }

  /** Gives back the slots of a reservation whose lead was not recorded. */
  async release(buyer: string, caps: readonly CapPeriod[], leadId: number): Promise<void> {
    for (const cap of caps) await this.give(capStream(buyer, cap), leadId);
  }

  /**
   * A popular buyer's period stream is hot: every sale appends to it. Takes that arrive while an
   * append is under way are granted together in the next one (one event per lead, one append),
   * so a hot cap costs one commit per group of sales instead of one per sale.
   */
  private take(stream: string, max: number, leadId: number): Promise<boolean> {
    return new Promise<boolean>((resolve, reject) => {
      const queue = this.waiting.get(stream) ?? [];
      queue.push({ leadId, max, resolve, reject });
      this.waiting.set(stream, queue);
      if (!this.busy.has(stream)) void this.drain(stream);
    });
  }

  private async drain(stream: string): Promise<void> {
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

  private async grant(stream: string, group: PendingTake[]): Promise<void> {
    for (let race = 0; race < MAX_RACES; race++) {
      const usage = await this.catchUp(stream);
      const room = Math.max(0, group[0]!.max - usage.used);
      const granted = group.slice(0, room);
      if (granted.length > 0) {
        try {
          const result = await this.store.append(
            stream,
            granted.map((take) => ({ type: 'CapSlotTaken', data: { lead_id: take.leadId } })),
            { expectedRevision: usage.revision },
          );
          usage.revision = result.nextExpectedRevision;
          usage.used += granted.length;
        } catch (error) {
          // Another instance took slots first: count them and decide again.
          if (error instanceof WrongExpectedRevisionError) continue;
          throw error;
        }
      }
      group.forEach((take, index) => take.resolve(index < granted.length));
      return;
    }
    throw new Error(`could not take a cap slot after ${MAX_RACES} races`);
  }

  private async give(stream: string, leadId: number): Promise<void> {
    await this.store.append(stream, [{ type: 'CapSlotReleased', data: { lead_id: leadId } }]);
  }

  /**
   * The slots in use, counted from a copy of what this instance knows plus what was appended
   * since. The shared count is left alone: only a stream's own take queue moves it, so a read
   * racing an append can never count one slot twice.
   */
  private async peek(stream: string): Promise<number> {
    const known = this.usage.get(stream);
    let used = known?.used ?? 0;
    const fromRevision = known === undefined || known.revision === 'no_stream' ? 0 : known.revision + 1;
    for (const event of await this.store.readStream(stream, { fromRevision })) used += event.type === 'CapSlotTaken' ? 1 : -1;
    return used;
  }

  private async catchUp(stream: string): Promise<Usage> {
    let usage = this.usage.get(stream);
    if (!usage) {
      if (this.usage.size >= MAX_CACHED_PERIODS) this.usage.delete(this.usage.keys().next().value!);
      usage = { revision: 'no_stream', used: 0 };
      this.usage.set(stream, usage);
    }
    const fromRevision = usage.revision === 'no_stream' ? 0 : usage.revision + 1;
    for (const event of await this.store.readStream(stream, { fromRevision })) {
      usage.used += event.type === 'CapSlotTaken' ? 1 : -1;
      usage.revision = event.revision;
    }
    return usage;
  }
}

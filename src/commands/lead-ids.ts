import type { EventStore } from '../event-store/index.js';
import { type Decider, type Folded, handleCommand, readFolded } from './handler.js';

// lead_id comes from HiLo blocks: an instance reserves `blockSize` ids at a time in the
// `lead-id-blocks` stream (decided at the revision read, so two instances never get the same
// block) and hands them out from memory, so a lead costs no round trip for its id.

export const LEAD_ID_BLOCKS_STREAM = 'lead-id-blocks';

export interface LeadIdBlockReserved {
  readonly type: 'LeadIdBlockReserved';
  readonly data: { readonly from: number; readonly to: number; readonly instance: string };
}

/** The highest id any instance has reserved. */
export interface LeadIdBlocks {
  readonly highest: number;
}

export interface ReserveLeadIdBlock {
  readonly blockSize: number;
  readonly instance: string;
}

/** The stream holds a reservation with no whole-number range: no id can be given out without risking one given before. */
export class LeadIdBlocksDamagedError extends Error {
  override readonly name = 'LeadIdBlocksDamagedError';
}

export const leadIdBlocksDecider: Decider<ReserveLeadIdBlock, LeadIdBlocks, LeadIdBlockReserved> = {
  initialState: { highest: 0 },
  evolve: (state, event) => (event.type === 'LeadIdBlockReserved' ? { highest: Math.max(state.highest, event.data.to) } : state),
  decide: (command, state) => {
    // A reservation written by something else than this decider (a damaged or hand-made event)
    // folds to NaN: refused, rather than hand out ids that name no stream of their own.
    if (!Number.isSafeInteger(state.highest)) throw new LeadIdBlocksDamagedError(`${LEAD_ID_BLOCKS_STREAM} holds a LeadIdBlockReserved without a whole-number "to": lead ids cannot be reserved until it is repaired`);
    return [{ type: 'LeadIdBlockReserved', data: { from: state.highest + 1, to: state.highest + command.blockSize, instance: command.instance } }];
  },
};

export class LeadIdAllocator {
  private next = 0;
  private end = 0;
  private blocks: Folded<LeadIdBlocks> = { state: leadIdBlocksDecider.initialState, revision: -1 };
  private reserving: Promise<void> | undefined;

  constructor(
    private readonly store: EventStore,
    private readonly blockSize = 100,
    private readonly instance = 'leadpost',
  ) {}

  async nextId(): Promise<number> {
    while (this.next >= this.end) {
      this.reserving ??= this.reserve().finally(() => (this.reserving = undefined));
      await this.reserving;
    }
    return this.next++;
  }

  private async reserve(): Promise<void> {
    // Catch up with the blocks other instances reserved since the last one (once per block, so
    // cheap), which spares the conflict an append on stale knowledge would meet.
    const known = await readFolded(this.store, LEAD_ID_BLOCKS_STREAM, leadIdBlocksDecider, this.blocks);
    const handled = await handleCommand(this.store, LEAD_ID_BLOCKS_STREAM, leadIdBlocksDecider, { blockSize: this.blockSize, instance: this.instance }, { from: known });
    const block = handled.events[0]!.data;
    this.blocks = handled;
    this.next = block.from;
    this.end = block.to + 1;
  }
}

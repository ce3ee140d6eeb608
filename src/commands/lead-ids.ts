import { type EventStore, WrongExpectedRevisionError } from '../event-store/index.js';

// lead_id comes from HiLo blocks: an instance reserves `blockSize` ids at a time in the
// `lead-id-blocks` stream (guarded by expected revision, so two instances never get the same
// block) and hands them out from memory, so a lead costs no round trip for its id.

export const LEAD_ID_BLOCKS_STREAM = 'lead-id-blocks';

interface LeadIdBlockReserved {
  readonly from: number;
  readonly to: number;
}

export class LeadIdAllocator {
  private next = 0;
  private end = 0;
  private revision: number | 'no_stream' = 'no_stream';
  private highest = 0;
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
    for (;;) {
      const fromRevision = this.revision === 'no_stream' ? 0 : this.revision + 1;
      for (const event of await this.store.readStream(LEAD_ID_BLOCKS_STREAM, { fromRevision })) {
        this.highest = Math.max(this.highest, (event.data as LeadIdBlockReserved).to);
        this.revision = event.revision;
      }
      const block: LeadIdBlockReserved = { from: this.highest + 1, to: this.highest + this.blockSize };
      try {
        const result = await this.store.append(
          LEAD_ID_BLOCKS_STREAM,
          [{ type: 'LeadIdBlockReserved', data: { ...block, instance: this.instance } }],
          { expectedRevision: this.revision },
        );
        this.revision = result.nextExpectedRevision;
        this.highest = block.to;
        this.next = block.from;
        this.end = block.to + 1;
        return;
      } catch (error) {
        // Another instance took the next block first: read it and try for the one after.
        if (!(error instanceof WrongExpectedRevisionError)) throw error;
      }
    }
  }
}

// Stores that fail on demand, as a disk, a server or a network would: decorators around the real
// embedded adapters, switched by the test while the service runs. Only the failing calls change;
// everything else goes to the real store.

import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type AllSubscription,
  type AppendOptions,
  type AppendResult,
  type EventData,
  type EventStore,
  EventStoreUnavailableError,
  type Position,
  type ReadAllOptions,
  type ReadStreamOptions,
  type RecordedEvent,
  type SubscribeOptions,
} from '../../../src/event-store/index.js';
import {
  type AggregateOptions,
  type Fence,
  type FindOptions,
  type Group,
  type IndexSpec,
  type Lease,
  type ReadDoc,
  type ReadModelStore,
  ReadModelUnavailableError,
  type ReadWrite,
} from '../../../src/read-models/port.js';
import { tempDir } from '../../support/tmp.js';

export interface EventStoreFault {
  /** Appends to streams for which this answers true fail. */
  failAppend?: (stream: string) => boolean;
  /** Stream reads for which this answers true fail. */
  failRead?: (stream: string) => boolean;
  /** Appends to streams for which this answers true land, then fail: an answer lost on its way back. */
  loseAnswer?: (stream: string) => boolean;
  /** What a failing call throws; default: EventStoreUnavailableError, as an adapter reports a store it cannot reach. */
  error?: () => Error;
}

export class FaultyEventStore implements EventStore {
  /** Appends refused so far. */
  refused = 0;

  constructor(
    private readonly inner: EventStore,
    readonly fault: EventStoreFault = {},
  ) {}

  heal(): void {
    delete this.fault.failAppend;
    delete this.fault.failRead;
    delete this.fault.loseAnswer;
  }

  private error(): Error {
    return this.fault.error?.() ?? new EventStoreUnavailableError('injected: the event store is unreachable');
  }

  async append(streamId: string, events: readonly EventData[], options?: AppendOptions): Promise<AppendResult> {
    if (this.fault.failAppend?.(streamId)) {
      this.refused += 1;
      throw this.error();
    }
    const appended = await this.inner.append(streamId, events, options);
    if (this.fault.loseAnswer?.(streamId)) throw this.error();
    return appended;
  }

  async readStream(streamId: string, options?: ReadStreamOptions): Promise<RecordedEvent[]> {
    if (this.fault.failRead?.(streamId)) throw this.error();
    return this.inner.readStream(streamId, options);
  }

  readAll(options?: ReadAllOptions): Promise<RecordedEvent[]> {
    return this.inner.readAll(options);
  }

  subscribeToAll(options?: SubscribeOptions): AllSubscription {
    return this.inner.subscribeToAll(options);
  }

  headPosition(): Promise<Position> {
    return this.inner.headPosition();
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

export interface ReadModelFault {
  /** Projection commits fail. */
  commit: boolean;
  /** Reads (documents, queries, checkpoints) fail. */
  reads: boolean;
}

export class FaultyReadModels implements ReadModelStore {
  /** Commits refused so far. */
  refusedCommits = 0;

  constructor(
    private readonly inner: ReadModelStore,
    readonly fault: ReadModelFault = { commit: false, reads: false },
  ) {}

  private check(kind: keyof ReadModelFault): void {
    if (this.fault[kind]) throw new ReadModelUnavailableError('injected: the read-model store is unreachable');
  }

  async commit(projection: string, checkpoint: Position, writes: readonly ReadWrite[], fence?: Fence): Promise<void> {
    if (this.fault.commit) this.refusedCommits += 1;
    this.check('commit');
    return this.inner.commit(projection, checkpoint, writes, fence);
  }

  async acquireLease(name: string, holder: string, ttlMs: number): Promise<Lease> {
    this.check('commit');
    return this.inner.acquireLease(name, holder, ttlMs);
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    this.check('commit');
    return this.inner.releaseLease(name, holder);
  }

  async lease(name: string): Promise<Lease | null> {
    this.check('reads');
    return this.inner.lease(name);
  }

  async leasesNamed(prefix: string): Promise<Lease[]> {
    this.check('reads');
    return this.inner.leasesNamed(prefix);
  }

  async removeLeasesNamed(prefix: string, ranOutBefore: number): Promise<number> {
    this.check('commit');
    return this.inner.removeLeasesNamed(prefix, ranOutBefore);
  }

  async checkpoint(projection: string): Promise<Position | null> {
    this.check('reads');
    return this.inner.checkpoint(projection);
  }

  async collections(): Promise<string[]> {
    this.check('reads');
    return this.inner.collections();
  }

  async get(collection: string, id: string): Promise<ReadDoc | null> {
    this.check('reads');
    return this.inner.get(collection, id);
  }

  async find(collection: string, options: FindOptions): Promise<ReadDoc[]> {
    this.check('reads');
    return this.inner.find(collection, options);
  }

  async aggregate(collection: string, options: AggregateOptions): Promise<Group[]> {
    this.check('reads');
    return this.inner.aggregate(collection, options);
  }

  async ensureIndexes(collection: string, indexes: ReadonlyArray<IndexSpec>): Promise<void> {
    this.check('commit');
    return this.inner.ensureIndexes(collection, indexes);
  }

  drop(collection: string): Promise<void> {
    return this.inner.drop(collection);
  }

  resetCheckpoint(projection: string): Promise<void> {
    return this.inner.resetCheckpoint(projection);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

// ---------------------------------------------------------------------------------------------
// Faults of the operating system, for a server in its own process. Each says why it cannot run
// here instead of pretending.

/**
 * RLIMIT_FSIZE of a running process, set from outside with util-linux `prlimit`: at 1 byte every
 * write that would grow a file past its first byte fails (EFBIG; Node ignores SIGXFSZ), which is
 * what a full disk does to SQLite's WAL. Unlike chmod it also binds root and files already open,
 * and raising it again needs no privilege (the hard limit is left alone).
 */
export function fileSizeLimit(pid: number, bytes: number | 'unlimited'): void {
  execFileSync('prlimit', ['--pid', String(pid), `--fsize=${bytes}:`], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Why the file-size limit cannot be used here, or null when it can. */
export function fileSizeLimitUnavailable(): string | null {
  try {
    fileSizeLimit(process.pid, 'unlimited');
    return null;
  } catch (error) {
    return `prlimit(1) could not set RLIMIT_FSIZE (${(error as Error).message.split('\n')[0]}); it comes with util-linux`;
  }
}

/**
 * The immutable attribute (`chattr +i`): a read-only data dir that binds root too, and — unlike
 * chmod, which is checked only when a file is opened — also the files the server already holds
 * open (Linux refuses writes to immutable files through open descriptors).
 */
export function immutable(paths: readonly string[], on: boolean): void {
  if (paths.length > 0) execFileSync('chattr', [on ? '+i' : '-i', ...paths], { stdio: ['ignore', 'ignore', 'pipe'] });
}

/** Why `chattr +i` cannot be used here, or null when it can. */
export function immutableUnavailable(): string | null {
  const probe = tempDir('chattr-probe');
  const file = join(probe.path, 'probe');
  writeFileSync(file, 'x');
  try {
    immutable([file], true);
    immutable([file], false);
    return null;
  } catch (error) {
    return (
      `chattr +i is not permitted here (${(error as Error).message.split('\n')[0]}): it needs CAP_LINUX_IMMUTABLE and an ext2/3/4, xfs or btrfs data dir. ` +
      'chmod cannot stand in: it does not revoke write access from the database files the server already has open'
    );
  } finally {
    probe.remove();
  }
}

import type { ExpectedRevision } from '../port.js';

// Messages between the embedded store and its writer thread. An append's events cross as one JSON
// text, serialised once on the caller's side, so the writer thread only binds strings.

/** How one event sits in a commit row: [id, type, data, metadata]. */
export type StoredEvent = [id: string, type: string, data: unknown, metadata: Record<string, unknown>];

export interface AppendRequest {
  readonly stream: string;
  readonly expected: ExpectedRevision;
  /** JSON array of StoredEvent tuples. */
  readonly events: string;
  readonly count: number;
  readonly created: number;
}

export interface WriteBatch {
  readonly batch: number;
  readonly appends: readonly AppendRequest[];
}

export type AppendOutcome =
  | { readonly ok: true; readonly revision: number; readonly commit: number }
  | { readonly ok: false; readonly kind: 'wrong_expected_revision'; readonly actual: number | 'no_stream' }
  | { readonly ok: false; readonly kind: 'unavailable'; readonly message: string };

export interface WriteBatchResult {
  readonly batch: number;
  readonly outcomes: readonly AppendOutcome[];
}

export interface WriterOptions {
  readonly file: string;
  /** false: one transaction (and one fsync) per append, for the benchmark's comparison. */
  readonly groupCommit: boolean;
}

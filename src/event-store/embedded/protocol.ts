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

/**
 * A batch as it crosses to the writer thread: one flat array, the batch's number and then five
 * values per append (stream, expected revision, time, event count, events). Copying an object per
 * append walks and names every property, on both threads; a flat array copies only the values.
 */
export function encodeBatch(batch: number, appends: readonly AppendRequest[]): unknown[] {
  const values: unknown[] = [batch];
  for (const append of appends) values.push(append.stream, append.expected, append.created, append.count, append.events);
  return values;
}

export function decodeBatch(values: readonly unknown[]): WriteBatch {
  const appends: AppendRequest[] = [];
  for (let i = 1; i < values.length; i += 5) {
    appends.push({
      stream: values[i] as string,
      expected: values[i + 1] as ExpectedRevision,
      created: values[i + 2] as number,
      count: values[i + 3] as number,
      events: values[i + 4] as string,
    });
  }
  return { batch: values[0] as number, appends };
}

export type AppendOutcome =
  | { readonly ok: true; readonly revision: number; readonly commit: number }
  | { readonly ok: false; readonly kind: 'wrong_expected_revision'; readonly actual: number | 'no_stream' }
  /** `code`: SQLite's (SQLITE_FULL, SQLITE_READONLY…), which says what an operator must fix. */
  | { readonly ok: false; readonly kind: 'unavailable'; readonly message: string; readonly code?: string };

/**
 * The answer of one group commit, as it crosses back to the store: for each batch, its number and
 * how many appends it held, then three numbers per append (see OUTCOME). One array of numbers is
 * one copy; an object per outcome was a walk of every property on the writer thread and as many
 * objects made again on the thread that serves HTTP.
 */
export interface GroupAnswer {
  readonly numbers: readonly number[];
  /** The messages and codes of `unavailable` outcomes, which name them by index. */
  readonly messages: readonly string[];
}

/**
 * An outcome's first number; the next two are (revision, commit), (actual revision or -1 for no
 * stream, 0) or (message index, code index or -1 when it has none).
 */
export const OUTCOME = { ok: 0, wrongExpectedRevision: 1, unavailable: 2 } as const;

export function encodeAnswer(batches: readonly WriteBatch[], outcomes: readonly AppendOutcome[]): GroupAnswer {
  const numbers: number[] = [];
  const messages: string[] = [];
  let index = 0;
  for (const batch of batches) {
    numbers.push(batch.batch, batch.appends.length);
    for (let end = index + batch.appends.length; index < end; index++) {
      const outcome = outcomes[index]!;
      if (outcome.ok) numbers.push(OUTCOME.ok, outcome.revision, outcome.commit);
      else if (outcome.kind === 'wrong_expected_revision') numbers.push(OUTCOME.wrongExpectedRevision, outcome.actual === 'no_stream' ? -1 : outcome.actual, 0);
      else numbers.push(OUTCOME.unavailable, messages.push(outcome.message) - 1, outcome.code === undefined ? -1 : messages.push(outcome.code) - 1);
    }
  }
  return { numbers, messages };
}

export interface WriterOptions {
  readonly file: string;
  /** false: one transaction (and one fsync) per append, for the benchmark's comparison. */
  readonly groupCommit: boolean;
}

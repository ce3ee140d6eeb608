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
 * A batch as it crosses to the writer thread: one string, a JSON header line (the batch, then each
 * append's stream, expected revision, time, event count and text length) and the appends' event
 * texts back to back. Copying a message of objects walks and names every property of every append,
 * on both threads; one string is one copy, and the texts are sliced out of it again.
 */
export function encodeBatch(batch: number, appends: readonly AppendRequest[]): string {
  const header: unknown[] = [batch];
  let texts = '';
  for (const append of appends) {
    header.push(append.stream, append.expected, append.created, append.count, append.events.length);
    texts += append.events;
  }
  // JSON escapes every newline inside the header's strings: the first one ends it.
  return `${JSON.stringify(header)}\n${texts}`;
}

export function decodeBatch(message: string): WriteBatch {
  const end = message.indexOf('\n');
  const header = JSON.parse(message.slice(0, end)) as [number, ...unknown[]];
  const appends: AppendRequest[] = [];
  let at = end + 1;
  for (let i = 1; i < header.length; i += 5) {
    const length = header[i + 4] as number;
    appends.push({
      stream: header[i] as string,
      expected: header[i + 1] as ExpectedRevision,
      created: header[i + 2] as number,
      count: header[i + 3] as number,
      events: message.slice(at, at + length),
    });
    at += length;
  }
  return { batch: header[0], appends };
}

export type AppendOutcome =
  | { readonly ok: true; readonly revision: number; readonly commit: number }
  | { readonly ok: false; readonly kind: 'wrong_expected_revision'; readonly actual: number | 'no_stream' }
  | { readonly ok: false; readonly kind: 'unavailable'; readonly message: string };

/**
 * The answer of one group commit, as it crosses back to the store: for each batch, its number and
 * how many appends it held, then three numbers per append (see OUTCOME). One array of numbers is
 * one copy; an object per outcome was a walk of every property on the writer thread and as many
 * objects made again on the thread that serves HTTP.
 */
export interface GroupAnswer {
  readonly numbers: readonly number[];
  /** The messages of `unavailable` outcomes, which name them by index. */
  readonly messages: readonly string[];
}

/** An outcome's first number; the next two are (revision, commit), (actual revision or -1 for no stream, 0) or (message index, 0). */
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
      else numbers.push(OUTCOME.unavailable, messages.push(outcome.message) - 1, 0);
    }
  }
  return { numbers, messages };
}

export interface WriterOptions {
  readonly file: string;
  /** false: one transaction (and one fsync) per append, for the benchmark's comparison. */
  readonly groupCommit: boolean;
}

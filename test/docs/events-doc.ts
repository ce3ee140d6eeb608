// docs/events.md read as data: its tables, by their header, give which stream each event type is
// in, each type's data fields, each stream's metadata and each type's versions. A field written
// `name?` is on some events only; what follows a parenthesis in a cell is prose, not names.

/** Field names, each with whether it is optional (`name?` in the docs). */
export type Fields = ReadonlyMap<string, boolean>;

export interface EventsCatalogue {
  /** Each type's stream name patterns (`lead-{lead_id}`). */
  readonly types: ReadonlyMap<string, ReadonlySet<string>>;
  readonly fields: ReadonlyMap<string, Fields>;
  /** Each stream pattern's metadata fields. */
  readonly metadata: ReadonlyMap<string, Fields>;
  /** Each versioned type's current version and the versions it has an upcaster from. */
  readonly versions: ReadonlyMap<string, { readonly current: number; readonly upcasters: ReadonlySet<number> }>;
  /** The fields of a stored lead, from the example of "Personal data: encrypted fields". */
  readonly storedLeadFields: string[];
  /** The text of "Reading a stream". */
  readonly cliSection: string;
  /** The documented stream pattern a stream name is, the most specific one; undefined when none. */
  streamOf(stream: string): string | undefined;
  /** The same, among the rows of the Metadata table. */
  metadataStreamOf(stream: string): string | undefined;
}

/** The names in backticks, up to the first parenthesis outside them. */
function names(cell: string): string[] {
  const beforeProse = cell.replace(/`[^`]*`/g, (code) => code.replace(/\(/g, '\u0000')).split('(')[0]!;
  return [...beforeProse.matchAll(/`([^`]+)`/g)].map(([, name]) => name!.replace(/\u0000/g, '('));
}

const fieldsOf = (cell: string): Fields => new Map(names(cell).map((name) => [name.replace(/\?$/, ''), name.endsWith('?')]));

/** A table row's cells; a `|` inside backticks (`{kind: buyer|bucket}`) is text. */
function cellsOf(line: string): string[] {
  const cells: string[] = [];
  for (const piece of line.slice(1, -1).split('|')) {
    const last = cells.length - 1;
    if (last >= 0 && (cells[last]!.split('`').length - 1) % 2 === 1) cells[last] += `|${piece}`;
    else cells.push(piece);
  }
  return cells.map((cell) => cell.trim());
}

/** A pattern's regular expression: `{name}` is any non-empty text. */
const matcher = (pattern: string): RegExp => new RegExp(`^${pattern.split(/\{[^}]+\}/).map((text) => text.replace(/[.*+?^$()|[\]\\-]/g, '\\$&')).join('.+')}$`);

/** The pattern with the most literal text that matches: `ping-fields-{hash}` before `ping-{ping_id}`. */
function mostSpecific(patterns: Iterable<string>, stream: string): string | undefined {
  const literal = (pattern: string) => pattern.replace(/\{[^}]+\}/g, '').length;
  return [...patterns].filter((pattern) => matcher(pattern).test(stream)).sort((a, b) => literal(b) - literal(a))[0];
}

export function readCatalogue(markdown: string): EventsCatalogue {
  const types = new Map<string, Set<string>>();
  const fields = new Map<string, Fields>();
  const metadata = new Map<string, Fields>();
  const versions = new Map<string, { current: number; upcasters: Set<number> }>();
  const inStream = (type: string, pattern: string) => types.set(type, (types.get(type) ?? new Set()).add(pattern));

  let heading = '';
  let header: string[] = [];
  for (const line of markdown.split('\n')) {
    if (line.startsWith('## ')) heading = line;
    if (!line.startsWith('|')) {
      header = [];
      continue;
    }
    const cells = cellsOf(line);
    if (header.length === 0) {
      header = cells;
      continue;
    }
    if (cells[0]!.startsWith('---')) continue;
    const [first = '', second = '', third = ''] = cells;
    if (header[0] === 'event' && header[1] === 'fields') {
      // A table of a stream's own section (`## A lead's stream: \`lead-{lead_id}\``) names its stream in the heading.
      const stream = names(heading)[0];
      for (const type of names(first)) {
        fields.set(type, fieldsOf(second));
        if (stream) inStream(type, stream);
      }
    } else if (header[0] === 'stream' && header[1] === 'events') {
      for (const type of names(second)) inStream(type, names(first)[0]!);
    } else if (header[0] === 'stream' && header[1] === 'metadata') {
      for (const stream of names(first)) metadata.set(stream, fieldsOf(second));
    } else if (header[0] === 'events' && header[1] === 'current version') {
      const upcasters = new Set([...third.matchAll(/(\d+) → (\d+)/g)].map(([, from]) => Number(from)));
      for (const type of names(first)) versions.set(type, { current: Number(second), upcasters });
    }
  }

  const example = /^"lead": (\{[\s\S]*?^\})/m.exec(markdown);
  if (!example) throw new Error('docs/events.md has no example of a stored lead');
  const cliSection = markdown.slice(markdown.indexOf('## Reading a stream'));
  return {
    types,
    fields,
    metadata,
    versions,
    storedLeadFields: Object.keys(JSON.parse(example[1]!) as object),
    cliSection,
    streamOf: (stream) => mostSpecific(new Set([...types.values()].flatMap((patterns) => [...patterns])), stream),
    metadataStreamOf: (stream) => mostSpecific(metadata.keys(), stream),
  };
}

// The keys a JSON text gives more than once in one object, at every level. JSON.parse keeps the
// last of them without a word: `"active": false` added at the top of a buyer whose entry already
// says `"active": true` further down leaves it buying, and a merge can double a price or a cap the
// same way. Other tools (an editor's outline, a reviewer, another parser) may read the other value.
//
// One pass over the text, with a stack of its own rather than recursion (a file may nest deeper
// than the call stack goes). Each open object remembers its keys, and where it sits by a link to
// the one around it, so a path is only made for a key given twice. Text that is no JSON is scanned
// to its end without a fault; what is found in it means nothing (JSON.parse says what is wrong).

type Segment = string | number;

export interface RepeatedKey {
  /** From the top: `['buyers', 0, 'active']`. */
  readonly path: readonly Segment[];
  /** How many times the key is given in its object: 2 or more. */
  times: number;
}

interface Frame {
  readonly parent: Frame | undefined;
  /** Where this object or array is in its parent (undefined for the top). */
  readonly segment: Segment | undefined;
  /** The keys an object has given, each with its count, or its record once it is given twice; null for an array. */
  readonly keys: Map<string, number | RepeatedKey> | null;
  /** In an object, the key of the value being read; in an array, the index of the item. */
  at: Segment;
  /** In an object, whether the next string is a key. */
  expectKey: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Every key given more than once in one object of `text` (JSON), in the order their second
 * occurrence comes; keys are compared as JSON reads them (`"\u0061ctive"` is `active`). Stops
 * looking for new ones once `most` are found.
 */
export function repeatedKeys(text: string, most = Infinity): RepeatedKey[] {
  const found: RepeatedKey[] = [];
  let top: Frame | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length && text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) {
          escaped = true;
          i++;
        }
      }
      if (!top?.keys || !top.expectKey) continue;
      const key = escaped ? unescaped(text.slice(start, i + 1)) : text.slice(start + 1, i);
      top.at = key;
      top.expectKey = false;
      const seen = top.keys.get(key);
      if (seen === undefined) {
        top.keys.set(key, 1);
      } else if (typeof seen !== 'number') {
        seen.times++;
      } else if (found.length < most) {
        const repeated: RepeatedKey = { path: [...pathOf(top), key], times: 2 };
        top.keys.set(key, repeated);
        found.push(repeated);
      }
    } else if (c === 0x7b || c === 0x5b) {
      // `{` or `[`: a value of the one around it, at its current key or index.
      top = { parent: top, segment: top?.at, keys: c === 0x7b ? new Map() : null, at: 0, expectKey: c === 0x7b };
    } else if (c === 0x7d || c === 0x5d) {
      top = top?.parent;
    } else if (c === 0x2c && top) {
      // `,`: the next member of an object starts with its key; the next item of an array is one on.
      if (top.keys) top.expectKey = true;
      else top.at = (top.at as number) + 1;
    }
  }
  return found;
}

/** A quoted key as JSON reads it; as written when its escapes are no JSON. */
function unescaped(quoted: string): string {
  try {
    return JSON.parse(quoted) as string;
  } catch {
    return quoted;
  }
}

/** The path to an object's place, made only when one of its keys is given twice. */
function pathOf(frame: Frame): Segment[] {
  const path: Segment[] = [];
  for (let f: Frame | undefined = frame; f?.parent; f = f.parent) path.push(f.segment!);
  return path.reverse();
}

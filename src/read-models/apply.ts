import type { ReadWrite } from './port.js';
import { withoutId } from './validate.js';

// What a write does to a stored document in the embedded store, mirroring the MongoDB update
// operators the other adapter uses, including where MongoDB refuses ($inc on a non-number, $push
// on a non-array), so that the two adapters fail the same commits.
//
// New documents are made by spreading the write's fields rather than adding them one by one: V8
// turns an object that gets more than about a dozen properties through computed keys into a
// dictionary, and such documents are slower to fold and to stringify (a rebuild folds and
// stringifies every document). For the same reason a `set` makes the document anew by spreading
// the stored one and the write's fields: assigning them one by one goes through a store that has
// seen every document's shape, which V8 then handles in its runtime, field by field (folding a
// rebuild's lead views took three to four times as long).

export type Doc = Record<string, unknown>;

/** Leaves out `undefined` values, as the MongoDB client does with `ignoreUndefined`. */
function assignDefined(target: Doc, fields: Doc): Doc {
  const keys = Object.keys(fields);
  for (let i = 0; i < keys.length; i++) {
    const value = fields[keys[i]!];
    if (value !== undefined) target[keys[i]!] = value;
  }
  return target;
}

function hasUndefined(fields: Doc): boolean {
  const keys = Object.keys(fields);
  for (let i = 0; i < keys.length; i++) if (fields[keys[i]!] === undefined) return true;
  return false;
}

/** A new document with the defined fields of `fields`, in fast (non-dictionary) form when it can be. */
function copyDefined(fields: Doc): Doc {
  return hasUndefined(fields) ? assignDefined({}, fields) : { ...fields };
}

/**
 * The document after the write. `current` is the stored document (undefined when missing) and is
 * owned by the caller's commit: it may be changed in place, or left for the new document returned.
 */
export function applyWrite(current: Doc | undefined, write: ReadWrite): Doc {
  switch (write.op) {
    case 'put':
      return copyDefined(Object.hasOwn(write.doc, '_id') ? withoutId(write.doc) : write.doc);
    case 'set':
      if (!current) return copyDefined(write.set);
      return hasUndefined(write.set) ? assignDefined(current, write.set) : { ...current, ...write.set };
    case 'inc': {
      const doc = current ?? (write.setOnInsert ? copyDefined(write.setOnInsert) : {});
      for (const field of Object.keys(write.inc)) {
        const value = doc[field] ?? (field in doc ? null : 0);
        if (typeof value !== 'number') throw new TypeError(`cannot inc ${write.collection}/${write.id}.${field}: it holds ${JSON.stringify(value)}`);
        doc[field] = value + write.inc[field]!;
      }
      return doc;
    }
    case 'push': {
      const doc = current ?? {};
      const value = doc[write.field];
      if (value !== undefined && !Array.isArray(value)) {
        throw new TypeError(`cannot push to ${write.collection}/${write.id}.${write.field}: it holds ${JSON.stringify(value)}`);
      }
      // A copy: the array may be one a caller passed in an earlier `set` of this commit.
      doc[write.field] = [...(value ?? []), write.value];
      return doc;
    }
  }
}

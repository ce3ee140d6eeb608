import type { ReadWrite } from './port.js';
import { withoutId } from './validate.js';

// What a write does to a stored document in the embedded store, mirroring the MongoDB update
// operators the other adapter uses, including where MongoDB refuses ($inc on a non-number, $push
// on a non-array), so that the two adapters fail the same commits.

export type Doc = Record<string, unknown>;

/** Leaves out `undefined` values, as the MongoDB client does with `ignoreUndefined`. */
function assignDefined(target: Doc, fields: Doc): void {
  for (const [field, value] of Object.entries(fields)) if (value !== undefined) target[field] = value;
}

/**
 * The document after the write. `current` is the stored document (undefined when missing) and is
 * owned by the caller's commit, so it is changed in place rather than copied per write.
 */
export function applyWrite(current: Doc | undefined, write: ReadWrite): Doc {
  switch (write.op) {
    case 'put': {
      const doc: Doc = {};
      assignDefined(doc, withoutId(write.doc));
      return doc;
    }
    case 'set': {
      const doc = current ?? {};
      assignDefined(doc, write.set);
      return doc;
    }
    case 'inc': {
      const doc = current ?? {};
      if (!current && write.setOnInsert) assignDefined(doc, write.setOnInsert);
      for (const [field, by] of Object.entries(write.inc)) {
        const value = doc[field] ?? (field in doc ? null : 0);
        if (typeof value !== 'number') throw new TypeError(`cannot inc ${write.collection}/${write.id}.${field}: it holds ${JSON.stringify(value)}`);
        doc[field] = value + by;
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

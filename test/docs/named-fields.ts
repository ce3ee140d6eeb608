// Which fields of a real answer its documented schema does not name. The published schemas leave
// most objects open, so that a client keeps working when a field is added; the docs tests hold the
// docs to a stricter rule: every field the service sends today is named, with its meaning. An
// object the document leaves free-form (no `properties`, or `additionalProperties: true`) is not
// looked into.

type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** The schema at a `#/…` pointer of the document. */
function resolve(doc: Json, ref: string): Json {
  const target = ref
    .slice(2)
    .split('/')
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'))
    .reduce<unknown>((node, part) => (isObject(node) ? node[part] : undefined), doc);
  if (!isObject(target)) throw new Error(`${ref} does not resolve`);
  return target;
}

/** The schema with its $ref followed and its allOf/anyOf/oneOf parts merged: properties, items, additionalProperties. */
function flatten(doc: Json, schema: Json): { properties?: Json; items?: Json; open: boolean } {
  const parts = [schema];
  const properties: Json = {};
  let named = false;
  let open = false;
  let items: Json | undefined;
  while (parts.length > 0) {
    const part = parts.shift()!;
    if (typeof part.$ref === 'string') parts.push(resolve(doc, part.$ref));
    for (const keyword of ['allOf', 'anyOf', 'oneOf']) if (Array.isArray(part[keyword])) parts.push(...(part[keyword] as Json[]));
    if (isObject(part.properties)) {
      named = true;
      Object.assign(properties, part.properties);
    }
    if (part.additionalProperties === true || isObject(part.additionalProperties)) open = true;
    if (isObject(part.items)) items = part.items;
  }
  return { ...(named ? { properties } : {}), ...(items ? { items } : {}), open };
}

/** `where.field` for every field of `value` that `schema` (in `doc`) does not name. */
export function unnamedFields(doc: Json, schema: Json, value: unknown, where = ''): string[] {
  const flat = flatten(doc, schema);
  if (Array.isArray(value)) {
    return flat.items ? value.flatMap((item, i) => unnamedFields(doc, flat.items!, item, `${where}[${i}]`)) : [];
  }
  if (!isObject(value) || !flat.properties || flat.open) return [];
  return Object.entries(value).flatMap(([field, sub]) => {
    const named = flat.properties![field];
    return isObject(named) ? unnamedFields(doc, named, sub, `${where}.${field}`) : [`${where}.${field}`];
  });
}

/** The schema of a documented response's JSON body, as a $ref into the document. */
export const bodySchema = (pointer: string): Json => ({ $ref: `#/${pointer}/content/application~1json/schema` });

// The ajv schemas the routes validate with, made fit for an OpenAPI 3.1 document (JSON Schema
// 2020-12). Formats of our own ('dialable-phone', …) mean nothing to an OpenAPI reader, so each is
// mapped to a standard one or dropped, on purpose: a format or keyword this file does not know
// stops the document from being built, so a new rule cannot slip into the docs half-described.

/** Our ajv formats → what an OpenAPI reader should see; null: no standard format says it. */
const FORMATS: Readonly<Record<string, string | null>> = {
  'lead-email': 'email',
  'consent-certificate-url': 'uri',
  // libphonenumber decides; no JSON Schema format comes close. The description says it in words.
  'dialable-phone': null,
  // Standard formats pass through unchanged.
  email: 'email',
  uri: 'uri',
  'date-time': 'date-time',
  date: 'date',
};

/** The JSON Schema keywords our schemas use, all of which OpenAPI 3.1 understands. */
const KEYWORDS = new Set([
  'type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'pattern',
  'minLength', 'maxLength', 'minimum', 'maximum', 'minItems', 'maxItems', 'format', 'description',
  'title', 'default', 'examples', 'oneOf', 'anyOf', 'nullable', '$ref',
]);
/** Keywords that only mean something to ajv: dropped. */
const DROPPED = new Set(['$id', '$schema']);

export class UndocumentableSchemaError extends Error {
  override readonly name = 'UndocumentableSchemaError';
}

/** A deep copy of `schema` in OpenAPI 3.1 terms; throws on a keyword or format it cannot map. */
export function toOpenApiSchema(schema: unknown, path = '#'): Record<string, unknown> {
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw new UndocumentableSchemaError(`${path}: a schema must be an object`);
  }
  const out: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (DROPPED.has(keyword)) continue;
    if (!KEYWORDS.has(keyword)) throw new UndocumentableSchemaError(`${path}: keyword '${keyword}' has no OpenAPI mapping`);
    switch (keyword) {
      case 'format': {
        const mapped = FORMATS[String(value)];
        if (mapped === undefined) throw new UndocumentableSchemaError(`${path}: format '${String(value)}' has no OpenAPI mapping`);
        if (mapped !== null) out.format = mapped;
        break;
      }
      case 'properties':
        out.properties = Object.fromEntries(
          Object.entries(value as Record<string, unknown>).map(([name, sub]) => [name, toOpenApiSchema(sub, `${path}/properties/${name}`)]),
        );
        break;
      case 'items':
      case 'additionalProperties':
        out[keyword] = typeof value === 'boolean' ? value : toOpenApiSchema(value, `${path}/${keyword}`);
        break;
      case 'oneOf':
      case 'anyOf':
        out[keyword] = (value as unknown[]).map((sub, i) => toOpenApiSchema(sub, `${path}/${keyword}/${i}`));
        break;
      default:
        out[keyword] = Array.isArray(value) ? [...(value as unknown[])] : value;
    }
  }
  return out;
}

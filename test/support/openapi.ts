import type Router from '@koa/router';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type Koa from 'koa';
import { type ExampleName } from '../../src/docs/examples.js';
import { openApiPath } from '../../src/docs/openapi.js';

// Reading the OpenAPI document the way a client generator would: a response schema is found by
// path, method and status and checked with a JSON Schema 2020-12 validator.

type Json = Record<string, unknown>;

/** The router inside an app made by createApp (@koa/router marks its dispatch middleware). */
export function routerOf(app: Koa<never>): Router {
  const dispatch = (app.middleware as Array<{ router?: Router }>).find((middleware) => middleware.router);
  if (!dispatch?.router) throw new Error('no router in the app');
  return dispatch.router;
}

/** `GET /functions/leads/:lead_id` for every method of every route (HEAD, added with GET, left out). */
export function routesOf(router: Router): string[] {
  return router.stack
    .filter((layer) => layer.methods.length > 0)
    .flatMap((layer) => layer.methods.filter((m) => m !== 'HEAD').map((m) => `${m} ${String(layer.path)}`));
}

const pointer = (...parts: string[]) => parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

/** The code an example shows (two example names are variants of a code). */
export function exampleCode(name: ExampleName): string {
  if (name === 'IDEMPOTENCY_CONFLICT_OTHER_BODY' || name === 'IDEMPOTENCY_CONFLICT_MALFORMED_KEY') return 'IDEMPOTENCY_CONFLICT';
  if (name === 'INVALID_INPUT' || name === 'PING_INVALID') return 'INVALID';
  if (name === 'HEADERS_TOO_LARGE') return 'PAYLOAD_TOO_LARGE';
  if (name === 'NOT_HTTP') return 'MALFORMED_JSON';
  if (name === 'UNAVAILABLE_MAY_BE_RECORDED') return 'UNAVAILABLE';
  return name;
}

export class DocumentReader {
  private readonly ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });

  constructor(readonly doc: Json) {
    this.ajv.addSchema(doc, 'openapi.json');
  }

  /** A validator for a schema in the document: `#/components/schemas/Lead`. */
  compile(ref: string) {
    return this.ajv.compile({ $ref: `openapi.json${ref}` });
  }

  /** The path template a concrete path matches: `/functions/leads/42` → `/functions/leads/{lead_id}`. */
  template(path: string): string | undefined {
    const paths = Object.keys(this.doc.paths as Json);
    // The router is not strict: `/functions/leads/` is `/functions/leads`.
    const bare = path.split('?')[0]!.replace(/(.)\/$/, '$1');
    return paths.find((template) => new RegExp(`^${template.replace(/\{\w+\}/g, '[^/]+')}$`).test(bare));
  }

  /** Where the answer of this request is described: an operation's response, or a shared one (404, 405). */
  responseOf(method: string, path: string, status: number): { pointer: string; response: Json } | undefined {
    const template = this.template(path);
    const operation = template ? ((this.doc.paths as Json)[template] as Json | undefined)?.[method.toLowerCase()] as Json | undefined : undefined;
    const own = (operation?.responses as Json | undefined)?.[String(status)] as Json | undefined;
    if (own) return { pointer: pointer('paths', template!, method.toLowerCase(), 'responses', String(status)), response: own };
    const shared = { 404: 'NotFound', 405: 'MethodNotAllowed' }[status];
    const response = shared ? ((this.doc.components as Json).responses as Json)[shared] as Json : undefined;
    return response ? { pointer: pointer('components', 'responses', shared!), response } : undefined;
  }

  private readonly validators = new Map<string, ReturnType<Ajv2020['compile']>>();

  /** A response's JSON validator, compiled once: a fuzz run checks thousands of answers against a few dozen. */
  private validatorOf(pointer: string): ReturnType<Ajv2020['compile']> {
    let validate = this.validators.get(pointer);
    if (!validate) this.validators.set(pointer, (validate = this.ajv.compile({ $ref: `openapi.json#/${pointer}/content/application~1json/schema` })));
    return validate;
  }

  /** Problems with a real answer as the document describes it; empty when it fits. */
  /**
   * What is wrong with an answer as the document describes its route. `messages`: the answer must
   * also say what an example of its code on its route says (for answers whose wording is known, as
   * those the document's own tests provoke; a fuzzer's refusals are worded by what it broke).
   */
  check(method: string, path: string, status: number, contentType: string, body: unknown, options: { messages?: boolean } = {}): string[] {
    const found = this.responseOf(method, path, status);
    if (!found) return [`${method} ${path}: status ${status} is not documented`];
    // Documented without content (304): the answer has no body, whatever type it names.
    if (found.response.content === undefined) return body === undefined || Object.keys(body as Json).length === 0 ? [] : [`${method} ${path} ${status}: a body where none is documented`];
    const type = contentType.split(';')[0]!.trim();
    const media = (found.response.content as Json | undefined)?.[type] as Json | undefined;
    if (!media) return [`${method} ${path} ${status}: content type ${type} is not documented`];
    const problems: string[] = [];
    if (type === 'application/json') {
      const validate = this.validatorOf(found.pointer);
      if (!validate(body)) problems.push(`${method} ${path} ${status}: ${this.ajv.errorsText(validate.errors)}`);
      const examples = media.examples as Record<string, unknown> | undefined;
      const code = (body as { code?: unknown }).code;
      if (examples && !Object.keys(examples).map((n) => exampleCode(n as ExampleName)).includes(String(code))) {
        problems.push(`${method} ${path} ${status}: code ${String(code)} is not among the documented ${Object.keys(examples).join(', ')}`);
      }
      // An answer says what an example of its code on its route says: the route's own words, not another route's.
      const messages = Object.entries(examples ?? {})
        .filter(([name]) => exampleCode(name as ExampleName) === code)
        .map(([, example]) => (example as { value?: { message?: unknown } }).value?.message);
      const message = (body as { message?: unknown }).message;
      if (options.messages && messages.length > 0 && !messages.includes(message)) problems.push(`${method} ${path} ${status}: message ${JSON.stringify(message)} is none of its examples' ${JSON.stringify(messages)}`);
    }
    return problems;
  }
}

;

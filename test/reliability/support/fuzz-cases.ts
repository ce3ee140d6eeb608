// The hostile requests of the fuzz suites (test/post-lead/fuzz.test.ts in process, with its
// oracle and pollution checks; test/reliability/hostile-input.test.ts against a `leadpost serve`
// process, with its RSS): malformed and hostile bodies, and header abuse — repeated X-API-KEY,
// wrong, conflicting or invalid Content-Length, control bytes, bad names, folded lines, no Host,
// odd Expect, HTTP/1.0, garbage after a request — the last ones written as raw bytes over TLS,
// since a well-behaved HTTP client refuses to send them. One seeded generator, one oracle.

import type { Reply } from '../../support/service.js';
import { CERT_URL, Rng, uniqueLead, withRawMembers } from '../../post-lead/helpers.js';
import { type Client, rawExchange, toReply } from './client.js';

const LIMIT = 64 * 1024;

const LEAD_FIELDS = new Set(['first_name', 'last_name', 'email', 'mobile', 'zip', 'accident_state', 'certificate_url', 'sid', 's1', 'test', 'xxTrustedFormCertUrl']);
const REQUIRED = ['first_name', 'last_name', 'email', 'mobile', 'zip', 'accident_state', 'certificate_url', 'sid'];
const RECORDED = ['SOLD', 'UNSOLD', 'INVALID', 'VERIFICATION_FAILED', 'DUPLICATE'];
/** Names a polluting payload would plant on Object.prototype. */
export const POLLUTION_NAMES = ['polluted', 'isAdmin', 'role', 'then', 'toJSON', 'fuzzPolluted'];
/** What the listeners answer a request that is not valid HTTP/1.1 with: 400 and this code. */
const NOT_HTTP = ['MALFORMED_JSON'];

export interface Case {
  readonly kind: string;
  readonly body: string | Buffer;
  /** Sent as given: content-type and x-api-key included, so a case can leave either out. An array repeats the header. */
  readonly headers: Record<string, string | string[]>;
  /** Outcome codes that are right for this case; when absent the oracle works them out from the body. */
  readonly expect?: readonly string[];
  /** Written as these bytes over TLS instead (`body` and `headers` then only describe it for the oracle). */
  readonly raw?: ReadonlyArray<string | Buffer>;
  /** Write each raw part only once the ones before it are answered (a keep-alive client). */
  readonly afterAnswer?: boolean;
  /** The client half-closes after writing: the server may have no one left to answer. */
  readonly halfClose?: boolean;
  /** Codes of the answers after the first (pipelined requests), in order. */
  readonly then?: ReadonlyArray<readonly string[]>;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * What the contract says the service answers for a body sent with a valid key and a JSON
 * Content-Type: the order is size → JSON object → Idempotency-Key syntax → field rules.
 */
export function oracle(kase: Case): readonly string[] {
  if (kase.expect) return kase.expect;
  // Checked with the Content-Type, before the body is read: a compressed body is not JSON to the service.
  const encoding = String(kase.headers?.['content-encoding'] ?? '').trim().toLowerCase();
  if (encoding !== '' && encoding !== 'identity') return ['UNSUPPORTED_MEDIA_TYPE'];
  const bytes = Buffer.isBuffer(kase.body) ? kase.body : Buffer.from(kase.body, 'utf8');
  if (bytes.length > LIMIT) return ['PAYLOAD_TOO_LARGE'];
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(bytes));
  } catch {
    return ['MALFORMED_JSON'];
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return ['MALFORMED_JSON'];
  const idem = kase.headers['idempotency-key'] as string | undefined;
  // The server sees the value without its surrounding blanks; sent empty, it is a malformed key.
  if (idem !== undefined && !/^[\x21-\x7e]{1,255}$/.test(idem.trim())) return ['IDEMPOTENCY_CONFLICT'];
  const keys = Object.keys(parsed);
  const hasCert = keys.includes('certificate_url') || keys.includes('xxTrustedFormCertUrl');
  if (keys.some((k) => !LEAD_FIELDS.has(k)) || REQUIRED.some((f) => f !== 'certificate_url' && !keys.includes(f)) || !hasCert) return ['INVALID'];
  return RECORDED;
}

// ---------------------------------------------------------------------------------------------
// The generator.

export class Fuzzer {
  constructor(
    private readonly rng: Rng,
    private readonly key: string,
    private readonly buyerKey: string,
  ) {}

  headers(extra: Record<string, string> = {}): Record<string, string | string[]> {
    return { 'content-type': 'application/json', 'x-api-key': this.key, ...extra };
  }

  leadText(overrides: Record<string, unknown> = {}): string {
    return JSON.stringify(uniqueLead(overrides));
  }

  asciiString(min: number, max: number, from = 0x20, to = 0x7e): string {
    const n = this.rng.int(min, max);
    let s = '';
    for (let i = 0; i < n; i++) s += String.fromCharCode(this.rng.int(from, to));
    return s;
  }

  /** A string of awkward characters: controls, surrogates (paired or not), marks, bidi, wide. */
  weirdString(max = 40): string {
    const pool = [
      'a', 'Z', ' ', '.', "'", '-', '@', '\u0000', '\u0007', '\t', '\n', '\u007f', '\u0085', '\u00a0', '\u00e9', 'e\u0301',
      '\u0301', '\u200b', '\u200d', '\u202e', '\u2066', '\u2028', '\ufeff', '\ufffd', '\uffff', '\ud800', '\udfff',
      '\ud83d\ude00', '\ud83d', '李', 'ß', 'İ', 'ǅ', '\\', '"', '/', '<', '>', '%00', '{{', '${x}', '0',
    ];
    const n = this.rng.int(0, max);
    let s = '';
    for (let i = 0; i < n; i++) s += this.rng.pick(pool);
    return s;
  }

  randomValue(depth = 0): unknown {
    switch (this.rng.int(0, depth > 2 ? 5 : 8)) {
      case 0: return null;
      case 1: return this.rng.chance(0.5);
      case 2: return this.rng.pick([0, -0, 1, -1, 42, 1.5, 1e21, -1e-7, Number.MAX_SAFE_INTEGER + 2, 2 ** 53]);
      case 3: return this.asciiString(0, 30);
      case 4: return this.weirdString();
      case 5: return '';
      case 6: return Array.from({ length: this.rng.int(0, 5) }, () => this.randomValue(depth + 1));
      case 7: return Object.fromEntries(Array.from({ length: this.rng.int(0, 4) }, () => [this.asciiString(1, 8), this.randomValue(depth + 1)]));
      default: return { nested: this.randomValue(depth + 1) };
    }
  }

  // --- the case kinds ---------------------------------------------------------------------

  truncated(): Case {
    const text = this.leadText();
    return { kind: 'truncated-json', body: text.slice(0, this.rng.int(0, text.length - 1)), headers: this.headers() };
  }

  invalidJson(): Case {
    const lead = this.leadText();
    const templates = [
      () => "{'first_name':'Ada'}",
      () => '{first_name:"Ada"}',
      () => lead.slice(0, -1) + ',}',
      () => lead + '}',
      () => lead + ' trailing',
      () => lead + lead,
      () => lead.replace(':', '::'),
      () => lead.replace('"zip":"90210"', '"zip":NaN'),
      () => lead.replace('"zip":"90210"', '"zip":Infinity'),
      () => lead.replace('"zip":"90210"', '"zip":-Infinity'),
      () => lead.replace('"zip":"90210"', '"zip":undefined'),
      () => lead.replace('"zip":"90210"', '"zip":0x10'),
      () => lead.replace('"zip":"90210"', '"zip":0123'),
      () => lead.replace('"zip":"90210"', '"zip":.5'),
      () => lead.replace('"zip":"90210"', '"zip":+1'),
      () => lead.replace('"zip":"90210"', '"zip":"\\x41"'),
      () => lead.replace('"zip":"90210"', '"zip":"\\u12"'),
      () => lead.replace('"zip":"90210"', '"zip":"902\n10"'),
      () => lead.replace('"zip":"90210"', '"zip":"902\u000010"'),
      () => '// comment\n' + lead,
      () => lead.replace(',', ' /* c */ ,'),
      () => 'NaN',
      () => 'undefined',
      () => '{"a":1',
      () => '{"a"}',
      () => '{,}',
      () => '{"a":1,,"b":2}',
      () => '\u0000' + lead,
      () => lead.replace(/"/g, "'"),
      () => this.asciiString(1, 200, 0x21, 0x7e),
      () => '{'.repeat(this.rng.int(1, 5000)),
      () => ']'.repeat(this.rng.int(1, 100)),
    ];
    return { kind: 'invalid-json', body: this.rng.pick(templates)(), headers: this.headers() };
  }

  nonObject(): Case {
    const bodies = ['[]', '[1,2,3]', `[${this.leadText()}]`, '"a string"', JSON.stringify(this.leadText()), '0', '-0', '123', '1e400', '-1e400',
      '3.14', 'null', 'true', 'false', ' null ', '[[[]]]', '""', '"\\ud800"'];
    return { kind: 'non-object-json', body: this.rng.pick(bodies), headers: this.headers() };
  }

  deep(depth = this.rng.int(500, 10_000)): Case {
    const shape = this.rng.int(0, 5);
    let body: string;
    switch (shape) {
      case 0: body = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth); break;
      case 1: body = '['.repeat(depth) + ']'.repeat(depth); break;
      case 2: body = this.leadText().slice(0, -1) + ',"first_name":' + '['.repeat(depth) + ']'.repeat(depth) + '}'; break;
      case 3: body = this.leadText().slice(0, -1) + ',"deep":' + '{"a":['.repeat(depth) + ']}'.repeat(depth) + '}'; break;
      case 4: body = '{"a":'.repeat(depth) + '1' + '}'.repeat(depth - 1); break; // one brace short
      default: body = withRawMembers(uniqueLead(), '"s1":' + '{"__proto__":'.repeat(depth) + '{"polluted":1}' + '}'.repeat(depth));
    }
    return { kind: `deep-${['objects', 'arrays', 'in-field', 'in-unknown-field', 'unbalanced', 'proto-chain'][shape]}`, body, headers: this.headers() };
  }

  /** A lead padded to exactly `size` bytes through one string member. */
  sized(size = this.pickSize()): Case {
    const field = this.rng.pick(['s1', 'first_name', 'padding', 'email']);
    const unit = this.rng.pick(['x', 'é', '😀', '\\u0000', ' ']);
    const lead = uniqueLead({ [field]: '' });
    const skeleton = JSON.stringify(lead);
    const room = Math.max(0, size - Buffer.byteLength(skeleton));
    const unitBytes = unit === '\\u0000' ? 6 : Buffer.byteLength(unit);
    const units = Math.floor(room / unitBytes);
    const filler = (unit === '\\u0000' ? '\\u0000' : unit).repeat(units) + 'x'.repeat(room - units * unitBytes);
    const body = skeleton.replace(`"${field}":""`, `"${field}":"${filler}"`);
    return { kind: `huge-string-${Buffer.byteLength(body) > LIMIT ? 'over' : 'under'}-limit`, body, headers: this.headers() };
  }

  private pickSize(): number {
    return this.rng.pick([
      LIMIT, LIMIT + 1, LIMIT - 1, LIMIT + this.rng.int(2, 64), LIMIT - this.rng.int(2, 64),
      this.rng.int(1024, LIMIT), this.rng.int(LIMIT, 4 * LIMIT), 16 * LIMIT,
    ]);
  }

  unicode(): Case {
    const field = this.rng.pick(['first_name', 'last_name', 'email', 's1', 'sid', 'mobile', 'accident_state']);
    const lead = this.leadText();
    const variants: Array<() => string | Buffer> = [
      () => withRawMembers(uniqueLead(), `"${field}":"\\ud800"`),
      () => withRawMembers(uniqueLead(), `"${field}":"Ada\\udc00"`),
      () => withRawMembers(uniqueLead(), `"${field}":"\\ud800\\ud800"`),
      () => withRawMembers(uniqueLead(), '"\\ud800":1'),
      () => withRawMembers(uniqueLead(), `"${field}":"Ada\\u0000Lovelace"`),
      () => withRawMembers(uniqueLead(), `"${field}":"\\u202eecalevoL"`),
      () => withRawMembers(uniqueLead(), `"${field}":"\\ufeffAda"`),
      () => withRawMembers(uniqueLead(), `"${field}":"\\uffff"`),
      () => withRawMembers(uniqueLead(), `"${field}":${JSON.stringify(this.weirdString(60))}`),
      () => '\ufeff' + lead,
      () => '\ufeff\ufeff' + lead,
      () => ' \ufeff' + lead,
      () => Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(lead, 'utf16le')]),
      () => Buffer.from(lead, 'utf16le'),
      () => Buffer.from(lead, 'latin1'),
      () => lead.replace('"Ada"', '"Ad\u0000a"'),
      () => lead.replace('"Ada"', '"\u2028Ada"'),
      () => lead.replace('"Ada"', '"Jos\u00e9"'),
      () => Buffer.concat([Buffer.from(lead.slice(0, 15)), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from(lead.slice(15))]), // CESU-8 surrogate
      () => Buffer.concat([Buffer.from(lead.slice(0, 15)), Buffer.from([0xc0, 0xaf]), Buffer.from(lead.slice(15))]), // overlong '/'
      () => Buffer.concat([Buffer.from(lead.slice(0, 15)), Buffer.from([0xf8, 0x88, 0x80, 0x80, 0x80]), Buffer.from(lead.slice(15))]),
      () => Buffer.concat([Buffer.from(lead.slice(0, -2)), Buffer.from([0xe2, 0x82]), Buffer.from('"}')]), // truncated sequence
      () => Buffer.concat([Buffer.from(lead), Buffer.from([0xff])]),
    ];
    return { kind: 'unicode-edge', body: this.rng.pick(variants)(), headers: this.headers() };
  }

  invalidUtf8(): Case {
    const bytes = Buffer.from(this.leadText(), 'utf8');
    if (this.rng.chance(0.2)) {
      const random = Buffer.alloc(this.rng.int(1, 512));
      for (let i = 0; i < random.length; i++) random[i] = this.rng.int(0, 255);
      return { kind: 'random-bytes', body: random, headers: this.headers() };
    }
    for (let n = this.rng.int(1, 3); n > 0; n--) bytes[this.rng.int(0, bytes.length - 1)] = this.rng.int(0x80, 0xff);
    return { kind: 'invalid-utf8', body: bytes, headers: this.headers() };
  }

  pollution(): Case {
    const name = this.rng.pick(POLLUTION_NAMES);
    const payload = `{"${name}":${this.rng.pick(['true', '"yes"', '1', '{"x":1}', 'null'])}}`;
    const key = this.rng.pick(['__proto__', 'constructor', 'prototype', '__defineGetter__', '__defineSetter__']);
    const member = key === 'constructor' ? `"constructor":{"prototype":${payload}}` : `"${key}":${payload}`;
    const members = [
      () => member,
      () => `"s1":{${member}}`,
      () => `"extra":[{${member}},{${member}}]`,
      () => `"extra":{"a":{"b":{${member}}}}`,
      () => `"__proto__":{"__proto__":${payload}}`,
      () => `"__proto__":null`,
      () => `"__proto__":"string"`,
      () => `"__proto__":[${payload}]`,
      () => `${member},${member}`,
    ];
    const chosen = this.rng.pick(members)();
    const body = this.rng.chance(0.2) ? `{${chosen}}` : withRawMembers(uniqueLead(), chosen);
    return { kind: 'prototype-pollution', body, headers: this.headers() };
  }

  numbers(): Case {
    const text = this.rng.pick(['1e400', '-1e400', '-0', '1e-400', '0.1e1', '123456789012345678901234567890', '-0.0', '1E+2', '5e-324', '1.7976931348623157e308']);
    const field = this.rng.pick(['test', 's1', 'zip', 'mobile', 'number_field']);
    return { kind: 'numbers', body: withRawMembers(uniqueLead(), `"${field}":${text}`), headers: this.headers() };
  }

  duplicateKeys(): Case {
    const field = this.rng.pick(['first_name', 'email', 'mobile', 'zip', 'test', 'certificate_url', 'sid', 's1']);
    const value = this.rng.pick([JSON.stringify(this.randomValue()), '"Grace"', '"also-valid-looking"', 'null']);
    const before = this.rng.chance(0.5);
    const lead = this.leadText();
    const body = before ? `{"${field}":${value},${lead.slice(1)}` : withRawMembers(JSON.parse(lead) as Record<string, unknown>, `"${field}":${value}`);
    return { kind: 'duplicate-keys', body, headers: this.headers() };
  }

  mutation(): Case {
    const lead = uniqueLead(this.rng.chance(0.2) ? { test: this.rng.chance(0.5) } : {});
    const ops = this.rng.int(0, 4);
    const fields = [...Object.keys(lead), 'test', 'xxTrustedFormCertUrl'];
    for (let i = 0; i < ops; i++) {
      const field = this.rng.pick(fields);
      switch (this.rng.int(0, 8)) {
        case 0: lead[field] = this.randomValue(); break; // flip the type
        case 1: delete lead[field]; break;
        case 2: lead[this.rng.pick([this.asciiString(0, 12), 'FIRST_NAME', 'first_name ', ' email', '', 'x'.repeat(200), '\u0000', 'hasOwnProperty', 'toString', 'valueOf', '__defineGetter__', '__defineSetter__', '__lookupGetter__'])] = this.randomValue(); break;
        case 3: lead[field] = Array.from({ length: this.rng.int(1000, 20_000) }, () => 0); break; // giant array
        case 4: lead[field] = this.weirdString(80); break;
        case 5: lead[field] = 'x'.repeat(this.rng.pick([0, 1, 49, 50, 51, 64, 65, 254, 255, 256, 2048, 2049, 40_000])); break;
        case 6: if (typeof lead[field] === 'string') lead[field] = ` ${(lead[field] as string).toUpperCase()}\t`; break;
        case 7: lead.xxTrustedFormCertUrl = this.rng.pick([CERT_URL, `${CERT_URL}0`, 'https://ping.trustedform.com/' + 'a'.repeat(40), this.randomValue()]); break;
        default: break; // left valid
      }
    }
    return { kind: ops === 0 ? 'valid-lead' : 'mutated-lead', body: JSON.stringify(lead), headers: this.headers() };
  }

  contentType(): Case {
    const body = this.leadText();
    const refused = ['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1',
      'application/json; charset=utf-16', 'application/jsonp', 'application/*', '*/*', 'json', 'application/json-patch+json',
      'application/ld+json', 'text/json', 'application/json, text/plain', 'application/x-json', ''];
    const accepted = ['application/json', 'APPLICATION/JSON', 'application/json; charset=utf-8', 'application/json;charset="UTF-8"', 'Application/Json ; Charset=UTF8'];
    if (this.rng.chance(0.15)) {
      const headers = this.headers();
      delete headers['content-type'];
      return { kind: 'content-type-missing', body, headers, expect: ['UNSUPPORTED_MEDIA_TYPE'] };
    }
    if (this.rng.chance(0.6)) {
      return { kind: 'content-type-wrong', body: this.rng.chance(0.5) ? body : '{bad', headers: this.headers({ 'content-type': this.rng.pick(refused) }), expect: ['UNSUPPORTED_MEDIA_TYPE'] };
    }
    return { kind: 'content-type-json-variant', body, headers: this.headers({ 'content-type': this.rng.pick(accepted) }) };
  }

  empty(): Case {
    return { kind: 'empty-body', body: this.rng.pick(['', ' ', '\n', '\t\r\n ', '\ufeff']), headers: this.headers() };
  }

  headerFuzz(): Case {
    const body = this.rng.chance(0.8) ? this.leadText() : this.rng.pick(['{bad', '[]', '{}']);
    switch (this.rng.int(0, 9)) {
      case 0: {
        const traceId = Array.from({ length: 32 }, () => '0123456789abcdef'[this.rng.int(0, 15)]).join('');
        return { kind: 'traceparent-valid', body, headers: this.headers({ traceparent: `00-${traceId}-${'1'.repeat(15)}a-01` }) };
      }
      case 1: {
        const bad = this.rng.pick([`00-${'A'.repeat(32)}-${'b'.repeat(16)}-01`, `00-${'0'.repeat(32)}-${'b'.repeat(16)}-01`, `ff-${'a'.repeat(32)}-${'b'.repeat(16)}-01`,
          `00-${'a'.repeat(31)}-${'b'.repeat(16)}-01`, 'garbage', `00-${'a'.repeat(32)}-${'0'.repeat(16)}-01`, this.asciiString(0, 100, 0x21, 0x7e)]);
        return { kind: 'traceparent-invalid', body, headers: this.headers({ traceparent: bad }) };
      }
      case 2:
        return { kind: 'idempotency-key-valid', body, headers: this.headers({ 'idempotency-key': `fuzz-${this.rng.int(0, 2 ** 30)}-${this.asciiString(1, 40, 0x21, 0x7e)}` }) };
      case 3:
        return { kind: 'idempotency-key-invalid', body, headers: this.headers({ 'idempotency-key': this.rng.pick(['a b', 'x'.repeat(256), 'clé', `k\u00ff${this.rng.int(0, 1e9)}`]) }) };
      case 4: {
        const headers = this.headers();
        if (this.rng.chance(0.5)) delete headers['x-api-key'];
        else headers['x-api-key'] = this.rng.pick(['garbage', '', this.key.toUpperCase(), `${this.key}x`, this.key.slice(0, -1), `lp_${'a'.repeat(12)}_${'b'.repeat(43)}`, `Bearer ${this.key}`]);
        return { kind: 'api-key-wrong', body, headers, expect: ['UNAUTHORIZED'] };
      }
      case 5:
        return { kind: 'api-key-buyer-role', body, headers: this.headers({ 'x-api-key': this.buyerKey }), expect: ['FORBIDDEN'] };
      case 6:
        return { kind: 'header-too-large', body, headers: this.headers({ 'x-filler': 'f'.repeat(this.rng.int(17 * 1024, 40 * 1024)) }), expect: ['PAYLOAD_TOO_LARGE'] };
      case 7: {
        const junk = Object.fromEntries(Array.from({ length: this.rng.int(1, 30) }, (_, i) => [`x-junk-${i}`, this.asciiString(0, 200)]));
        return { kind: 'junk-headers', body, headers: { ...junk, ...this.headers() } };
      }
      case 8:
        return { kind: 'content-encoding', body, headers: this.headers({ 'content-encoding': this.rng.pick(['gzip', 'br', 'identity', 'x-unknown']) }) };
      default:
        return { kind: 'chunked', body, headers: this.headers({ 'transfer-encoding': 'chunked' }) };
    }
  }

  /**
   * A request as raw bytes: the request line, `lines` (Host, Connection: close, Content-Type and
   * the key unless `bare`), then the body. Connection: close makes the server end the exchange.
   */
  private raw(kind: string, lines: string[], body: string | Buffer, extra: Partial<Case> & { bare?: boolean; requestLine?: string } = {}): Case {
    const { bare, requestLine, ...rest } = extra;
    const base = bare ? [] : ['Host: fuzz', 'Connection: close', 'Content-Type: application/json', `X-API-KEY: ${this.key}`];
    const head = Buffer.from([requestLine ?? 'POST /functions/leads HTTP/1.1', ...base, ...lines].join('\r\n') + '\r\n\r\n', 'latin1');
    return { kind, body, headers: this.headers(), raw: [Buffer.concat([head, Buffer.isBuffer(body) ? body : Buffer.from(body, 'utf8')])], ...rest };
  }

  /** Header abuse: what a client may send, and what only raw bytes can carry. */
  headerAbuse(choice = this.rng.int(0, 13)): Case {
    const lead = this.leadText();
    const length = Buffer.byteLength(lead);
    switch (choice) {
      case 0: {
        const values = this.rng.pick([[this.key, this.key], [this.key, 'lp_other'], ['lp_other', this.key], [this.key, '']]);
        return { kind: 'api-key-repeated', body: lead, headers: { ...this.headers(), 'x-api-key': values }, expect: ['UNAUTHORIZED'] };
      }
      case 1: {
        // Past Node's default of 1,000 header lines, which it would drop without a word (a second
        // key among them): every line is kept, the 16 KiB of the headers their only bound (1,200
        // of these lines stay under it; past it is the 431 case below).
        const count = this.rng.pick([this.rng.int(100, 900), this.rng.int(1000, 1200)]);
        const many = Object.fromEntries(Array.from({ length: count }, (_, i) => [`x-h${i}`, String(i % 10)]));
        const headers = { ...this.headers(), ...many };
        return { kind: count < 1000 ? 'many-headers' : 'over-1000-headers', body: lead, headers };
      }
      case 2: {
        // The body is cut where the declared length ends: never a whole JSON object.
        const declared = this.rng.int(0, length - 1);
        return this.raw('content-length-short', [`Content-Length: ${declared}`], lead, { expect: ['MALFORMED_JSON'] });
      }
      case 3:
        // More declared than sent, then the client hangs up: no one may be left to answer.
        return this.raw('content-length-long', [`Content-Length: ${length + this.rng.int(1, 1000)}`], lead, { expect: ['MALFORMED_JSON'], halfClose: true });
      case 4: {
        const value = this.rng.pick(['-1', 'abc', '1e3', '0x10', `${length}.0`, `+${length}`, '', `${length} ${length}`, `${length}, ${length}`]);
        return this.raw('content-length-invalid', [`Content-Length: ${value}`], lead, { expect: NOT_HTTP });
      }
      case 5: {
        const lines = this.rng.pick([
          [`Content-Length: ${length}`, `Content-Length: ${length + 1}`],
          [`Content-Length: ${length}`, `Content-Length: ${length}`],
          [`Content-Length: ${length}`, 'Transfer-Encoding: chunked'],
          ['Transfer-Encoding: chunked', `Content-Length: ${length}`],
        ]);
        return this.raw('content-length-conflicting', lines, lead, { expect: NOT_HTTP });
      }
      case 6: {
        const byte = this.rng.pick(['\x00', '\x01', '\x1b', '\x7f']);
        return this.raw('header-control-byte', [`Content-Length: ${length}`, `X-Bad: a${byte}b`], lead, { expect: NOT_HTTP });
      }
      case 7: {
        const line = this.rng.pick(['X Bad: 1', 'X-Bad\x00: 1', ': novalue', 'X-Bad : 1', 'novalue', 'X-Fold: a\r\n  folded']);
        return this.raw('header-malformed', [`Content-Length: ${length}`, line], lead, { expect: NOT_HTTP });
      }
      case 8:
        return this.raw('no-host', ['Connection: close', 'Content-Type: application/json', `X-API-KEY: ${this.key}`, `Content-Length: ${length}`], lead, { bare: true, expect: NOT_HTTP });
      case 9:
        // HTTP/1.0 needs no Host: served like any request.
        return this.raw('http-1.0', ['Content-Type: application/json', `X-API-KEY: ${this.key}`, `Content-Length: ${length}`], lead, { bare: true, requestLine: 'POST /functions/leads HTTP/1.0' });
      case 10: {
        const expectation = this.rng.pick(['100-continue', 'teapot', '200-ok', '100-continue, x']);
        return this.raw('expect', [`Content-Length: ${length}`, `Expect: ${expectation}`], lead);
      }
      case 11: {
        const encoding = this.rng.pick(['chunked, chunked', 'identity', 'chunked;x', 'xchunked']);
        return this.raw('transfer-encoding-invalid', [`Transfer-Encoding: ${encoding}`], `${length.toString(16)}\r\n${lead}\r\n0\r\n\r\n`, { expect: NOT_HTTP });
      }
      case 12: {
        // A keep-alive request, answered, then garbage on the same connection: a second envelope.
        const head = `POST /functions/leads HTTP/1.1\r\nHost: fuzz\r\nContent-Type: application/json\r\nX-API-KEY: ${this.key}\r\nContent-Length: ${length}\r\n\r\n`;
        const garbage = this.rng.pick(['GARBAGE\r\n\r\n', '\x00\x01\x02\r\n\r\n', 'GET / HTTP/9.9\r\n\r\n', `${lead}\r\n\r\n`]);
        // The garbage goes once the lead is answered, however long that takes on a busy machine.
        return { kind: 'garbage-after-request', body: lead, headers: this.headers(), raw: [head + lead, garbage], afterAnswer: true, then: [NOT_HTTP] };
      }
      default:
        return this.raw('url-too-long', [], '', { bare: true, requestLine: `GET /functions/leads/${'1'.repeat(this.rng.int(17_000, 40_000))} HTTP/1.1`, expect: ['PAYLOAD_TOO_LARGE'] });
    }
  }

  /** One random case: the weights favour the kinds with the most variety. */
  next(): Case {
    const roll = this.rng.int(0, 99);
    let kase: Case;
    if (roll < 7) kase = this.truncated();
    else if (roll < 15) kase = this.invalidJson();
    else if (roll < 20) kase = this.nonObject();
    else if (roll < 25) kase = this.deep();
    else if (roll < 31) kase = this.sized();
    else if (roll < 39) kase = this.unicode();
    else if (roll < 44) kase = this.invalidUtf8();
    else if (roll < 52) kase = this.pollution();
    else if (roll < 56) kase = this.numbers();
    else if (roll < 61) kase = this.duplicateKeys();
    else if (roll < 76) kase = this.mutation();
    else if (roll < 81) kase = this.headerAbuse();
    else if (roll < 86) kase = this.contentType();
    else if (roll < 88) kase = this.empty();
    else kase = this.headerFuzz();
    // Some bodies of every kind go chunked, so the streaming size check is fuzzed too.
    if (!kase.raw && !kase.headers['transfer-encoding'] && this.rng.chance(0.1)) kase = { ...kase, headers: { ...kase.headers, 'transfer-encoding': 'chunked' } };
    return kase;
  }

  /** Cases every seed includes, so each edge is hit at least once whatever the draw. */
  fixed(): Case[] {
    const h = () => this.headers();
    const lead = () => this.leadText();
    return [
      { kind: 'deep-objects-10000', body: '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000), headers: h() },
      { kind: 'deep-arrays-10000', body: '['.repeat(10_000) + ']'.repeat(10_000), headers: h() },
      { kind: 'deep-in-field-10000', body: lead().slice(0, -1) + ',"extra":' + '['.repeat(10_000) + ']'.repeat(10_000) + '}', headers: h() },
      this.sized(LIMIT),
      this.sized(LIMIT + 1),
      this.sized(LIMIT - 1),
      { ...this.sized(LIMIT + 1), headers: this.headers({ 'transfer-encoding': 'chunked' }) },
      this.sized(10 * LIMIT),
      { kind: 'empty-body', body: '', headers: h() },
      { kind: 'empty-body-chunked', body: '', headers: this.headers({ 'transfer-encoding': 'chunked' }) },
      ...['[]', '"s"', '1', 'null', 'true', 'false', '1e400', '-0'].map((body) => ({ kind: 'non-object-json', body, headers: h() })),
      { kind: 'nan-text', body: 'NaN', headers: h() },
      { kind: 'lone-surrogate', body: withRawMembers(uniqueLead(), '"s1":"\\ud800"'), headers: h() },
      { kind: 'lone-surrogate-key', body: withRawMembers(uniqueLead(), '"\\udfff":"x"'), headers: h() },
      { kind: 'bom-start', body: '\ufeff' + lead(), headers: h() },
      { kind: 'nul-in-value', body: withRawMembers(uniqueLead(), '"s1":"a\\u0000b"'), headers: h() },
      { kind: 'raw-nul', body: lead().replace('"Ada"', '"A\u0000da"'), headers: h() },
      { kind: 'rtl-override', body: this.leadText({ first_name: '\u202eadA' }), headers: h() },
      { kind: 'invalid-utf8', body: Buffer.concat([Buffer.from('{"first_name":"'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]), headers: h() },
      ...['__proto__', 'prototype'].map((key) => ({ kind: 'prototype-pollution', body: withRawMembers(uniqueLead(), `"${key}":{"polluted":true,"isAdmin":true}`), headers: h() })),
      { kind: 'prototype-pollution', body: withRawMembers(uniqueLead(), '"constructor":{"prototype":{"polluted":true,"then":1}}'), headers: h() },
      { kind: 'prototype-pollution', body: withRawMembers(uniqueLead(), '"s1":{"__proto__":{"polluted":true}}', '"extra":[{"constructor":{"prototype":{"role":"admin"}}}]'), headers: h() },
      ...['__proto__', '__defineGetter__', '__defineSetter__', 'constructor', 'toString', 'valueOf'].map((name) => ({
        kind: 'inherited-name-string',
        body: withRawMembers(uniqueLead(), `"${name}":"x"`),
        headers: h(),
      })),
      { kind: 'inherited-name-string', body: '{"__proto__":"x"}', headers: h() },
      { kind: 'numbers', body: withRawMembers(uniqueLead(), '"test":1e400'), headers: h() },
      { kind: 'duplicate-keys', body: withRawMembers(uniqueLead(), '"first_name":"Grace"'), headers: h() },
      { kind: 'giant-array', body: this.leadText({ s1: Array.from({ length: 30_000 }, () => 0) }), headers: h() },
      { kind: 'content-type-missing', body: lead(), headers: { 'x-api-key': this.key }, expect: ['UNSUPPORTED_MEDIA_TYPE'] },
      { kind: 'content-type-wrong', body: lead(), headers: this.headers({ 'content-type': 'text/plain' }), expect: ['UNSUPPORTED_MEDIA_TYPE'] },
      { kind: 'valid-lead', body: lead(), headers: h() },
      // Every kind of header abuse at least once.
      ...Array.from({ length: 14 }, (_, choice) => this.headerAbuse(choice)),
    ];
  }
}

// ---------------------------------------------------------------------------------------------

export interface Sent {
  /** The answer to the case's request (interim 1xx answers skipped); absent when none came. */
  readonly reply?: Reply;
  /** Answers after the first on the same connection (pipelined requests). */
  readonly more: Reply[];
  /** Why no answer came, when one was due. */
  readonly error?: string;
}

/** Sends one case to the HTTPS port: through the client, or as its raw bytes. */
export async function sendCase(port: number, client: Client, kase: Case): Promise<Sent> {
  if (!kase.raw) {
    try {
      return { reply: await client.request(port, 'POST', '/functions/leads', kase.headers, kase.body), more: [] };
    } catch (error) {
      return { more: [], error: `${(error as NodeJS.ErrnoException).code ?? ''} ${(error as Error).message}` };
    }
  }
  const exchange = await rawExchange(port, kase.raw, { timeoutMs: 15_000, end: kase.halfClose, ...(kase.afterAnswer ? { afterAnswer: true } : {}) });
  const [reply, ...more] = exchange.responses.filter((r) => r.status >= 200).map((r) => toReply(r.status, r.headers, r.text));
  const error = !reply && !kase.halfClose ? `no answer (${exchange.closedByServer ? 'closed by the server' : 'timed out'}) ${JSON.stringify(exchange.trailing.slice(0, 100))}` : undefined;
  return { ...(reply ? { reply } : {}), more, ...(error ? { error } : {}) };
}

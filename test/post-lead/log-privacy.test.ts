// PII and secrets never reach the logs: leads with distinctive names, e-mails,
// mobiles and ZIPs go through every outcome (sold, invalid, duplicate, verification failed, test)
// and through the refusals that happen before a lead exists (wrong key, wrong role, bad JSON, wrong
// Content-Type, oversized body, PII in the URL, plain HTTP, malformed HTTP); then every captured log
// line is scanned for each of them in every form, and for the keys' text and secrets.

import { connect } from 'node:tls';
import { expect } from 'chai';
import { TestService, type Reply } from '../support/service.js';
import { CERT_URL } from './helpers.js';

interface Sent {
  readonly label: string;
  readonly reply: Reply;
  readonly expect: string;
}

interface Person {
  readonly first_name: string;
  readonly last_name: string;
  readonly email: string;
  /** As sent, and what it normalises to. */
  readonly mobile: string;
  readonly e164: string;
  readonly zip: string;
}

const people: Person[] = [
  { first_name: 'Zyxwvutsrq', last_name: 'Qponmlkjih', email: 'PII.Canary.1@Example.com', mobile: '(213) 467-2291', e164: '+12134672291', zip: '99950' },
  { first_name: 'Xanthippeq', last_name: 'Wyzzlethorp', email: 'pii.canary.2@example.com', mobile: '213.467.2292', e164: '+12134672292', zip: '99951-4821' },
  { first_name: 'Quibblewort', last_name: 'Snorkelvane', email: 'pii.canary.3@no-mx.example.com', mobile: '+1 213 467 2293', e164: '+12134672293', zip: '99952' },
  { first_name: 'Jorvikastle', last_name: 'Mumblecrust', email: 'pii.canary.4@mailinator.com', mobile: '2134672294', e164: '+12134672294', zip: '99953' },
  { first_name: 'Brindlequap', last_name: 'Fennimorex', email: 'pii.canary.5@example.com', mobile: '+1 888 467 2296', e164: '+18884672296', zip: '99954' },
  { first_name: 'Glimmerwick', last_name: 'Hobbledorn', email: 'pii.canary.6@example.com', mobile: '213-467-2297', e164: '+12134672297', zip: '99955' },
  { first_name: 'Tarragonix', last_name: 'Wobblecott', email: 'pii.canary.7@example.com', mobile: '213 467 2298', e164: '+12134672298', zip: '99956' },
  { first_name: 'Yarrowmeld', last_name: 'Crumpetfen', email: 'pii.canary.8@example.com', mobile: '(213)467-2299', e164: '+12134672299', zip: '99957' },
];

const leadOf = (p: Person, overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  first_name: p.first_name,
  last_name: p.last_name,
  email: p.email,
  mobile: p.mobile,
  zip: p.zip,
  accident_state: 'CA',
  certificate_url: CERT_URL,
  sid: 'privacy-src',
  ...overrides,
});

/** Every form of a person's data that would count as a leak. */
function needles(p: Person): string[] {
  const national = p.e164.slice(2);
  return [
    p.first_name, p.last_name, `${p.first_name} ${p.last_name}`,
    p.email, p.email.toLowerCase(), encodeURIComponent(p.email), encodeURIComponent(p.email.toLowerCase()),
    p.mobile, encodeURIComponent(p.mobile), p.e164, encodeURIComponent(p.e164), national,
    `${national.slice(0, 3)}-${national.slice(3, 6)}-${national.slice(6)}`, `(${national.slice(0, 3)}) ${national.slice(3, 6)}-${national.slice(6)}`,
  ];
}

/** The key text and its secret part (`lp_<12-char id>_<secret>`). */
const keyNeedles = (key: string): string[] => [key, key.slice('lp_'.length + 12 + 1)];

describe('post-lead: no PII or key material in the logs', function () {
  this.timeout(60_000);
  let svc: TestService;
  let key: string;
  let buyerKey: string;
  const wrongKey = `lp_${'w0ngk3yid000'}_${'WrongKeySecretCanary_'.repeat(3).slice(0, 43)}`;
  const sent: Sent[] = [];
  const rawTraceIds: string[] = [];

  before(async () => {
    svc = await TestService.start();
    key = await svc.key();
    buyerKey = await svc.key('buyer', 'acme-law');
    const auth = { 'x-api-key': key };
    const post = async (label: string, expectCode: string, body: unknown, headers: Record<string, string> = auth, path?: string) => {
      sent.push({ label, expect: expectCode, reply: await svc.post(body, headers, path) });
    };
    const [a, b, c, d, e, f, g, h] = people as [Person, Person, Person, Person, Person, Person, Person, Person];

    await post('sold', 'SOLD', leadOf(a, { s1: 'privacy-click' }), { ...auth, 'idempotency-key': 'privacy-idem-1' });
    await post('invalid: another field bad', 'INVALID', leadOf(b, { zip: 'ABCDE' }));
    await post('invalid: the PII fields themselves bad', 'INVALID', leadOf(b, {
      first_name: `${b.first_name}9`, last_name: `${b.last_name}😀`, email: `${b.email}@`, mobile: `${b.mobile}123456789`,
    }));
    await post('duplicate of the sold lead (mobile in another form)', 'DUPLICATE', leadOf(a, { email: 'pii.canary.1b@example.com', mobile: a.e164 }));
    await post('verification failed: no MX', 'VERIFICATION_FAILED', leadOf(c));
    await post('verification failed: disposable domain', 'VERIFICATION_FAILED', leadOf(d));
    await post('verification failed: toll-free mobile', 'VERIFICATION_FAILED', leadOf(e));
    await post('test lead', 'SOLD', leadOf(f, { test: true }));
    await post('wrong key', 'UNAUTHORIZED', leadOf(g), { 'x-api-key': wrongKey });
    await post('buyer key', 'FORBIDDEN', leadOf(g), { 'x-api-key': buyerKey });
    await post('malformed JSON carrying PII', 'MALFORMED_JSON', `${JSON.stringify(leadOf(g))}}`);
    await post('wrong Content-Type', 'UNSUPPORTED_MEDIA_TYPE', leadOf(g), { ...auth, 'content-type': 'text/plain' });
    await post('oversized body', 'PAYLOAD_TOO_LARGE', leadOf(g, { s1: `${g.email} `.repeat(3000) }));
    const query = `?email=${encodeURIComponent(h.email)}&mobile=${encodeURIComponent(h.mobile)}&name=${h.first_name}`;
    await post('PII in the query string', 'SOLD', leadOf(h), auth, `/functions/leads${query}`);
    await post('PII in an unknown path', 'NOT_FOUND', leadOf(h), auth, `/functions/${h.last_name}/${encodeURIComponent(h.email)}${query}`);
    await post('PII in headers', 'DUPLICATE', leadOf(h), { ...auth, 'user-agent': `${h.first_name} ${h.email}`, 'x-consumer-mobile': h.mobile });
    sent.push({ label: 'plain HTTP with PII in the URL', expect: 'HTTPS_REQUIRED', reply: await svc.plainHttp('POST', `/functions/leads${query}`) });
    rawTraceIds.push(await malformedHttp(`POST /functions/leads${query} HTTP/1.1\r\nHost: x\r\nX-API-KEY: ${key}\r\nX-Email: ${h.email}\r\nnot a header line\r\n\r\n`));
  });

  after(async () => {
    await svc?.stop();
  });

  /** Writes raw bytes over TLS and returns the trace id of the envelope the server answers with. */
  function malformedHttp(request: string): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port: svc.port, rejectUnauthorized: false }, () => socket.end(request));
      const chunks: Buffer[] = [];
      socket.on('data', (chunk: Buffer) => chunks.push(chunk));
      socket.on('error', reject);
      socket.on('close', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const body = text.slice(text.indexOf('\r\n\r\n') + 4);
        try {
          resolve(String((JSON.parse(body) as { trace_id: unknown }).trace_id));
        } catch {
          reject(new Error(`no envelope in the answer to a malformed request: ${JSON.stringify(text.slice(0, 300))}`));
        }
      });
    });
  }

  /** Log lines with the random tokens (trace ids, uuids, key ids) blanked, so short needles cannot match them by chance. */
  const scrubbed = () => svc.logs.map((line) => line.replace(/[0-9a-f]{16,}|[0-9a-f-]{36}|"key_id":"[0-9a-z]+"/g, '#'));

  it('the requests took the paths the scan is meant to cover', () => {
    expect(sent.map((s) => `${s.label}: ${String(s.reply.body.code)}`)).to.deep.equal(sent.map((s) => `${s.label}: ${s.expect}`));
    expect(rawTraceIds[0]).to.match(/^[0-9a-f]{32}$/);
  });

  it('the logs hold the request log of every request (by trace id), so the scan reads real request logs', () => {
    const text = svc.logs.join('');
    for (const { label, reply } of sent) {
      expect(String(reply.body.trace_id), label).to.match(/^[0-9a-f]{32}$/);
      expect(text, `trace id of "${label}" in the logs`).to.include(String(reply.body.trace_id));
    }
    for (const traceId of rawTraceIds) expect(text, 'trace id of the malformed HTTP request').to.include(traceId);
    expect(svc.logs.filter((line) => line.includes('"request"')).length).to.be.at.least(sent.length - 1);
  });

  it('no log line holds a name, e-mail or mobile (as sent, E.164 or national) of any lead', () => {
    const lines = svc.logs.map((line) => line.toLowerCase());
    const leaks: string[] = [];
    for (const person of people) {
      for (const needle of needles(person)) {
        const found = lines.find((line) => line.includes(needle.toLowerCase()));
        if (found) leaks.push(`${JSON.stringify(needle)} in ${found.slice(0, 300)}`);
      }
    }
    for (const extra of ['pii.canary.1b@example.com']) {
      const found = lines.find((line) => line.includes(extra));
      if (found) leaks.push(`${JSON.stringify(extra)} in ${found.slice(0, 300)}`);
    }
    expect(leaks).to.deep.equal([]);
  });

  it('no log line holds a ZIP as sent (random tokens aside)', () => {
    const lines = scrubbed();
    const leaks = people.flatMap((p) => [p.zip, p.zip.slice(0, 5)].filter((zip) => lines.some((line) => line.includes(zip))));
    expect(leaks).to.deep.equal([]);
  });

  it('no log line holds an API key or its secret: the valid one, a wrong one, a buyer one', () => {
    const leaks = [...keyNeedles(key), ...keyNeedles(buyerKey), ...keyNeedles(wrongKey)].filter((needle) =>
      svc.logs.some((line) => line.includes(needle)),
    );
    expect(leaks).to.deep.equal([]);
  });
});

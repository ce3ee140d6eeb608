import { expect } from 'chai';
import sinon from 'sinon';
import type { CheckResult, Enrichment } from '../../src/enrichment/check.js';
import { createDefaultEnricher, createEnricher, verificationFailed } from '../../src/enrichment/enricher.js';
import type { MxResolver } from '../../src/enrichment/email.js';
import type { Verifier } from '../../src/enrichment/verifier.js';
import type { NormalisedLead } from '../../src/leads/lead.js';
import { startProvider } from './provider-server.js';

const ID = '0123456789abcdef0123456789abcdef01234567';
const LEAD: NormalisedLead = {
  first_name: 'Jo', last_name: 'Doe', email: 'jo@example.com', mobile: '+12025550143', mobile_national: '2025550143',
  zip: '20001', zip4: null, accident_state: 'DC', certificate_url: `https://cert.trustedform.com/${ID}`,
  certificate_id: ID, sid: 'src-1', s1: null, test: false,
};

const fixed = (name: string, result: CheckResult): Verifier<string> & { inputs: string[] } => {
  const inputs: string[] = [];
  return { name, inputs, verify: async (input) => { inputs.push(input); return result; } };
};
const PASS = (provider: string): CheckResult => ({ result: 'pass', provider, detail: 'ok' });
const mxResolver: MxResolver = { resolveMx: async () => [{ exchange: 'mx.example.com', priority: 10 }], resolveAddresses: async () => [] };

describe('enricher', function () {
  it('gives each verifier its field of the lead and collects the results', async function () {
    const phone = fixed('p', PASS('p'));
    const email = fixed('e', PASS('e'));
    const consent = fixed('c', PASS('c'));
    expect(await createEnricher({ phone, email, consent })(LEAD)).to.deep.equal({ phone: PASS('p'), email: PASS('e'), consent: PASS('c') });
    expect([phone.inputs, email.inputs, consent.inputs]).to.deep.equal([[LEAD.mobile], [LEAD.email], [LEAD.certificate_url]]);
  });

  it('turns a throwing, rejecting or nonsense verifier into unknown provider_error', async function () {
    const enrich = createEnricher({
      phone: { name: 'thrower', verify: () => { throw new Error('sync'); } },
      email: { name: 'rejecter', verify: () => Promise.reject(new Error('async')) },
      consent: { name: 'nonsense', verify: async () => ({ result: 'maybe' }) as unknown as CheckResult },
    });
    expect(await enrich(LEAD)).to.deep.equal({
      phone: { result: 'unknown', provider: 'thrower', detail: 'provider_error' },
      email: { result: 'unknown', provider: 'rejecter', detail: 'provider_error' },
      consent: { result: 'unknown', provider: 'nonsense', detail: 'provider_error' },
    });
  });

  it('gives up on a hanging verifier after its timeout and aborts it', async function () {
    let seen: AbortSignal | undefined;
    const hanging: Verifier<string> = {
      name: 'hanger',
      verify: (_input, signal) => {
        seen = signal;
        return new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason)));
      },
    };
    const clock = sinon.useFakeTimers();
    let result: Awaited<ReturnType<typeof enrich>> | undefined;
    const enrich = createEnricher({ phone: fixed('p', PASS('p')), email: hanging, consent: fixed('c', PASS('c')), timeoutMs: 50 });
    try {
      // A stubbed clock: the deadline is proven to the millisecond, whatever else the machine does.
      void enrich(LEAD).then((r) => (result = r));
      await clock.tickAsync(49);
      expect(result, 'still waiting at 49 ms').to.equal(undefined);
      await clock.tickAsync(1);
    } finally {
      clock.restore();
    }
    if (!result) throw new Error('the enricher did not answer at its timeout');
    expect(result.email).to.deep.equal({ result: 'unknown', provider: 'hanger', detail: 'timeout' });
    expect(result.phone).to.deep.equal(PASS('p'));
    expect(seen?.aborted).to.equal(true);
  });

  it('times out a verifier that ignores the abort signal too', async function () {
    const deaf: Verifier<string> = { name: 'deaf', verify: () => new Promise(() => undefined) };
    const result = await createEnricher({ phone: deaf, email: deaf, consent: deaf, timeoutMs: 30 })(LEAD);
    expect(Object.values(result).map((r) => r.detail)).to.deep.equal(['timeout', 'timeout', 'timeout']);
  });

  describe('default wiring', function () {
    it('uses the built-ins', async function () {
      expect(await createDefaultEnricher({ resolver: mxResolver })(LEAD)).to.deep.equal({
        phone: { result: 'pass', provider: 'libphonenumber', detail: 'fixed_line_or_mobile' },
        email: { result: 'pass', provider: 'dns-mx', detail: 'mx_found' },
        consent: { result: 'pass', provider: 'certificate-rules', detail: 'certificate_format_ok' },
      });
    });

    it('passes the certificate hosts and MX timeout through', async function () {
      const silent: MxResolver = { resolveMx: () => new Promise(() => undefined), resolveAddresses: () => new Promise(() => undefined) };
      const result = await createDefaultEnricher({ resolver: silent, mxTimeoutMs: 20, allowedCertificateHosts: ['x.example'] })(LEAD);
      expect(result.email).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'timeout' });
      expect(result.consent.detail).to.equal('host_not_allowed');
    });

    it('sends a check to the HTTP provider when its URL is configured', async function () {
      const provider = await startProvider();
      try {
        provider.handle((_req, body, res) => {
          const { value } = JSON.parse(body) as { value: string };
          res.setHeader('content-type', 'application/json');
          res.end(JSON.stringify(value.includes('@') ? { result: 'fail', detail: 'undeliverable' } : { result: 'pass', detail: 'mobile' }));
        });
        const result = await createDefaultEnricher({ resolver: mxResolver, phoneProviderUrl: provider.url, emailProviderUrl: provider.url })(LEAD);
        expect(result.phone).to.deep.equal({ result: 'pass', provider: `http:${provider.host}`, detail: 'mobile' });
        expect(result.email).to.deep.equal({ result: 'fail', provider: `http:${provider.host}`, detail: 'undeliverable' });
      } finally {
        await provider.close();
      }
    });
  });

  describe('verificationFailed', function () {
    const of = (phone: CheckResult['result'], email: CheckResult['result'], consent: CheckResult['result']): Enrichment => ({
      phone: { result: phone, provider: 'x', detail: 'x' },
      email: { result: email, provider: 'x', detail: 'x' },
      consent: { result: consent, provider: 'x', detail: 'x' },
    });

    it('is true for a phone or e-mail fail only', function () {
      expect(verificationFailed(of('fail', 'pass', 'pass'))).to.equal(true);
      expect(verificationFailed(of('pass', 'fail', 'pass'))).to.equal(true);
      expect(verificationFailed(of('pass', 'pass', 'fail'))).to.equal(false);
      expect(verificationFailed(of('unknown', 'unknown', 'unknown'))).to.equal(false);
      expect(verificationFailed(of('pass', 'pass', 'pass'))).to.equal(false);
    });
  });
});

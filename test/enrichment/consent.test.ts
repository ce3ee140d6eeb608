import { expect } from 'chai';
import { DEFAULT_CERTIFICATE_HOSTS, createConsentVerifier, parseCertificateUrl } from '../../src/enrichment/consent.js';

const ID = '0123456789abcdef0123456789abcdef01234567';

describe('consent verifier (certificate rules)', function () {
  it('defaults to the TrustedForm hosts', function () {
    expect(DEFAULT_CERTIFICATE_HOSTS).to.deep.equal(['cert.trustedform.com', 'ping.trustedform.com']);
  });

  it('accepts an https certificate URL on an allowed host and lower-cases the id', function () {
    expect(parseCertificateUrl(`https://cert.trustedform.com/${ID}`)).to.deep.equal({ ok: true, certificateId: ID });
    expect(parseCertificateUrl(`https://ping.trustedform.com/${ID.toUpperCase()}`)).to.deep.equal({ ok: true, certificateId: ID });
    expect(parseCertificateUrl(`https://CERT.trustedform.com/certs/${ID}/?x=1#y`)).to.deep.equal({ ok: true, certificateId: ID });
  });

  it('rejects each broken rule with its own reason', function () {
    expect(parseCertificateUrl('not a url')).to.deep.equal({ ok: false, reason: 'invalid_url' });
    expect(parseCertificateUrl(`http://cert.trustedform.com/${ID}`)).to.deep.equal({ ok: false, reason: 'not_https' });
    expect(parseCertificateUrl(`https://cert.trustedform.com.evil.com/${ID}`)).to.deep.equal({ ok: false, reason: 'host_not_allowed' });
    expect(parseCertificateUrl(`https://cert.trustedform.com:8443/${ID}`)).to.deep.equal({ ok: false, reason: 'host_not_allowed' });
    expect(parseCertificateUrl(`https://u:p@cert.trustedform.com/${ID}`)).to.deep.equal({ ok: false, reason: 'invalid_url' });
    // A host disguised to strict parsers, which read these as another host or none (curl and
    // Python's urllib send the first to evil.com), while the WHATWG parser finds the allowed one.
    for (const disguised of [
      `https://cert.trustedform.com\\@evil.com/${ID}`,
      `https://cert.trustedform.com\\.evil.com/${ID}`,
      `https:\\\\cert.trustedform.com/${ID}`,
      `https:cert.trustedform.com/${ID}`,
      `https:/cert.trustedform.com/${ID}`,
      `https://cert%2etrustedform.com/${ID}`,
      `https://cert.trustedform.com/certs\\${ID}`,
    ]) {
      expect(parseCertificateUrl(disguised), disguised).to.deep.equal({ ok: false, reason: 'invalid_url' });
    }
    expect(parseCertificateUrl(`HTTPS://cert.trustedform.com:443/${ID}`)).to.deep.equal({ ok: true, certificateId: ID });
    // What RFC 3986 (the field's documented format: uri) does not allow, which buyers' validators refuse.
    for (const tail of ['?utm=a|b', '?x=%zz', '?x=%4', '?x=[1]', '?a=b#c#d', '?q="x"', '?x={a}', '?x=^', '?x=`', '?x=<a>']) {
      expect(parseCertificateUrl(`https://cert.trustedform.com/${ID}${tail}`), tail).to.deep.equal({ ok: false, reason: 'invalid_url' });
    }
    expect(parseCertificateUrl(`https://cert.trustedform.com/${ID}?utm_source=a%20b&x=~!$'()*+,;=:@/?#frag`)).to.deep.equal({ ok: true, certificateId: ID });
    expect(parseCertificateUrl('https://cert.trustedform.com/')).to.deep.equal({ ok: false, reason: 'no_certificate_id' });
    expect(parseCertificateUrl(`https://cert.trustedform.com/${ID}0`)).to.deep.equal({ ok: false, reason: 'no_certificate_id' });
    expect(parseCertificateUrl(`https://cert.trustedform.com/${ID.slice(1)}g`)).to.deep.equal({ ok: false, reason: 'no_certificate_id' });
    expect(parseCertificateUrl(`https://cert.trustedform.com/?id=${ID}`)).to.deep.equal({ ok: false, reason: 'no_certificate_id' });
  });

  it('uses the configured hosts instead of the defaults', function () {
    expect(parseCertificateUrl(`https://certs.example.com/${ID}`, ['certs.example.com'])).to.deep.equal({ ok: true, certificateId: ID });
    expect(parseCertificateUrl(`https://cert.trustedform.com/${ID}`, ['certs.example.com'])).to.deep.equal({ ok: false, reason: 'host_not_allowed' });
  });

  it('reports pass and fail as check results', async function () {
    const signal = new AbortController().signal;
    const verifier = createConsentVerifier();
    expect(verifier.name).to.equal('certificate-rules');
    expect(await verifier.verify(`https://cert.trustedform.com/${ID}`, signal))
      .to.deep.equal({ result: 'pass', provider: 'certificate-rules', detail: 'certificate_format_ok' });
    expect(await verifier.verify(`http://cert.trustedform.com/${ID}`, signal))
      .to.deep.equal({ result: 'fail', provider: 'certificate-rules', detail: 'not_https' });
    expect(await createConsentVerifier({ allowedHosts: ['x.example'] }).verify(`https://cert.trustedform.com/${ID}`, signal))
      .to.deep.equal({ result: 'fail', provider: 'certificate-rules', detail: 'host_not_allowed' });
  });
});

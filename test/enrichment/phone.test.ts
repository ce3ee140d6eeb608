import { expect } from 'chai';
import { checkPhone, createPhoneVerifier } from '../../src/enrichment/phone.js';

describe('phone verifier (libphonenumber)', function () {
  const verify = (n: string) => createPhoneVerifier().verify(n, new AbortController().signal);

  it('passes a US number, which the metadata cannot tell apart as fixed line or mobile', async function () {
    expect(await verify('+12025550143')).to.deep.equal({ result: 'pass', provider: 'libphonenumber', detail: 'fixed_line_or_mobile' });
  });

  it('passes a UK mobile and a UK fixed line with their types', function () {
    expect(checkPhone('+447911123456')).to.deep.equal({ result: 'pass', provider: 'libphonenumber', detail: 'mobile' });
    expect(checkPhone('+442071838750')).to.deep.equal({ result: 'pass', provider: 'libphonenumber', detail: 'fixed_line' });
  });

  it('fails toll-free, premium-rate and shared-cost numbers', function () {
    expect(checkPhone('+18005550199')).to.deep.equal({ result: 'fail', provider: 'libphonenumber', detail: 'toll_free' });
    expect(checkPhone('+18885550199').detail).to.equal('toll_free');
    expect(checkPhone('+19005550199')).to.deep.equal({ result: 'fail', provider: 'libphonenumber', detail: 'premium_rate' });
    expect(checkPhone('+33810123456')).to.deep.equal({ result: 'fail', provider: 'libphonenumber', detail: 'shared_cost' });
  });

  it('fails invalid and unparseable numbers without echoing them', function () {
    for (const n of ['+15555550100', '+10000000000', '+12345', 'not a number', '']) {
      expect(checkPhone(n), n).to.deep.equal({ result: 'fail', provider: 'libphonenumber', detail: 'invalid' });
    }
  });

  it('passes other valid types with the lower-cased type name', function () {
    expect(checkPhone('+445612345678').detail).to.equal('voip');
    expect(checkPhone('+447011234567').detail).to.equal('personal_number');
  });
});

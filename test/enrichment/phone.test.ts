import { expect } from 'chai';
import { parsePhoneNumberFromString } from 'libphonenumber-js/max';
import { checkPhone, createPhoneVerifier } from '../../src/enrichment/phone.js';
import { parseMobile, validE164 } from '../../src/leads/mobile.js';
import { normaliseConsumer } from '../../src/leads/validate.js';

describe('phone verifier (libphonenumber)', function () {
  it("keeps in memory the numbers of leads it validated, never an erasure's or an access request's", function () {
    const asked = normaliseConsumer({ mobile: '(213) 555-0177' });
    expect(asked.ok && asked.consumer.mobile).to.equal('+12135550177');
    // Parsed afresh each time: nothing was kept.
    expect(validE164('+12135550177')?.phone).to.not.equal(validE164('+12135550177')?.phone);
    const posted = parseMobile('(213) 555-0178');
    expect(validE164('+12135550178')?.phone).to.equal(posted);
  });

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

  it('answers the same from the number validation parsed as from a fresh parse of its E.164 form', function () {
    const posted = [
      '2135550143', '(213) 555-0144', '+1 213 555 0145', '8005550100', '18885550101', '9005550102',
      '4165550103', '+14165550104', '6045550105', '+16045550106', '7875550107', '+17875550108',
      '+447911123456', '+442071838750', '+33810123456', '+445612345678', '+447011234567', '+61412345678',
    ];
    let reused = 0;
    for (const input of posted) {
      const parsed = parseMobile(input);
      if (!parsed) continue;
      // A fresh parse of the E.164 form, as the check made before validation kept its parse.
      const fresh = parsePhoneNumberFromString(parsed.number);
      expect(fresh?.isValid(), input).to.equal(true);
      expect(validE164(parsed.number)?.phone, input).to.equal(parsed);
      expect(validE164(parsed.number)?.type, input).to.equal(fresh!.getType());
      // Rejected types (toll_free, …) and passed ones alike are the lower-cased type.
      expect(checkPhone(parsed.number).detail, input).to.equal((fresh!.getType() ?? 'unknown_type').toLowerCase());
      reused++;
    }
    expect(reused).to.be.above(10);
  });

  it('decides validity and type as isValid() and getType() do, for numbers of every kind and many regions', function () {
    // One look at the metadata stands for both calls: this is every case where they could differ.
    const numbers = [
      '+12025550143', '+12135550143', '+18005550199', '+19005550199', '+15555550100', '+10000000000', '+12345',
      '+14165550103', '+16045550106', '+17875550108', '+13405550109', '+16715550110', '+16845550111', '+16705550112',
      '+18765550113', '+12425550114', '+447911123456', '+442071838750', '+445612345678', '+447011234567', '+447624369230',
      '+33810123456', '+33612345678', '+61412345678', '+4915112345678', '+81312345678', '+79123456789', '+5511912345678',
      '+80012345678', '+882345678901', '+35312345', '+3531234567890', '+9990000000',
    ];
    let valid = 0;
    for (const number of numbers) {
      const fresh = parsePhoneNumberFromString(number);
      const known = validE164(number);
      expect(known !== undefined, number).to.equal(fresh?.isValid() === true);
      if (!known) continue;
      valid++;
      expect(known.type, number).to.equal(fresh!.getType());
      expect(known.phone.number, number).to.equal(fresh!.number);
    }
    expect(valid).to.be.above(15);
  });
});

import { expect } from 'chai';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadServiceConfig } from '../../src/config.js';
import { runChild } from '../support/child.js';

// The variables of the lead checks are checked at start like every other: a bad value stops
// `leadpost serve` with a line naming it, instead of rejecting (or passing) every lead later.

const BIN = fileURLToPath(new URL('../../../bin/leadpost.js', import.meta.url));

function problem(env: Record<string, string>): string {
  try {
    loadServiceConfig(env);
  } catch (error) {
    expect(error).to.be.instanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

describe('configuration of the lead checks', function () {
  describe('MX_CANARY_DOMAIN', function () {
    it('is gmail.com when unset, a domain name when set, and none when set empty', function () {
      expect(loadServiceConfig({}).mxCanaryDomain).to.equal('gmail.com');
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: ' Example.ORG. ' }).mxCanaryDomain).to.equal('example.org');
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: '' }).mxCanaryDomain).to.equal(null);
      expect(loadServiceConfig({ MX_CANARY_DOMAIN: '  ' }).mxCanaryDomain).to.equal(null);
    });

    it('refuses what is not a domain name, naming the variable', function () {
      for (const value of ['https://gmail.com', 'gmail', 'gm ail.com', 'gmail..com', '-gmail.com', 'ada@gmail.com', `${'a'.repeat(64)}.com`]) {
        expect(problem({ MX_CANARY_DOMAIN: value }), value).to.contain(`MX_CANARY_DOMAIN must be a domain name (e.g. gmail.com), or empty for none, not '${value}'`);
      }
    });
  });

  describe('PHONE_REGIONS', function () {
    it('is the US, Canada and the US territories of the North American numbering plan by default', function () {
      expect(loadServiceConfig({}).phoneRegions).to.deep.equal(['US', 'CA', 'PR', 'VI', 'GU', 'AS', 'MP']);
      expect(loadServiceConfig({ PHONE_REGIONS: '' }).phoneRegions).to.deep.equal(['US', 'CA', 'PR', 'VI', 'GU', 'AS', 'MP']);
    });

    it('takes a comma-separated list of region codes, in any case, once each', function () {
      expect(loadServiceConfig({ PHONE_REGIONS: 'gb' }).phoneRegions).to.deep.equal(['GB']);
      expect(loadServiceConfig({ PHONE_REGIONS: ' US , ca,US,' }).phoneRegions).to.deep.equal(['US', 'CA']);
    });

    it('refuses an empty list, or codes libphonenumber does not know, naming the variable and the bad codes', function () {
      expect(problem({ PHONE_REGIONS: ' , ' })).to.contain('PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA)');
      expect(problem({ PHONE_REGIONS: 'US,XX,usa,1' })).to.contain("PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not 'XX', 'USA', '1'");
      expect(problem({ PHONE_REGIONS: '001' })).to.contain("not '001'");
    });
  });

  it('leadpost serve stops with exit 1 and a line naming each bad variable', async function () {
    this.timeout(60_000);
    const result = await runChild(['serve'], { MX_CANARY_DOMAIN: 'not a domain', PHONE_REGIONS: 'US,ZZ' }, { script: BIN });
    expect(result.code).to.equal(1);
    const lines = result.stderr.trim().split('\n').map((line) => line.trim());
    expect(lines[0]).to.equal('leadpost: invalid configuration:');
    expect(lines.slice(1)).to.deep.equal([
      "MX_CANARY_DOMAIN must be a domain name (e.g. gmail.com), or empty for none, not 'not a domain'",
      "PHONE_REGIONS must be a comma-separated list of ISO 3166 region codes (e.g. US,CA), not 'ZZ'",
    ]);
  });
});

describe('LEADPOST_ROLES and serve --roles', function () {
  it('is every role by default; a list picks some, in any case, once each', function () {
    expect([...loadServiceConfig({}).roles]).to.deep.equal(['api', 'projector', 'delivery']);
    expect([...loadServiceConfig({ LEADPOST_ROLES: '' }).roles]).to.deep.equal(['api', 'projector', 'delivery']);
    expect([...loadServiceConfig({ LEADPOST_ROLES: ' API , delivery,api,' }).roles]).to.deep.equal(['api', 'delivery']);
  });

  it('LEADPOST_BACKGROUND_THREAD is on by default, off with 0, and anything else names it', function () {
    expect(loadServiceConfig({}).backgroundThread).to.equal(true);
    expect(loadServiceConfig({ LEADPOST_BACKGROUND_THREAD: '0' }).backgroundThread).to.equal(false);
    expect(loadServiceConfig({ LEADPOST_BACKGROUND_THREAD: 'off' }).backgroundThread).to.equal(false);
    expect(problem({ LEADPOST_BACKGROUND_THREAD: 'sometimes' })).to.contain("LEADPOST_BACKGROUND_THREAD must be 1 or 0 (true/false, yes/no, on/off), not 'sometimes'");
  });

  it('refuses an unknown role or an empty list, naming the variable', function () {
    expect(problem({ LEADPOST_ROLES: 'api,worker' })).to.contain("LEADPOST_ROLES must be a comma-separated list of api, projector, delivery, not 'api,worker'");
    expect(problem({ LEADPOST_ROLES: ' , ' })).to.contain('LEADPOST_ROLES must be a comma-separated list');
  });

  it('serve --roles overrides the variable and is checked like it; any other argument is bad usage', async function () {
    this.timeout(60_000);
    const [flag, equals, other] = await Promise.all([
      runChild(['serve', '--roles', 'api,nope'], { LEADPOST_ROLES: 'api' }, { script: BIN }),
      runChild(['serve', '--roles=projector,x'], {}, { script: BIN }),
      runChild(['serve', '--role', 'api'], {}, { script: BIN }),
    ]);
    expect(flag.code).to.equal(1);
    expect(flag.stderr).to.contain("LEADPOST_ROLES must be a comma-separated list of api, projector, delivery, not 'api,nope'");
    expect(equals.code).to.equal(1);
    expect(equals.stderr).to.contain("not 'projector,x'");
    expect(other.code).to.equal(2);
    expect(other.stderr).to.contain('serve takes only --roles LIST');
  });
});

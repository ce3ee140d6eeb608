import { expect } from 'chai';
import sinon from 'sinon';
import { createEmailVerifier, isDisposableDomain, type MxRecord, type MxResolver } from '../../src/enrichment/email.js';
import { MAILBOX_PROVIDER_DOMAINS } from '../../src/enrichment/mailbox-providers.js';

type Answer<T> = T | Error | 'hang' | Promise<T>;

const settle = <T>(a: Answer<T>): Promise<T> => {
  if (a === 'hang') return new Promise(() => undefined);
  if (a instanceof Error) return Promise.reject(a);
  return Promise.resolve(a);
};

// DNS as the tests say it is: nothing here ever reaches a real resolver.
class FakeResolver implements MxResolver {
  /** Domains whose MX was asked for. */
  readonly calls: string[] = [];
  /** Domains whose A/AAAA addresses were asked for. */
  readonly addressCalls: string[] = [];
  constructor(
    private readonly mx: (domain: string) => Answer<MxRecord[]>,
    private readonly addresses: (domain: string) => Answer<string[]> = () => [],
  ) {}
  resolveMx(domain: string): Promise<MxRecord[]> {
    this.calls.push(domain);
    return settle(this.mx(domain));
  }
  resolveAddresses(domain: string): Promise<string[]> {
    this.addressCalls.push(domain);
    return settle(this.addresses(domain));
  }
}

const dnsError = (code: string) => Object.assign(new Error(`queryMx ${code}`), { code });
/** A resolver that answers "no such domain" for every name, as some sandboxes do. */
const nxdomainEverywhere = () => new FakeResolver(() => dnsError('ENOTFOUND'), () => dnsError('ENOTFOUND'));
const MX_OK: MxRecord[] = [{ exchange: 'mx1.example.com', priority: 10 }];
const signal = new AbortController().signal;

describe('e-mail verifier', function () {
  describe('disposable domains', function () {
    it('fails a listed domain and its subdomains without a DNS lookup', async function () {
      const resolver = new FakeResolver(() => MX_OK);
      const verifier = createEmailVerifier({ resolver });
      for (const email of ['jo@mailinator.com', 'jo@x.mailinator.com', 'jo@a.b.MAILINATOR.com']) {
        expect(await verifier.verify(email, signal), email)
          .to.deep.equal({ result: 'fail', provider: 'disposable-list', detail: 'disposable_domain' });
      }
      expect(resolver.calls).to.deep.equal([]);
    });

    it('does not treat a lookalike or the bare TLD as disposable', function () {
      expect(isDisposableDomain('xmailinator.com')).to.equal(false);
      expect(isDisposableDomain('mailinator.com.example')).to.equal(false);
      expect(isDisposableDomain('com')).to.equal(false);
      expect(isDisposableDomain('mailinator.com.')).to.equal(true);
    });
  });

  describe('MX lookup', function () {
    it('passes when MX records exist, asking for the part after the last @', async function () {
      const resolver = new FakeResolver(() => MX_OK);
      const result = await createEmailVerifier({ resolver }).verify('"a@b"@example.com', signal);
      expect(result).to.deep.equal({ result: 'pass', provider: 'dns-mx', detail: 'mx_found' });
      expect(resolver.calls).to.deep.equal(['example.com']);
    });

    it('fails on NXDOMAIN, on only a null MX, and on no MX with no address', async function () {
      const answers: Record<string, Answer<MxRecord[]>> = {
        'gone.example': dnsError('ENOTFOUND'),
        'nullmx.example': [{ exchange: '', priority: 0 }],
        'nodata.example': dnsError('ENODATA'),
        'empty.example': [],
      };
      const verifier = createEmailVerifier({ resolver: new FakeResolver((d) => answers[d] ?? MX_OK, () => dnsError('ENODATA')) });
      const detail = async (domain: string) => {
        const result = await verifier.verify(`jo@${domain}`, signal);
        expect(result.result, domain).to.equal('fail');
        expect(result.provider, domain).to.equal('dns-mx');
        return result.detail;
      };
      expect(await detail('gone.example')).to.equal('no_such_domain');
      expect(await detail('nullmx.example')).to.equal('null_mx');
      expect(await detail('nodata.example')).to.equal('no_mail_route');
      expect(await detail('empty.example')).to.equal('no_mail_route');
    });

    it('passes a domain with no MX but an A or AAAA record: it takes mail at its address (RFC 5321 §5.1)', async function () {
      const answers: Record<string, Answer<MxRecord[]>> = { 'a-only.example': dnsError('ENODATA'), 'aaaa-only.example': [] };
      const addresses: Record<string, string[]> = { 'a-only.example': ['192.0.2.7'], 'aaaa-only.example': ['2001:db8::7'] };
      const resolver = new FakeResolver((d) => answers[d] ?? MX_OK, (d) => addresses[d] ?? []);
      const verifier = createEmailVerifier({ resolver });
      for (const domain of Object.keys(answers)) {
        expect(await verifier.verify(`jo@${domain}`, signal), domain).to.deep.equal({ result: 'pass', provider: 'dns-mx', detail: 'address_found' });
      }
      expect(resolver.addressCalls).to.deep.equal(['a-only.example', 'aaaa-only.example']);
    });

    it('asks for no address when MX records answer, or when a null MX says the domain takes no mail', async function () {
      const answers: Record<string, Answer<MxRecord[]>> = { 'ok.example': MX_OK, 'nullmx.example': [{ exchange: '.', priority: 0 }] };
      const resolver = new FakeResolver((d) => answers[d]!, () => ['192.0.2.7']);
      const verifier = createEmailVerifier({ resolver });
      expect((await verifier.verify('jo@ok.example', signal)).detail).to.equal('mx_found');
      expect((await verifier.verify('jo@nullmx.example', signal)).detail).to.equal('null_mx');
      expect(resolver.addressCalls).to.deep.equal([]);
    });

    it('gives unknown when the address lookup cannot answer', async function () {
      const resolver = new FakeResolver(() => dnsError('ENODATA'), () => dnsError('ESERVFAIL'));
      expect(await createEmailVerifier({ resolver }).verify('jo@example.com', signal)).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_error' });
    });

    it('passes when a null MX sits next to a real one', async function () {
      const resolver = new FakeResolver(() => [{ exchange: '', priority: 0 }, ...MX_OK]);
      expect((await createEmailVerifier({ resolver }).verify('jo@example.com', signal)).result).to.equal('pass');
    });

    it('gives unknown dns_error when DNS cannot answer, and timeout for a resolver timeout', async function () {
      const answers: Record<string, Answer<MxRecord[]>> = {
        'refused.example': dnsError('ECONNREFUSED'),
        'servfail.example': dnsError('ESERVFAIL'),
        'weird.example': new Error('no code at all'),
        'slow.example': dnsError('ETIMEOUT'),
      };
      const verifier = createEmailVerifier({ resolver: new FakeResolver((d) => answers[d] ?? MX_OK) });
      expect(await verifier.verify('jo@refused.example', signal)).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_error' });
      expect((await verifier.verify('jo@servfail.example', signal)).detail).to.equal('dns_error');
      expect((await verifier.verify('jo@weird.example', signal)).detail).to.equal('dns_error');
      expect(await verifier.verify('jo@slow.example', signal)).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'timeout' });
    });

    it('gives unknown dns_error when the resolver throws synchronously', async function () {
      const resolver: MxResolver = { resolveMx: () => { throw new Error('boom'); }, resolveAddresses: async () => [] };
      expect((await createEmailVerifier({ resolver }).verify('jo@example.com', signal)).detail).to.equal('dns_error');
    });

    it('fails an address with no domain', async function () {
      const verifier = createEmailVerifier({ resolver: new FakeResolver(() => MX_OK) });
      for (const email of ['nobody', 'jo@', '@example.com']) {
        expect(await verifier.verify(email, signal), email).to.deep.equal({ result: 'fail', provider: 'syntax', detail: 'invalid_address' });
      }
    });
  });

  describe('time box and cache', function () {
    it('gives up on a silent DNS after the default 300 ms, then answers from the cache at once', async function () {
      // A stubbed clock: the time box is proven to the millisecond, whatever else the machine does.
      const clock = sinon.useFakeTimers();
      try {
        const resolver = new FakeResolver(() => 'hang');
        const verifier = createEmailVerifier({ resolver });
        let answer: unknown;
        void verifier.verify('jo@example.com', signal).then((result) => (answer = result));
        await clock.tickAsync(299);
        expect(answer, 'still waiting at 299 ms').to.equal(undefined);
        await clock.tickAsync(1);
        expect(answer).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'timeout' });
        // The next lead of the domain is answered without a lookup and without the clock moving.
        expect((await verifier.verify('ann@example.com', signal)).detail).to.equal('timeout');
        expect(resolver.calls).to.deep.equal(['example.com']);
        expect(clock.countTimers(), 'no time box left running').to.equal(0);
      } finally {
        clock.restore();
      }
    });

    it('clears its timer once DNS answers', async function () {
      const clock = sinon.useFakeTimers();
      try {
        await createEmailVerifier({ resolver: new FakeResolver(() => MX_OK), mxTimeoutMs: 60_000 }).verify('jo@example.com', signal);
        await createEmailVerifier({ resolver: new FakeResolver(() => dnsError('ENODATA')) }).verify('jo@example.com', signal);
        expect(clock.countTimers()).to.equal(0);
      } finally {
        clock.restore();
      }
    });

    it('shares one lookup between concurrent checks of the same domain', async function () {
      let answer!: (records: MxRecord[]) => void;
      const pending = new Promise<MxRecord[]>((resolve) => { answer = resolve; });
      const resolver = new FakeResolver(() => pending);
      const verifier = createEmailVerifier({ resolver });
      const checks = [verifier.verify('a@example.com', signal), verifier.verify('b@EXAMPLE.com', signal), verifier.verify('c@example.com', signal)];
      answer(MX_OK);
      for (const r of await Promise.all(checks)) expect(r.detail).to.equal('mx_found');
      expect(resolver.calls).to.deep.equal(['example.com']);
    });

    it('keeps a found route for an hour, no route for 5 minutes and a DNS error for 30 s', async function () {
      let t = 1_000_000;
      const answers: Record<string, Answer<MxRecord[]>> = { 'ok.example': MX_OK, 'gone.example': dnsError('ENOTFOUND'), 'down.example': dnsError('ECONNREFUSED') };
      const resolver = new FakeResolver((d) => answers[d] ?? MX_OK);
      const verifier = createEmailVerifier({ resolver, now: () => t });
      const all = async () => {
        for (const d of Object.keys(answers)) await verifier.verify(`jo@${d}`, signal);
      };
      await all();
      expect(resolver.calls).to.have.length(3);
      t += 29_999;
      await all();
      expect(resolver.calls).to.have.length(3);
      t += 2;
      await all();
      expect(resolver.calls.slice(3)).to.deep.equal(['down.example']);
      t = 1_000_000 + 5 * 60_000 - 1;
      await all();
      expect(resolver.calls.slice(4)).to.deep.equal(['down.example']);
      t = 1_000_000 + 5 * 60_000 + 1;
      await all();
      expect(resolver.calls.slice(5), 'the negative answer is asked again after 5 minutes').to.deep.equal(['gone.example']);
      t = 1_000_000 + 3_600_000 + 1;
      await all();
      expect(resolver.calls.slice(6)).to.deep.equal(['ok.example', 'gone.example', 'down.example']);
    });

    it('a domain that failed is accepted minutes later, once DNS has it', async function () {
      let t = 0;
      let exists = false;
      const resolver = new FakeResolver(() => (exists ? MX_OK : dnsError('ENOTFOUND')));
      const verifier = createEmailVerifier({ resolver, now: () => t });
      expect((await verifier.verify('jo@new-firm.example', signal)).result).to.equal('fail');
      exists = true;
      t = 4 * 60_000;
      expect((await verifier.verify('jo@new-firm.example', signal)).result, 'still cached at 4 minutes').to.equal('fail');
      t = 5 * 60_000;
      expect(await verifier.verify('jo@new-firm.example', signal)).to.deep.equal({ result: 'pass', provider: 'dns-mx', detail: 'mx_found' });
    });

    it('honours custom TTLs', async function () {
      let t = 0;
      const resolver = new FakeResolver((d) => (d === 'gone.example' ? dnsError('ENOTFOUND') : MX_OK));
      const verifier = createEmailVerifier({ resolver, now: () => t, cacheTtlMs: 10, negativeTtlMs: 20 });
      await verifier.verify('jo@example.com', signal);
      await verifier.verify('jo@gone.example', signal);
      t = 10;
      await verifier.verify('jo@example.com', signal);
      await verifier.verify('jo@gone.example', signal);
      expect(resolver.calls).to.deep.equal(['example.com', 'gone.example', 'example.com']);
      t = 20;
      await verifier.verify('jo@gone.example', signal);
      expect(resolver.calls.slice(3)).to.deep.equal(['gone.example']);
    });

    it('evicts the oldest domain beyond the size bound', async function () {
      const resolver = new FakeResolver(() => MX_OK);
      const verifier = createEmailVerifier({ resolver, maxCacheEntries: 2 });
      for (const d of ['a.example', 'b.example', 'c.example', 'b.example', 'c.example', 'a.example']) {
        await verifier.verify(`jo@${d}`, signal);
      }
      expect(resolver.calls).to.deep.equal(['a.example', 'b.example', 'c.example', 'a.example']);
    });
  });
});

describe('e-mail: the large mailbox providers', function () {
  it('pass without any lookup', async function () {
    const resolver = nxdomainEverywhere();
    const verifier = createEmailVerifier({ resolver, canaryDomain: 'gmail.com' });
    for (const domain of MAILBOX_PROVIDER_DOMAINS) {
      expect(await verifier.verify(`someone@${domain}`, signal), domain)
        .to.deep.equal({ result: 'pass', provider: 'mailbox-providers', detail: 'well_known_provider' });
    }
    expect(resolver.calls).to.deep.equal([]);
    expect(resolver.addressCalls).to.deep.equal([]);
  });

  it('include the common ones', function () {
    for (const domain of ['gmail.com', 'googlemail.com', 'yahoo.com', 'outlook.com', 'hotmail.com', 'live.com', 'icloud.com', 'aol.com', 'msn.com', 'me.com', 'mac.com']) {
      expect(MAILBOX_PROVIDER_DOMAINS.has(domain), domain).to.equal(true);
    }
  });

  it('a subdomain of a provider, or a look-alike, is looked up', async function () {
    const resolver = new FakeResolver(() => MX_OK);
    const verifier = createEmailVerifier({ resolver });
    for (const email of ['jo@mail.gmail.com', 'jo@gmail.co', 'jo@xgmail.com']) expect((await verifier.verify(email, signal)).detail).to.equal('mx_found');
    expect(resolver.calls).to.deep.equal(['mail.gmail.com', 'gmail.co', 'xgmail.com']);
  });
});

describe('e-mail MX check with a canary domain', function () {
  const honest = () =>
    new FakeResolver((domain) => (domain === 'gmail.com' || domain === 'canary.example' ? [{ exchange: `mx.${domain}`, priority: 5 }] : dnsError('ENOTFOUND')));

  it('a gmail.com lead passes when the resolver answers NXDOMAIN for every name, gmail.com (the canary) included', async function () {
    const verifier = createEmailVerifier({ resolver: nxdomainEverywhere(), canaryDomain: 'gmail.com' });
    expect(await verifier.verify('someone@gmail.com', signal)).to.deep.equal({ result: 'pass', provider: 'mailbox-providers', detail: 'well_known_provider' });
  });

  it('a resolver that denies every domain gives unknown dns_unreliable, not a failure', async function () {
    const verifier = createEmailVerifier({ resolver: nxdomainEverywhere(), canaryDomain: 'gmail.com' });
    for (const email of ['someone@example.com', 'someone@law-firm.example']) {
      expect(await verifier.verify(email, signal), email).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_unreliable' });
    }
  });

  it('a failed canary makes its own domain unknown too, never a failure', async function () {
    const verifier = createEmailVerifier({ resolver: nxdomainEverywhere(), canaryDomain: 'canary.example' });
    expect(await verifier.verify('someone@canary.example', signal)).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_unreliable' });
  });

  it('the canary domain passes on its own lookup when DNS is healthy', async function () {
    const verifier = createEmailVerifier({ resolver: honest(), canaryDomain: 'canary.example' });
    expect((await verifier.verify('someone@canary.example', signal)).result).to.equal('pass');
  });

  it('a domain without MX or address, under a canary that fails, is unknown too', async function () {
    const resolver = new FakeResolver(() => dnsError('ENODATA'), () => dnsError('ENODATA'));
    const verifier = createEmailVerifier({ resolver, canaryDomain: 'canary.example' });
    expect((await verifier.verify('someone@example.com', signal)).detail).to.equal('dns_unreliable');
  });

  it('an honest resolver that knows the canary still fails a domain that does not exist', async function () {
    const verifier = createEmailVerifier({ resolver: honest(), canaryDomain: 'gmail.com' });
    expect(await verifier.verify('someone@nowhere.example', signal)).to.deep.equal({ result: 'fail', provider: 'dns-mx', detail: 'no_such_domain' });
  });

  it('asks the canary once a minute at most, one lookup shared by concurrent checks', async function () {
    let t = 0;
    const resolver = nxdomainEverywhere();
    const verifier = createEmailVerifier({ resolver, canaryDomain: 'canary.example', now: () => t });
    await Promise.all(['a', 'b', 'c'].map((d) => verifier.verify(`jo@${d}.example`, signal)));
    expect(resolver.calls.filter((d) => d === 'canary.example')).to.have.length(1);
    t = 59_999;
    await verifier.verify('jo@d.example', signal);
    expect(resolver.calls.filter((d) => d === 'canary.example')).to.have.length(1);
    t = 60_000;
    await verifier.verify('jo@e.example', signal);
    expect(resolver.calls.filter((d) => d === 'canary.example')).to.have.length(2);
  });
});

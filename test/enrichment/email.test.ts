import { expect } from 'chai';
import sinon from 'sinon';
import { createEmailVerifier, isDisposableDomain, type MxRecord, type MxResolver } from '../../src/enrichment/email.js';

type Answer = MxRecord[] | Error | 'hang' | Promise<MxRecord[]>;

class FakeResolver implements MxResolver {
  readonly calls: string[] = [];
  constructor(private readonly answer: (domain: string) => Answer) {}
  resolveMx(domain: string): Promise<MxRecord[]> {
    this.calls.push(domain);
    const a = this.answer(domain);
    if (a === 'hang') return new Promise(() => undefined);
    if (a instanceof Error) return Promise.reject(a);
    return Promise.resolve(a);
  }
}

const dnsError = (code: string) => Object.assign(new Error(`queryMx ${code}`), { code });
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

    it('fails on NXDOMAIN, no MX data, or only a null MX', async function () {
      const answers: Record<string, Answer> = {
        'gone.example': dnsError('ENOTFOUND'),
        'nodata.example': dnsError('ENODATA'),
        'nullmx.example': [{ exchange: '', priority: 0 }],
        'empty.example': [],
      };
      const verifier = createEmailVerifier({ resolver: new FakeResolver((d) => answers[d] ?? MX_OK) });
      for (const domain of Object.keys(answers)) {
        expect(await verifier.verify(`jo@${domain}`, signal), domain).to.deep.equal({ result: 'fail', provider: 'dns-mx', detail: 'no_mx' });
      }
    });

    it('passes when a null MX sits next to a real one', async function () {
      const resolver = new FakeResolver(() => [{ exchange: '', priority: 0 }, ...MX_OK]);
      expect((await createEmailVerifier({ resolver }).verify('jo@example.com', signal)).result).to.equal('pass');
    });

    it('gives unknown dns_error when DNS cannot answer, and timeout for a resolver timeout', async function () {
      const answers: Record<string, Answer> = {
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
      const resolver: MxResolver = { resolveMx: () => { throw new Error('boom'); } };
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
      const resolver = new FakeResolver(() => 'hang');
      const verifier = createEmailVerifier({ resolver });
      let started = performance.now();
      expect(await verifier.verify('jo@example.com', signal)).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'timeout' });
      const first = performance.now() - started;
      expect(first).to.be.within(280, 400);
      started = performance.now();
      expect((await verifier.verify('ann@example.com', signal)).detail).to.equal('timeout');
      expect(performance.now() - started).to.be.below(20);
      expect(resolver.calls).to.deep.equal(['example.com']);
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

    it('keeps definite answers for an hour and errors for 30 s', async function () {
      let t = 1_000_000;
      const answers: Record<string, Answer> = { 'ok.example': MX_OK, 'gone.example': dnsError('ENOTFOUND'), 'down.example': dnsError('ECONNREFUSED') };
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
      t = 1_000_000 + 3_600_000 + 1;
      await all();
      expect(resolver.calls.slice(4)).to.deep.equal(['ok.example', 'gone.example', 'down.example']);
    });

    it('honours custom TTLs', async function () {
      let t = 0;
      const resolver = new FakeResolver(() => MX_OK);
      const verifier = createEmailVerifier({ resolver, now: () => t, cacheTtlMs: 10 });
      await verifier.verify('jo@example.com', signal);
      t = 10;
      await verifier.verify('jo@example.com', signal);
      expect(resolver.calls).to.have.length(2);
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

describe('e-mail MX check with a canary domain', function () {
  const denyAll = { resolveMx: async () => Promise.reject(Object.assign(new Error('nx'), { code: 'ENOTFOUND' })) };
  const honest = {
    resolveMx: async (domain: string) => {
      if (domain === 'gmail.com') return [{ exchange: 'mx.gmail.com', priority: 5 }];
      throw Object.assign(new Error('nx'), { code: 'ENOTFOUND' });
    },
  };

  it('a resolver that denies every domain gives unknown dns_unreliable, not a failure', async function () {
    const verifier = createEmailVerifier({ resolver: denyAll, canaryDomain: 'gmail.com' });
    const result = await verifier.verify('someone@example.com', new AbortController().signal);
    expect(result).to.deep.equal({ result: 'unknown', provider: 'dns-mx', detail: 'dns_unreliable' });
  });

  it('an honest resolver that knows the canary still fails a domain with no MX', async function () {
    const verifier = createEmailVerifier({ resolver: honest, canaryDomain: 'gmail.com' });
    const result = await verifier.verify('someone@nowhere.example', new AbortController().signal);
    expect(result).to.deep.equal({ result: 'fail', provider: 'dns-mx', detail: 'no_mx' });
  });
});

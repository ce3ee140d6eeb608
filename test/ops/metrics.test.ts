import { readFileSync } from 'node:fs';
import { expect } from 'chai';
import { parseKey } from '../../src/keys/api-keys.js';
import { ServiceMetrics } from '../../src/ops/metrics.js';
import { sample } from '../support/metrics.js';
import { TestService, validLead } from '../support/service.js';

// /metrics through the real HTTPS server: the series an on-call engineer reads, and none of the
// values a lead or a key carries.


describe('metrics', function () {
  this.timeout(30_000);
  let svc: TestService;
  let key: string;
  let text: string;
  const pii = {
    first_name: 'Zebulon',
    last_name: 'Quixotic',
    email: 'zebulon.metrics.canary@example.com',
    mobile: '+12135550177',
    sid: 'metrics-sid-canary',
    s1: 'metrics-s1-canary',
  };

  before(async function () {
    svc = await TestService.start();
    key = await svc.key('supplier', 'metrics-supplier-canary');
    const auth = { 'x-api-key': key };
    const sold = await svc.post(validLead(pii), auth);
    expect(sold.body.code).to.equal('SOLD');
    await svc.post(validLead({ zip: 'bad' }), auth);
    const retried = validLead();
    await svc.post(retried, { ...auth, 'idempotency-key': 'm-1' });
    await svc.post(retried, { ...auth, 'idempotency-key': 'm-1' });
    await svc.post(validLead(), { 'x-api-key': 'lp_wrong_key' });
    await svc.request('GET', `/functions/leads/${sold.body.lead_id as number}`, auth);
    await svc.request('GET', `/unknown/${pii.email}?mobile=${encodeURIComponent(pii.mobile)}`);
    await svc.request('DELETE', '/functions/leads', auth);
    await svc.service.projections.waitFor(await svc.service.store.headPosition());
    const reply = await svc.request('GET', '/metrics');
    expect(reply.status).to.equal(200);
    expect(String(reply.headers['content-type'])).to.match(/^text\/plain; version=0\.0\.4/);
    text = reply.text;
  });
  after(async () => svc.stop());

  it("names the release it runs, as package.json does, in leadpost_build_info's label", function () {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(sample(text, `leadpost_build_info{version="${version}"}`)).to.equal(1);
    const listening = svc.logs.map((line) => JSON.parse(line) as Record<string, unknown>).find((entry) => entry.msg === 'leadpost listening');
    expect(listening).to.include({ version });
  });

  it('has a request latency histogram by route template and status', function () {
    expect(sample(text, 'leadpost_http_request_duration_seconds_count{method="POST",route="/functions/leads",status="201"}')).to.be.at.least(2);
    expect(sample(text, 'leadpost_http_request_duration_seconds_count{method="POST",route="/functions/leads",status="422"}')).to.equal(1);
    expect(sample(text, 'leadpost_http_request_duration_seconds_count{method="GET",route="/functions/leads/:lead_id",status="200"}')).to.equal(1);
    expect(sample(text, 'leadpost_http_request_duration_seconds_count{method="GET",route="unmatched",status="404"}')).to.equal(1);
    expect(sample(text, 'leadpost_http_request_duration_seconds_count{method="DELETE",route="/functions/leads",status="405"}')).to.equal(1);
    expect(text).to.contain('leadpost_http_request_duration_seconds_bucket{le="0.005",method="POST",route="/functions/leads",status="201"}');
  });

  it('counts lead posts by outcome code, replays apart', function () {
    expect(sample(text, 'leadpost_lead_posts_total{code="SOLD",replayed="false"}')).to.equal(2);
    expect(sample(text, 'leadpost_lead_posts_total{code="SOLD",replayed="true"}')).to.equal(1);
    expect(sample(text, 'leadpost_lead_posts_total{code="INVALID",replayed="false"}')).to.equal(1);
    expect(sample(text, 'leadpost_lead_posts_total{code="UNAUTHORIZED",replayed="false"}')).to.equal(1);
  });

  it('counts event-store appends and the events they wrote', function () {
    expect(sample(text, 'leadpost_event_store_appends_total{result="ok"}')).to.be.greaterThan(3);
    expect(sample(text, 'leadpost_event_store_appended_events_total')).to.be.greaterThan(8);
  });

  it('exposes each projection’s lag, backlog and position', function () {
    for (const projection of ['leads', 'deliveries', 'reports']) {
      expect(sample(text, `leadpost_projection_lag_seconds{projection="${projection}"}`), projection).to.equal(0);
      expect(sample(text, `leadpost_projection_events_behind{projection="${projection}"}`), projection).to.equal(0);
      expect(sample(text, `leadpost_projection_position{projection="${projection}"}`), projection).to.be.greaterThan(0);
    }
  });

  it('has the delivery attempt counter and the process metrics', function () {
    expect(text).to.contain('# TYPE leadpost_delivery_attempts_total counter');
    expect(text).to.contain('process_resident_memory_bytes');
    expect(text).to.contain('nodejs_eventloop_lag_seconds');
  });

  it('carries no PII, key, principal name or raw URL', function () {
    for (const value of [...Object.values(pii), pii.mobile.slice(2), key, parseKey(key)!.secret, 'metrics-supplier-canary', '/unknown/', 'lp_wrong_key']) {
      expect(text, value).to.not.contain(value);
    }
    expect(text).to.not.match(/\/functions\/leads\/\d/);
  });
});

describe('ServiceMetrics', function () {
  it('counts delivery attempts by outcome and leaves skipped leads out (nothing was sent)', async function () {
    const metrics = new ServiceMetrics({ runtime: false });
    metrics.countDeliveryAttempt(1, { kind: 'recorded', attempt: 1, outcome: 'LeadDelivered', retryAt: null });
    metrics.countDeliveryAttempt(2, { kind: 'recorded', attempt: 1, outcome: 'LeadDeliveryFailed', retryAt: '2026-11-21T00:00:02Z' });
    metrics.countDeliveryAttempt(2, { kind: 'recorded', attempt: 8, outcome: 'LeadDeliveryFailed', retryAt: null });
    metrics.countDeliveryAttempt(3, { kind: 'recorded', attempt: 9, outcome: 'given_up', retryAt: null });
    metrics.countDeliveryAttempt(4, { kind: 'superseded', attempt: 2 });
    metrics.countDeliveryAttempt(5, { kind: 'skipped', reason: 'not_due' });
    const { body } = await metrics.render();
    for (const outcome of ['delivered', 'retrying', 'failed', 'given_up', 'superseded']) {
      expect(sample(body, `leadpost_delivery_attempts_total{outcome="${outcome}"}`), outcome).to.equal(1);
    }
    expect(body).to.not.contain('skipped');
  });

  it("names why a check is unknown from the service's own reasons; a provider's own detail is 'other', so no provider can grow the label space", async function () {
    const metrics = new ServiceMetrics({ runtime: false });
    const check = (result: 'pass' | 'fail' | 'unknown', detail: string) => ({ result, provider: 'p', detail });
    metrics.countChecks({ phone: check('pass', 'mobile'), email: check('unknown', 'timeout'), consent: check('fail', 'not_https') });
    metrics.countChecks({ phone: check('unknown', 'provider_error'), email: check('unknown', 'dns_unreliable'), consent: check('unknown', 'quota-exceeded-for-acct-77') });
    const { body } = await metrics.render();
    expect(sample(body, 'leadpost_lead_checks_total{check="phone",result="pass"}')).to.equal(1);
    expect(sample(body, 'leadpost_lead_checks_total{check="phone",result="unknown",reason="provider_error"}')).to.equal(1);
    expect(sample(body, 'leadpost_lead_checks_total{check="email",result="unknown",reason="timeout"}')).to.equal(1);
    expect(sample(body, 'leadpost_lead_checks_total{check="email",result="unknown",reason="dns_unreliable"}')).to.equal(1);
    expect(sample(body, 'leadpost_lead_checks_total{check="consent",result="fail"}')).to.equal(1);
    expect(sample(body, 'leadpost_lead_checks_total{check="consent",result="unknown",reason="other"}')).to.equal(1);
    expect(body).to.not.contain('quota-exceeded');
  });

  it('a projection status that fails leaves the scrape working', async function () {
    const metrics = new ServiceMetrics({ runtime: false, projections: () => Promise.reject(new Error('store down')) });
    const { body } = await metrics.render();
    expect(body).to.contain('# TYPE leadpost_projection_lag_seconds gauge');
  });
});

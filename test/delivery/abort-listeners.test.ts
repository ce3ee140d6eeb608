import { expect } from 'chai';
import { getEventListeners } from 'node:events';
import { BuyerEndpoint } from './buyer-endpoint.js';
import { DeliveryHarness, sleep, until } from './harness.js';

// The worker cuts the POSTs in flight short when it stops, through an AbortSignal. Node adds an
// abort listener to a request's signal until the request ends: one signal shared by every attempt
// collected one listener per POST in flight, and at 16 at once Node printed a
// MaxListenersExceededWarning on stderr (not a JSON log line, and it reads like a leak). Each
// attempt now has a signal of its own, which no other request listens to and which is dropped
// when the attempt ends.

describe('delivery worker: abort listeners', function () {
  this.timeout(120_000);
  const LEADS = 40;
  let endpoint: BuyerEndpoint;
  let harness: DeliveryHarness;
  const warnings: Error[] = [];
  const onWarning = (warning: Error) => warnings.push(warning);

  before(async function () {
    // Slow enough that every slot of the worker is taken at once.
    endpoint = await BuyerEndpoint.start(async () => {
      await sleep(300);
      return 200;
    });
    harness = await DeliveryHarness.start(endpoint);
    process.on('warning', onWarning);
  });
  after(async function () {
    process.off('warning', onWarning);
    await harness?.stop();
    await endpoint?.stop();
  });

  it(`${LEADS} deliveries, 16 at a time: no signal has more than one abort listener, none is kept once they end, and Node warns of no leak`, async function () {
    const leadIds: number[] = [];
    for (let i = 0; i < LEADS; i++) leadIds.push((await harness.sell({ zip: '90210' })).leadId);
    await harness.svc.service.projections.waitFor(await harness.svc.service.store.headPosition());
    // The sales are all due before the worker starts: it fills its 16 slots at once.
    const worker = harness.worker();
    let mostInFlight = 0;
    let mostListeners = 0;
    const sample = () => {
      const signals = worker.signalsInFlight();
      mostInFlight = Math.max(mostInFlight, signals.length);
      for (const signal of signals) mostListeners = Math.max(mostListeners, getEventListeners(signal, 'abort').length);
    };
    await until(
      () => {
        sample();
        return leadIds.every((leadId) => endpoint.forLead(leadId).length === 1);
      },
      60_000,
      () => 'every lead delivered',
    );
    await until(async () => (await harness.ofType(leadIds.at(-1)!, 'LeadDelivered')).length === 1, 10_000, () => 'the last delivery recorded');
    await until(() => (sample(), worker.signalsInFlight().length === 0), 10_000, () => 'no attempt in flight');
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message)).to.deep.equal([]);
    // Many attempts ran at once, each under a signal only its own request listened to.
    expect(mostInFlight).to.be.greaterThan(10);
    expect(mostListeners).to.be.at.most(1);
  });
});

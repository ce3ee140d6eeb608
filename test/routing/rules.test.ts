import { expect } from 'chai';
import { type CandidateDecision, capReached, chooseBucket, evaluateBuyers, rankEligible } from '../../src/routing/rules.js';
import { aLead, anEnrichment, routing } from './fixtures.js';

// A Wednesday, 10:00 in Los Angeles.
const WEDNESDAY_10_LA = new Date('2026-11-18T18:00:00Z');

describe('evaluating buyers for a lead', function () {
  it('given a buyer with no filters, when evaluated, then it is eligible at its price', function () {
    const config = routing({ buyers: [{ id: 'nationwide-leads', price: 12.75 }] });

    expect(evaluateBuyers(config, aLead(), anEnrichment(), WEDNESDAY_10_LA)).to.deep.equal([
      { buyer: 'nationwide-leads', price: 12.75, eligible: true, reason: 'eligible' },
    ]);
  });

  it('given one buyer per skip reason, when evaluated, then each gets its reason, in file order', function () {
    const config = routing({
      buyers: [
        { id: 'paused', price: 50, active: false },
        { id: 'texas-only', price: 40, states: ['TX', 'FL'] },
        { id: 'san-diego', price: 30, zip_prefixes: ['919', '921'] },
        { id: 'strict', price: 25, require: { phone: 'pass' } },
        { id: 'night-desk', price: 20, hours: { tz: 'America/Los_Angeles', start: '20:00', end: '06:00' } },
        { id: 'nationwide-leads', price: 10 },
      ],
    });

    const decisions = evaluateBuyers(config, aLead(), anEnrichment({ phone: 'unknown' }), WEDNESDAY_10_LA);

    expect(decisions).to.deep.equal([
      { buyer: 'paused', price: 50, eligible: false, reason: 'inactive' },
      { buyer: 'texas-only', price: 40, eligible: false, reason: 'state_not_allowed', detail: 'state:CA' },
      { buyer: 'san-diego', price: 30, eligible: false, reason: 'zip_not_allowed' },
      { buyer: 'strict', price: 25, eligible: false, reason: 'requirement_failed', detail: 'phone:unknown' },
      { buyer: 'night-desk', price: 20, eligible: false, reason: 'outside_hours', detail: 'wed 10:00 America/Los_Angeles' },
      { buyer: 'nationwide-leads', price: 10, eligible: true, reason: 'eligible' },
    ]);
  });

  it('given a buyer failing every filter, when evaluated, then only the first reason in check order is given', function () {
    const config = routing({
      buyers: [
        { id: 'a', price: 1, active: false, states: ['TX'] },
        { id: 'b', price: 1, states: ['TX'], zip_prefixes: ['7'] },
        { id: 'c', price: 1, zip_prefixes: ['7'], require: { email: 'pass' } },
        { id: 'd', price: 1, require: { email: 'pass' }, hours: { tz: 'UTC', days: ['sun'], start: '00:00', end: '01:00' } },
      ],
    });

    const reasons = evaluateBuyers(config, aLead(), anEnrichment({ email: 'fail' }), WEDNESDAY_10_LA).map((d) => d.reason);

    expect(reasons).to.deep.equal(['inactive', 'state_not_allowed', 'zip_not_allowed', 'requirement_failed']);
  });

  it('given a matching state and ZIP prefix, when evaluated, then the buyer is eligible', function () {
    const config = routing({ buyers: [{ id: 'acme-law', price: 42.5, states: ['CA', 'NV'], zip_prefixes: ['90', '91'] }] });

    expect(evaluateBuyers(config, aLead({ accident_state: 'NV', zip: '91001' }), anEnrichment(), WEDNESDAY_10_LA)[0]).to.include({ eligible: true, reason: 'eligible' });
  });

  describe('requirements', function () {
    const config = routing({
      buyers: [
        { id: 'needs-pass', price: 1, require: { phone: 'pass' } },
        { id: 'needs-not-fail', price: 1, require: { phone: 'not_fail' } },
        { id: 'no-requirement', price: 1 },
      ],
    });
    const outcomes = (phone: 'pass' | 'fail' | 'unknown') =>
      evaluateBuyers(config, aLead(), anEnrichment({ phone }), WEDNESDAY_10_LA).map((d) => [d.buyer, d.reason, d.detail]);

    it("given phone pass, when evaluated, then 'pass' and 'not_fail' both accept", function () {
      expect(outcomes('pass')).to.deep.equal([['needs-pass', 'eligible', undefined], ['needs-not-fail', 'eligible', undefined], ['no-requirement', 'eligible', undefined]]);
    });

    it("given phone unknown, when evaluated, then 'pass' refuses and 'not_fail' accepts", function () {
      expect(outcomes('unknown')).to.deep.equal([['needs-pass', 'requirement_failed', 'phone:unknown'], ['needs-not-fail', 'eligible', undefined], ['no-requirement', 'eligible', undefined]]);
    });

    it("given phone fail, when evaluated, then both refuse and a buyer without requirements accepts", function () {
      expect(outcomes('fail')).to.deep.equal([['needs-pass', 'requirement_failed', 'phone:fail'], ['needs-not-fail', 'requirement_failed', 'phone:fail'], ['no-requirement', 'eligible', undefined]]);
    });

    it('given several failed requirements, when evaluated, then the detail lists each in phone, email, consent order', function () {
      const strict = routing({ buyers: [{ id: 'acme-law', price: 42.5, require: { consent: 'pass', email: 'not_fail', phone: 'pass' } }] });

      const [decision] = evaluateBuyers(strict, aLead(), anEnrichment({ phone: 'unknown', email: 'pass', consent: 'fail' }), WEDNESDAY_10_LA);

      expect(decision).to.deep.equal({ buyer: 'acme-law', price: 42.5, eligible: false, reason: 'requirement_failed', detail: 'phone:unknown,consent:fail' });
    });
  });

  it('given a full cap found by the caller, when marked, then the decision says cap_reached with the cap', function () {
    const eligible: CandidateDecision = { buyer: 'acme-law', price: 42.5, eligible: true, reason: 'eligible' };

    expect(capReached(eligible, { period: 'day', max: 100 })).to.deep.equal({ buyer: 'acme-law', price: 42.5, eligible: false, reason: 'cap_reached', detail: 'day cap 100' });
  });
});

describe('ranking eligible buyers', function () {
  const buyers = [
    { id: 'a', price: 30, priority: 5 },
    { id: 'b', price: 45, priority: 9 },
    { id: 'c', price: 30, priority: 2 },
    { id: 'd', price: 30, priority: 2 },
    { id: 'e', price: 99, priority: 1, active: false },
  ];
  const rank = (strategy: string, lastSold: ReadonlyMap<string, number> = new Map()) => {
    const config = routing({ strategy, buyers });
    return rankEligible(config, evaluateBuyers(config, aLead(), anEnrichment(), WEDNESDAY_10_LA), lastSold);
  };

  it('given highest_price, when ranked, then price goes first, ties by priority then file order, ineligible left out', function () {
    expect(rank('highest_price')).to.deep.equal(['b', 'c', 'd', 'a']);
  });

  it('given priority, when ranked, then lower priority goes first, ties by file order', function () {
    expect(rank('priority')).to.deep.equal(['c', 'd', 'a', 'b']);
  });

  it('given round_robin, when ranked, then the buyer whose last lead is longest ago goes first, those never sold in file order', function () {
    expect(rank('round_robin')).to.deep.equal(['a', 'b', 'c', 'd']);
    expect(rank('round_robin', new Map([['a', 0]]))).to.deep.equal(['b', 'c', 'd', 'a']);
    expect(rank('round_robin', new Map([['a', 0], ['b', 1], ['c', 2], ['d', 3]]))).to.deep.equal(['a', 'b', 'c', 'd']);
    expect(rank('round_robin', new Map([['a', 7], ['b', 1], ['c', 2], ['d', 3]]))).to.deep.equal(['b', 'c', 'd', 'a']);
    // A buyer not eligible now (e) is left out, whenever it last sold.
    expect(rank('round_robin', new Map([['e', -5]]))).to.deep.equal(['a', 'b', 'c', 'd']);
  });

  it('given decisions in another order than the file, when ranked, then file order still breaks ties', function () {
    const config = routing({ strategy: 'priority', buyers: [{ id: 'x', price: 1 }, { id: 'y', price: 1 }] });
    const decisions: CandidateDecision[] = [
      { buyer: 'y', price: 1, eligible: true, reason: 'eligible' },
      { buyer: 'x', price: 1, eligible: true, reason: 'eligible' },
    ];

    expect(rankEligible(config, decisions)).to.deep.equal(['x', 'y']);
  });

  it('given a buyer marked cap_reached, when ranked, then it is left out', function () {
    const config = routing({ buyers: [{ id: 'x', price: 1 }, { id: 'y', price: 2 }] });
    const [x, y] = evaluateBuyers(config, aLead(), anEnrichment(), WEDNESDAY_10_LA);

    expect(rankEligible(config, [x!, capReached(y!, { period: 'hour', max: 0 })])).to.deep.equal(['x']);
  });

  it('given no eligible buyer, when ranked with any strategy, then the list is empty', function () {
    for (const strategy of ['highest_price', 'priority', 'round_robin']) {
      const config = routing({ strategy, buyers: [{ id: 'x', price: 1, active: false }] });
      expect(rankEligible(config, evaluateBuyers(config, aLead(), anEnrichment(), WEDNESDAY_10_LA), new Map([['x', 3]]))).to.deep.equal([]);
    }
  });
});

describe('choosing a bucket for an unsold lead', function () {
  const config = routing({
    buyers: [],
    buckets: [
      { id: 'unsold', default: true },
      { id: 'unsold-tx', states: ['TX'] },
      { id: 'unsold-fl-miami', states: ['FL'], zip_prefixes: ['331', '332'] },
      { id: 'unsold-east', states: ['FL', 'GA'] },
    ],
  });

  it('given a TX lead, when a bucket is chosen, then it is unsold-tx even though the default is listed first', function () {
    expect(chooseBucket(config, aLead({ accident_state: 'TX', zip: '75001' }))).to.equal('unsold-tx');
  });

  it('given a CA lead, when a bucket is chosen, then no filter matches and it is the default', function () {
    expect(chooseBucket(config, aLead())).to.equal('unsold');
  });

  it('given a Miami lead, when a bucket is chosen, then the first bucket matching state and ZIP wins', function () {
    expect(chooseBucket(config, aLead({ accident_state: 'FL', zip: '33101' }))).to.equal('unsold-fl-miami');
  });

  it('given a FL lead outside the Miami prefixes, when a bucket is chosen, then the next matching bucket wins', function () {
    expect(chooseBucket(config, aLead({ accident_state: 'FL', zip: '32801' }))).to.equal('unsold-east');
  });

  it('given a non-default bucket without filters, when a bucket is chosen, then it takes every lead that reaches it', function () {
    const catchAll = routing({ buyers: [], buckets: [{ id: 'unsold-tx', states: ['TX'] }, { id: 'everything-else' }, { id: 'unsold', default: true }] });

    expect([chooseBucket(catchAll, aLead({ accident_state: 'TX' })), chooseBucket(catchAll, aLead())]).to.deep.equal(['unsold-tx', 'everything-else']);
  });

  it('given no buckets in the file, when a bucket is chosen, then it is the implicit unsold', function () {
    expect(chooseBucket(routing({ buyers: [] }), aLead())).to.equal('unsold');
  });
});

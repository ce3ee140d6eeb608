import { expect } from 'chai';
import type { Hours } from '../../src/routing/load-config.js';
import { localTime, zonesKept } from '../../src/routing/local-time.js';
import { capPeriods, isWithinHours } from '../../src/routing/rules.js';
import { routing } from './fixtures.js';

const LA = 'America/Los_Angeles';
const within = (hours: Hours, instants: string[]) => instants.map((iso) => isWithinHours(hours, new Date(iso)));

describe('business hours', function () {
  const weekdays: Hours = { tz: LA, days: ['mon', 'tue', 'wed', 'thu', 'fri'], start: '08:00', end: '18:00' };

  it('given 08:00-18:00 LA, when DST starts (2026-03-08), then the window opens at 16:00Z before and 15:00Z after', function () {
    expect(within(weekdays, [
      '2026-03-06T15:59:00Z', // Fri 07:59 PST
      '2026-03-06T16:00:00Z', // Fri 08:00 PST
      '2026-03-09T14:59:00Z', // Mon 07:59 PDT
      '2026-03-09T15:00:00Z', // Mon 08:00 PDT
    ])).to.deep.equal([false, true, false, true]);
  });

  it('given 08:00-18:00 LA, when DST ends (2026-11-01), then the window closes at 01:00Z before and 02:00Z after', function () {
    expect(within(weekdays, [
      '2026-10-31T00:59:00Z', // Fri 17:59 PDT
      '2026-10-31T01:00:00Z', // Fri 18:00 PDT
      '2026-11-03T01:59:00Z', // Mon 17:59 PST
      '2026-11-03T02:00:00Z', // Mon 18:00 PST
    ])).to.deep.equal([true, false, true, false]);
  });

  it('given a Saturday-only whole-day window, when the LA day turns, then it opens at Sat 00:00 and closes at Sun 00:00', function () {
    const saturday: Hours = { tz: LA, days: ['sat'], start: '00:00', end: '24:00' };

    expect(within(saturday, [
      '2026-11-21T07:59:00Z', // Fri 23:59 PST
      '2026-11-21T08:00:00Z', // Sat 00:00
      '2026-11-22T07:59:00Z', // Sat 23:59
      '2026-11-22T08:00:00Z', // Sun 00:00
    ])).to.deep.equal([false, true, true, false]);
  });

  it('given a weekday window, when it is Saturday in UTC but still Friday in LA, then the LA weekday decides', function () {
    expect(within(weekdays, ['2026-11-21T01:30:00Z'])).to.deep.equal([true]); // Fri 17:30 PST, Sat in UTC
  });

  it('given a Friday overnight window 22:00-06:00, when checked around it, then it runs into Saturday morning only', function () {
    const fridayNight: Hours = { tz: LA, days: ['fri'], start: '22:00', end: '06:00' };

    expect(within(fridayNight, [
      '2026-11-20T10:00:00Z', // Fri 02:00 (Thursday's night, not listed)
      '2026-11-21T05:59:00Z', // Fri 21:59
      '2026-11-21T06:00:00Z', // Fri 22:00
      '2026-11-21T10:00:00Z', // Sat 02:00
      '2026-11-21T13:59:00Z', // Sat 05:59
      '2026-11-21T14:00:00Z', // Sat 06:00
      '2026-11-22T06:00:00Z', // Sat 22:00 (Saturday not listed)
    ])).to.deep.equal([false, false, true, true, true, false, false]);
  });

  it('given an overnight window across the spring-forward night, when the clock skips 02:00, then 03:00 local is still inside', function () {
    const nights: Hours = { tz: LA, days: ['sat'], start: '22:00', end: '04:00' };

    expect(within(nights, [
      '2026-03-08T09:59:00Z', // Sun 01:59 PST
      '2026-03-08T10:00:00Z', // Sun 03:00 PDT
      '2026-03-08T10:59:00Z', // Sun 03:59 PDT
      '2026-03-08T11:00:00Z', // Sun 04:00 PDT
    ])).to.deep.equal([true, true, true, false]);
  });
});

describe('cap periods', function () {
  const keys = (caps: object[], iso: string) => {
    const [buyer] = routing({ buyers: [{ id: 'acme-law', price: 42.5, caps }] }).buyers;
    return capPeriods(buyer!, new Date(iso)).map((p) => p.key);
  };

  it('given caps in several zones, when periods are computed, then each key is in its own zone', function () {
    const [buyer] = routing({
      buyers: [{
        id: 'acme-law', price: 42.5,
        caps: [
          { period: 'hour', max: 10 },
          { period: 'day', max: 100, tz: LA },
          { period: 'week', max: 400, tz: LA },
          { period: 'month', max: 1500, tz: 'Asia/Tokyo' },
          { period: 'hour', max: 5, tz: 'Asia/Kolkata' },
          { period: 'day', max: 200 },
        ],
      }],
    }).buyers;

    expect(capPeriods(buyer!, new Date('2026-11-22T02:30:00Z'))).to.deep.equal([
      { index: 0, period: 'hour', max: 10, tz: 'UTC', key: '2026-11-22T02' },
      { index: 1, period: 'day', max: 100, tz: LA, key: '2026-11-21' },
      { index: 2, period: 'week', max: 400, tz: LA, key: '2026-W47' },
      { index: 3, period: 'month', max: 1500, tz: 'Asia/Tokyo', key: '2026-11' },
      { index: 4, period: 'hour', max: 5, tz: 'Asia/Kolkata', key: '2026-11-22T08' },
      { index: 5, period: 'day', max: 200, tz: 'UTC', key: '2026-11-22' },
    ]);
  });

  it('given a buyer without caps, when periods are computed, then there are none', function () {
    expect(keys([], '2026-11-22T02:30:00Z')).to.deep.equal([]);
  });

  it('given the first evening of December in LA, when month periods are computed, then LA is still in November', function () {
    expect(keys([{ period: 'month', max: 1, tz: LA }, { period: 'month', max: 1 }], '2026-12-01T03:00:00Z')).to.deep.equal(['2026-11', '2026-12']);
  });

  it('given the turn of 2026 into 2027, when week periods are computed, then the days stay in ISO week 2026-W53 until Monday', function () {
    const week = [{ period: 'week', max: 1 }];

    expect([
      keys(week, '2026-12-28T12:00:00Z'), // Mon
      keys(week, '2026-12-31T12:00:00Z'), // Thu
      keys(week, '2027-01-01T12:00:00Z'), // Fri
      keys(week, '2027-01-03T23:59:00Z'), // Sun
      keys(week, '2027-01-04T00:00:00Z'), // Mon
    ]).to.deep.equal([['2026-W53'], ['2026-W53'], ['2026-W53'], ['2026-W53'], ['2027-W01']]);
  });

  it('given 2021-01-03, when the week period is computed, then it is 2020-W53', function () {
    expect(keys([{ period: 'week', max: 1 }], '2021-01-03T12:00:00Z')).to.deep.equal(['2020-W53']);
  });

  it('given Monday morning in UTC that is Sunday evening in LA, when week periods are computed, then LA is a week behind', function () {
    expect(keys([{ period: 'week', max: 1, tz: LA }, { period: 'week', max: 1 }], '2027-01-04T05:00:00Z')).to.deep.equal(['2026-W53', '2027-W01']);
  });

  it('given the LA fall-back night, when hour periods are computed, then both 01:00 hours share one key', function () {
    const hour = [{ period: 'hour', max: 1, tz: LA }];

    expect([
      keys(hour, '2026-11-01T07:59:00Z'), // 00:59 PDT
      keys(hour, '2026-11-01T08:30:00Z'), // 01:30 PDT
      keys(hour, '2026-11-01T09:30:00Z'), // 01:30 PST
      keys(hour, '2026-11-01T10:00:00Z'), // 02:00 PST
    ]).to.deep.equal([['2026-11-01T00'], ['2026-11-01T01'], ['2026-11-01T01'], ['2026-11-01T02']]);
  });

  it('given the LA spring-forward night, when hour periods are computed, then 01:59 is followed by 03:00', function () {
    const hour = [{ period: 'hour', max: 1, tz: LA }];

    expect([keys(hour, '2026-03-08T09:59:00Z'), keys(hour, '2026-03-08T10:00:00Z')]).to.deep.equal([['2026-03-08T01'], ['2026-03-08T03']]);
  });

  it('given midnight UTC, when an hour period is computed, then the hour is 00, never 24', function () {
    expect(keys([{ period: 'hour', max: 1 }], '2026-11-22T00:00:00Z')).to.deep.equal(['2026-11-22T00']);
  });
});

// A report's `tz` comes from its caller, spelt in any mix of cases: each spelling was a formatter
// kept for good, its memory outside the heap's limit, so that any key could grow the process
// without end.
describe('the zones kept for local times', function () {
  it('stay bounded however many spellings of a zone are asked for, and each still answers its zone', function () {
    const now = new Date('2026-11-01T06:30:00Z');
    const spelt = (i: number) => [...'America/Argentina/ComodRivadavia'].map((c, j) => ((i >> (j % 24)) & 1 ? c.toUpperCase() : c.toLowerCase())).join('');
    for (let i = 0; i < 2_000; i++) expect(localTime(now, spelt(i)).hour, spelt(i)).to.equal(3);
    expect(zonesKept()).to.be.at.most(512);
    expect(localTime(now, LA)).to.include({ day: 31, hour: 23 });
  });
});

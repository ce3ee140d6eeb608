import { expect } from 'chai';
import { type ReportBucket, addDays, compareKeys, dayOf, daySteps, firstHourOfLocalDay, keyOrder, startOfLocalDay, summarise, toCsv } from '../../src/read-models/report.js';

const bucket = (hour: string, counters: Partial<ReportBucket>, dims: Partial<ReportBucket> = {}): ReportBucket => ({
  hour, supplier: 'sup-a', sid: 'google', s1: null, state: 'CA', buyer: null, test: false, ...dims, ...counters,
});

describe('report summary (pure)', function () {
  it('a UTC hour falls on the local day of the report time zone', function () {
    const cache = new Map<string, string>();
    expect(dayOf('2026-11-22T02', 'America/Los_Angeles', cache)).to.equal('2026-11-21');
    expect(dayOf('2026-11-22T02', 'UTC', new Map())).to.equal('2026-11-22');
    expect(dayOf('2026-11-21T23', 'Asia/Tokyo', new Map())).to.equal('2026-11-22');
  });

  it('local midnight in UTC, also on a DST change day', function () {
    const cases: Array<[string, string, string]> = [
      ['UTC', '2026-11-21', '2026-11-21T00:00:00.000Z'],
      ['America/Los_Angeles', '2026-11-21', '2026-11-21T08:00:00.000Z'],
      // New York springs forward at 02:00 on 03-08 and falls back at 02:00 on 11-01: midnight itself is untouched.
      ['America/New_York', '2026-03-08', '2026-03-08T05:00:00.000Z'],
      ['America/New_York', '2026-03-09', '2026-03-09T04:00:00.000Z'],
      ['America/New_York', '2026-11-01', '2026-11-01T04:00:00.000Z'],
      ['America/New_York', '2026-11-02', '2026-11-02T05:00:00.000Z'],
      // Far from UTC on both sides of the date line.
      ['Pacific/Kiritimati', '2026-11-21', '2026-11-20T10:00:00.000Z'],
      ['Pacific/Pago_Pago', '2026-11-21', '2026-11-21T11:00:00.000Z'],
      // Off the hour: the day starts at local midnight, though no hour bucket does.
      ['Asia/Kathmandu', '2026-11-01', '2026-10-31T18:15:00.000Z'],
      ['Asia/Kolkata', '2026-03-08', '2026-03-07T18:30:00.000Z'],
    ];
    for (const [tz, day, start] of cases) expect(startOfLocalDay(day, tz).toISOString(), `${tz} ${day}`).to.equal(start);
  });

  it('a day whose midnight a DST change skips starts at the first local time it has; a midnight that comes twice, at the first', function () {
    const cases: Array<[string, string, string]> = [
      // 23:59 -04 is followed by 01:00 -03: the day starts at 01:00.
      ['America/Santiago', '2026-09-06', '2026-09-06T04:00:00.000Z'],
      ['America/Santiago', '2026-09-05', '2026-09-05T04:00:00.000Z'],
      ['America/Santiago', '2026-09-07', '2026-09-07T03:00:00.000Z'],
      ['America/Havana', '2026-03-08', '2026-03-08T05:00:00.000Z'],
      ['America/Havana', '2026-03-07', '2026-03-07T05:00:00.000Z'],
      ['Atlantic/Azores', '2026-03-29', '2026-03-29T01:00:00.000Z'],
      ['Atlantic/Azores', '2026-03-28', '2026-03-28T01:00:00.000Z'],
      // Clocks back from 01:00 to 00:00 (Havana, Azores): midnight twice, the day starts at the first.
      ['America/Havana', '2026-11-01', '2026-11-01T04:00:00.000Z'],
      ['Atlantic/Azores', '2026-10-25', '2026-10-25T00:00:00.000Z'],
      // Clocks back from 00:00 to 23:00 (Santiago): 23:00 twice on the 4th, midnight once.
      ['America/Santiago', '2026-04-05', '2026-04-05T04:00:00.000Z'],
    ];
    for (const [tz, day, start] of cases) {
      expect(startOfLocalDay(day, tz).toISOString(), `${tz} ${day}`).to.equal(start);
      // The hour bucket that starts the day is labelled with it, the one before with the day before.
      const first = firstHourOfLocalDay(day, tz);
      const before = new Date(Date.parse(`${first}:00:00Z`) - 3_600_000).toISOString().slice(0, 13);
      expect([dayOf(before, tz, new Map()), dayOf(first, tz, new Map())], `${tz} ${day}`).to.deep.equal([addDays(day, -1), day]);
    }
  });

  it('the first hour bucket of a local day is the first whole UTC hour that starts on it', function () {
    expect(firstHourOfLocalDay('2026-11-21', 'UTC')).to.equal('2026-11-21T00');
    expect(firstHourOfLocalDay('2026-11-21', 'America/New_York')).to.equal('2026-11-21T05');
    expect(firstHourOfLocalDay('2026-09-06', 'America/Santiago')).to.equal('2026-09-06T04');
    // Kathmandu (+05:45) starts 11-01 at 18:15Z: the 18Z hour starts at 23:45 on 10-31, so 19Z is the first of 11-01.
    expect(firstHourOfLocalDay('2026-11-01', 'Asia/Kathmandu')).to.equal('2026-10-31T19');
    expect(dayOf('2026-10-31T18', 'Asia/Kathmandu', new Map())).to.equal('2026-10-31');
    expect(dayOf('2026-10-31T19', 'Asia/Kathmandu', new Map())).to.equal('2026-11-01');
    expect(firstHourOfLocalDay('2026-03-08', 'Asia/Kolkata')).to.equal('2026-03-07T19');
  });

  it('day steps label every hour of a report exactly as dayOf does, one step a day from..to, across DST changes and odd offsets', function () {
    const zones = ['UTC', 'America/New_York', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/Santiago', 'America/Havana', 'Atlantic/Azores', 'Australia/Lord_Howe', 'Pacific/Kiritimati', 'Pacific/Pago_Pago'];
    for (const tz of zones) {
      for (const [from, to] of [['2026-03-05', '2026-04-10'], ['2026-08-25', '2026-11-05']] as const) {
        const start = firstHourOfLocalDay(from, tz);
        const end = firstHourOfLocalDay(addDays(to, 1), tz);
        const steps = daySteps(start, end, tz);
        expect(steps[0]!.from).to.equal(start);
        const cache = new Map<string, string>();
        for (let t = Date.parse(`${start}:00:00Z`); ; t += 3_600_000) {
          const hour = new Date(t).toISOString().slice(0, 13);
          if (hour >= end) break;
          const step = steps.filter((s) => s.from <= hour).at(-1)!;
          expect(step.label, `${tz} ${hour}`).to.equal(dayOf(hour, tz, cache));
        }
        // Exactly the days asked for, each once, in order.
        const days = Array.from({ length: (Date.parse(to) - Date.parse(from)) / 86_400_000 + 1 }, (_, i) => addDays(from, i));
        expect(steps.map((s) => s.label), tz).to.deep.equal(days);
      }
    }
  });

  it('rows come in key order: s1 first when grouped by it, null before any value, code points not locale', function () {
    expect(keyOrder(['day', 'sid', 's1'])).to.deep.equal(['s1', 'day', 'sid']);
    expect(keyOrder(['buyer', 'day'])).to.deep.equal(['buyer', 'day']);
    const keys = [['b'], ['B'], [null], ['é'], ['a', 'z'], ['a', null]];
    expect(keys.sort(compareKeys)).to.deep.equal([[null], ['B'], ['a', null], ['a', 'z'], ['b'], ['é']]);
  });

  const NO_PINGS_REJECTED = { rejected_SUPPRESSED: 0, rejected_PING_EXPIRED: 0, rejected_PING_CONSUMED: 0, rejected_PING_MISMATCH: 0 };
  const NO_PINGS = { pings: 0, bids: 0, ping_posts: 0 };

  it('sums counters per group and derives rates, revenue, returns and average price', function () {
    const rows = summarise(
      [
        bucket('2026-11-21T15', { received: 3, accepted: 2, sold: 2, rejected: 1, rejected_INVALID: 1, revenue_cents: 8500, returned: 1, returned_cents: 4250 }, { buyer: 'acme' }),
        bucket('2026-11-21T16', { received: 2, accepted: 2, unsold: 2 }),
        bucket('2026-11-21T16', { received: 1, accepted: 1, sold: 1, revenue_cents: 1275 }, { sid: 'bing', buyer: 'natl' }),
      ],
      ['sid'],
      'UTC',
    );
    expect(rows).to.deep.equal([
      { sid: 'bing', received: 1, accepted: 1, sold: 1, unsold: 0, rejected: 0, rejected_INVALID: 0, rejected_VERIFICATION_FAILED: 0, rejected_DUPLICATE: 0, ...NO_PINGS_REJECTED, returned: 0, ...NO_PINGS, revenue: 12.75, net_revenue: 12.75, acceptance_rate: 1, sell_rate: 1, avg_price: 12.75, avg_bid: 0 },
      { sid: 'google', received: 5, accepted: 4, sold: 2, unsold: 2, rejected: 1, rejected_INVALID: 1, rejected_VERIFICATION_FAILED: 0, rejected_DUPLICATE: 0, ...NO_PINGS_REJECTED, returned: 1, ...NO_PINGS, revenue: 85, net_revenue: 42.5, acceptance_rate: 0.8, sell_rate: 0.5, avg_price: 42.5, avg_bid: 0 },
    ]);
  });

  it('counts pings, bids and ping posts, and averages the bids', function () {
    const rows = summarise(
      [
        bucket('2026-11-21T15', { pings: 3 }),
        bucket('2026-11-21T15', { bids: 2, bid_cents: 7500 }, { buyer: 'acme' }),
        bucket('2026-11-21T16', { bids: 1, bid_cents: 2000, ping_posts: 1 }, { buyer: 'natl' }),
      ],
      ['buyer'],
      'UTC',
    );
    expect(rows.map((r) => [r.buyer, r.pings, r.bids, r.ping_posts, r.avg_bid])).to.deep.equal([
      [null, 3, 0, 0, 0],
      ['acme', 0, 2, 0, 37.5],
      ['natl', 0, 1, 1, 20],
    ]);
  });

  it('groups by day in the time zone, and by nothing at all', function () {
    const buckets = [bucket('2026-11-22T02', { received: 1 }), bucket('2026-11-22T09', { received: 2 })];
    expect(summarise(buckets, ['day'], 'America/Los_Angeles').map((r) => [r.day, r.received])).to.deep.equal([
      ['2026-11-21', 1],
      ['2026-11-22', 2],
    ]);
    expect(summarise(buckets, [], 'UTC').map((r) => r.received)).to.deep.equal([3]);
  });

  it('CSV quotes what needs quoting and defuses spreadsheet formulas', function () {
    const csv = toCsv([{ sid: '=HYPERLINK("x")', received: 1 }], ['sid']);
    const [, line] = csv.split('\r\n');
    expect(line!.startsWith(`"'=HYPERLINK(""x"")",1,`)).to.equal(true);
  });
});

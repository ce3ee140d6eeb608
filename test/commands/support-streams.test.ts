import { expect } from 'chai';
import { hash } from 'node:crypto';
import { CapLedger, capDecider } from '../../src/commands/caps.js';
import { readFolded } from '../../src/commands/handler.js';
import { CLAIM_IN_FLIGHT_MS, ContactRegistry, SAME_PROCESS_WAIT_MS } from '../../src/commands/contacts.js';
import { ContactHashes, idempotencyNames } from '../../src/personal-data/contact-hashes.js';
import { IDEMPOTENCY_TTL_MS, IdempotencyKeys, plainIdempotencyStream } from '../../src/commands/idempotency.js';
import { LeadIdAllocator, LeadIdBlocksDamagedError } from '../../src/commands/lead-ids.js';
import { EmbeddedEventStore } from '../../src/event-store/embedded/embedded-event-store.js';
import type { EventStore } from '../../src/event-store/index.js';
import { EventStoreUnavailableError } from '../../src/event-store/port.js';
import type { IdempotentAnswer } from '../../src/commands/idempotency.js';
import { overriding } from '../support/overriding.js';
import { tempDir } from '../support/tmp.js';
import { until } from '../support/until.js';

const HASHES = ContactHashes.withSecret(Buffer.alloc(32, 9));
const contactStream = (kind: 'mobile' | 'email', value: string) => HASHES.stream(kind, value);

describe('support streams (on the embedded store)', function () {
  const dir = tempDir('support');
  let store: EventStore;
  before(async () => (store = await EmbeddedEventStore.open(dir.path)));
  after(async () => {
    await store.close();
    dir.remove();
  });
  const now = new Date('2026-11-21T15:00:00Z');

  /** The store, counting the reads of each stream. */
  function countingReads(): { store: EventStore; reads: Map<string, number> } {
    const reads = new Map<string, number>();
    const counted = overriding(store, {
      readStream: (name, options) => {
        reads.set(name, (reads.get(name) ?? 0) + 1);
        return store.readStream(name, options);
      },
    });
    return { store: counted, reads };
  }

  describe('lead ids (HiLo)', function () {
    it('hands out small unique ids from blocks; two allocators never share one', async function () {
      const a = new LeadIdAllocator(store, 10, 'a');
      const b = new LeadIdAllocator(store, 10, 'b');
      const ids = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 ? a : b).nextId()));
      expect(new Set(ids).size).to.equal(60);
      expect(Math.min(...ids)).to.equal(1);
      expect(Math.max(...ids)).to.be.at.most(70);
      const blocks = await store.readStream('lead-id-blocks');
      expect(blocks.length).to.be.within(6, 7);
    });

    it('a reservation with no whole-number range (a damaged or hand-made event) is refused, never folded into ids that are not numbers', async function () {
      const damaged = tempDir('lead-ids-damaged');
      const events = await EmbeddedEventStore.open(damaged.path);
      try {
        await events.append('lead-id-blocks', [{ type: 'LeadIdBlockReserved', data: { first: 1, last: 100, instance: 'old' } }]);
        let refused: unknown;
        await new LeadIdAllocator(events, 10, 'a').nextId().catch((error: unknown) => (refused = error));
        expect(refused).to.be.instanceOf(LeadIdBlocksDamagedError);
        expect((refused as Error).message).to.include('lead-id-blocks').and.include('"to"');
        expect(await events.readStream('lead-id-blocks')).to.have.length(1);
      } finally {
        await events.close();
        damaged.remove();
      }
    });
  });

  describe('contacts (duplicates)', function () {
    it('names streams by a keyed hash, never by the value, apart per kind and per secret', function () {
      expect(contactStream('mobile', '+12025550143')).to.match(/^contact-[0-9a-f]{64}$/);
      expect(contactStream('mobile', '+12025550143')).to.not.contain('2025550143');
      expect(contactStream('email', 'x')).to.not.equal(contactStream('mobile', 'x'));
      // Without the secret, hashing every phone number does not find the stream.
      expect(contactStream('mobile', '+12025550143')).to.not.equal(`contact-${hash('sha256', 'mobile\n+12025550143', 'hex')}`);
      expect(ContactHashes.withSecret(Buffer.alloc(32, 1)).stream('mobile', '+12025550143')).to.not.equal(contactStream('mobile', '+12025550143'));
    });

    it('of 20 concurrent claims on one contact exactly one wins', async function () {
      const registry = new ContactRegistry(store, HASHES);
      const claiming = Array.from({ length: 20 }, (_, i) => registry.claim([['mobile', '+13105550100'], ['email', `x${i}@example.com`]], 1000 + i, now, 30));
      const outcomes: Array<Awaited<(typeof claiming)[number]>> = [];
      claiming.forEach((claim, i) => void claim.then((outcome) => (outcomes[i] = outcome)));
      // The others wait for the winner's post to end, and find its lead accepted.
      const winner = (await until('a claim won', async () => outcomes.findIndex((outcome) => outcome !== undefined && 'claims' in outcome) + 1)) - 1;
      await store.append(`lead-${1000 + winner}`, [{ type: 'LeadReceived', data: { lead_id: 1000 + winner } }, { type: 'LeadSold', data: { lead_id: 1000 + winner } }]);
      registry.ended(1000 + winner);
      const results = await Promise.all(claiming);
      expect(results.filter((r) => 'claims' in r)).to.have.length(1);
      results.forEach((result, i) => expect(result).to.deep.equal(i === winner ? result : { duplicates: ['mobile'] }));
      // The losers gave back the e-mail claims they had not taken and hold nothing.
      for (let i = 0; i < 20; i++) {
        const held = await registry.duplicates([['email', `x${i}@example.com`]], now, 30);
        expect(held.length > 0).to.equal('claims' in results[i]!);
      }
    });

    it('a new contact is claimed without reading its stream; one seen before is read and checked', async function () {
      const { store: counted, reads } = countingReads();
      const registry = new ContactRegistry(counted, HASHES);
      await store.append('lead-7001', [{ type: 'LeadReceived', data: { lead_id: 7001 } }, { type: 'LeadSold', data: { lead_id: 7001 } }]);
      const contacts: Array<['mobile' | 'email', string]> = [['mobile', '+13105550177'], ['email', 'new-7001@example.com']];
      expect(await registry.claim(contacts, 7001, now, 30)).to.have.property('claims').with.length(2);
      expect(reads.get(contactStream('mobile', '+13105550177')) ?? 0).to.equal(0);
      expect(reads.get(contactStream('email', 'new-7001@example.com')) ?? 0).to.equal(0);
      // The same mobile for another lead: the claim as new fails, the stream is read, the holder found.
      expect(await registry.claim([['mobile', '+13105550177']], 7002, now, 30)).to.deep.equal({ duplicates: ['mobile'] });
      expect(reads.get(contactStream('mobile', '+13105550177'))).to.equal(1);
    });

    it("a lead's contacts are claimed side by side, each append under way before the other lands", async function () {
      let inFlight = 0;
      let most = 0;
      const registry = new ContactRegistry(
        overriding(store, {
          append: async (name, events, options) => {
            most = Math.max(most, ++inFlight);
            try {
              return await store.append(name, events, options);
            } finally {
              inFlight -= 1;
            }
          },
        }),
        HASHES,
      );
      const claimed = await registry.claim([['mobile', '+13105550191'], ['email', 'side-7101@example.com']], 7101, now, 30);
      expect(claimed).to.have.property('claims').with.length(2);
      expect(most).to.equal(2);
    });

    const recordLead = (leadId: number, type: string) =>
      store.append(`lead-${leadId}`, [{ type: 'LeadReceived', data: { lead_id: leadId } }, { type, data: { lead_id: leadId } }]);

    it('a claim outside the window or released is no longer a duplicate', async function () {
      const registry = new ContactRegistry(store, HASHES);
      await recordLead(5001, 'LeadSold');
      const claimed = await registry.claim([['email', 'old@example.com']], 5001, now, 30);
      const claims = 'claims' in claimed ? claimed.claims : [];
      expect(claims).to.have.length(1);
      const later = new Date(now.getTime() + 31 * 86_400_000);
      expect(await registry.duplicates([['email', 'old@example.com']], new Date(now.getTime() + 29 * 86_400_000), 30)).to.deep.equal(['email']);
      expect(await registry.duplicates([['email', 'old@example.com']], later, 30)).to.deep.equal([]);
      await registry.release(claims, now);
      expect(await registry.duplicates([['email', 'old@example.com']], now, 30)).to.deep.equal([]);
    });

    it('a claim counts only while its lead is accepted: rejected or never recorded leads do not block', async function () {
      const registry = new ContactRegistry(store, HASHES);
      await recordLead(5002, 'LeadRejected');
      expect(await registry.claim([['email', 'rejected@example.com']], 5002, now, 30)).to.have.property('claims').with.length(1);
      expect(await registry.duplicates([['email', 'rejected@example.com']], now, 30)).to.deep.equal([]);

      // Lead 5003 claimed, its post under way: a look waits for its end (SAME_PROCESS_WAIT_MS at most;
      // here it never comes) and is told to retry; after CLAIM_IN_FLIGHT_MS the claim has lapsed; and as soon as
      // its post ends without recording it (its append failed), it is no duplicate either.
      expect(await registry.claim([['email', 'lost@example.com']], 5003, now, 30)).to.have.property('claims').with.length(1);
      expect(await registry.taken([['email', 'lost@example.com']], new Date(now.getTime() + 5_000), 30)).to.deep.equal({
        duplicates: [],
        pending: { kinds: ['email'], until: now.getTime() + CLAIM_IN_FLIGHT_MS },
      });
      expect(await registry.duplicates([['email', 'lost@example.com']], new Date(now.getTime() + CLAIM_IN_FLIGHT_MS + 1_000), 30)).to.deep.equal([]);
      registry.ended(5003);
      expect(await registry.duplicates([['email', 'lost@example.com']], new Date(now.getTime() + 5_000), 30)).to.deep.equal([]);
    });

    it("another process's claim whose lead is not recorded is pending until it lapses: neither a duplicate nor free, and nothing is claimed", async function () {
      const died = new ContactRegistry(store, HASHES);
      const restarted = new ContactRegistry(store, HASHES);
      const contacts: Array<['mobile' | 'email', string]> = [['mobile', '+13105550193'], ['email', 'cut-5201@example.com']];
      expect(await died.claim(contacts, 5201, now, 30)).to.have.property('claims').with.length(2);
      const at = (ms: number) => new Date(now.getTime() + ms);
      // (In the process that claimed them, a copy beside its post under way waits for its end: below.)
      // Anywhere else (or after a restart), no one can tell: pending until the claims lapse.
      const pending = { duplicates: [], pending: { kinds: ['mobile', 'email'], until: now.getTime() + CLAIM_IN_FLIGHT_MS } };
      expect(await restarted.claim(contacts, 5203, at(2_000), 30)).to.deep.equal(pending);
      expect(await restarted.taken(contacts, at(2_000), 30)).to.deep.equal(pending);
      // A free contact claimed on the way is given back.
      const free: ['mobile' | 'email', string] = ['email', 'free-5204@example.com'];
      expect(await restarted.claim([contacts[0]!, free], 5204, at(3_000), 30)).to.deep.equal({ duplicates: [], pending: { kinds: ['mobile'], until: now.getTime() + CLAIM_IN_FLIGHT_MS } });
      expect(await restarted.taken([free], at(3_000), 30)).to.deep.equal({ duplicates: [] });
      // Lapsed: claimed.
      expect(await restarted.claim(contacts, 5205, at(CLAIM_IN_FLIGHT_MS), 30)).to.have.property('claims').with.length(2);
    });

    describe("a copy posted beside a post of this process that holds the contacts", function () {
      const at = (ms: number) => new Date(now.getTime() + ms);
      const decided = (claim: Promise<unknown>) => {
        let outcome: unknown;
        void claim.then((value) => (outcome = value));
        return () => outcome;
      };

      it('waits for that post to end, and is a duplicate when its lead was accepted', async function () {
        const registry = new ContactRegistry(store, HASHES);
        const contacts: Array<['mobile' | 'email', string]> = [['mobile', '+13105550301'], ['email', 'first-5301@example.com']];
        expect(await registry.claim(contacts, 5301, now, 30)).to.have.property('claims').with.length(2);
        const copy = decided(registry.claim([contacts[0]!, ['email', 'copy-5302@example.com']], 5302, at(500), 30));
        // Still under way: the copy has no answer (it would have been a duplicate at once before).
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect(copy()).to.equal(undefined);
        await recordLead(5301, 'LeadSold');
        registry.ended(5301);
        expect(await until('the copy decided', async () => copy())).to.deep.equal({ duplicates: ['mobile'] });
      });

      it('gets the contacts when that lead was rejected, or not recorded at all', async function () {
        const registry = new ContactRegistry(store, HASHES);
        for (const [first, copyId, rejected] of [
          [5311, 5312, true],
          [5313, 5314, false],
        ] as const) {
          const contacts: Array<['mobile' | 'email', string]> = [['mobile', `+1310555${first}`], ['email', `first-${first}@example.com`]];
          expect(await registry.claim(contacts, first, now, 30)).to.have.property('claims').with.length(2);
          const copy = decided(registry.claim(contacts, copyId, at(500), 30));
          await new Promise((resolve) => setTimeout(resolve, 100));
          expect(copy()).to.equal(undefined);
          if (rejected) await recordLead(first, 'LeadRejected');
          registry.ended(first);
          const outcome = (await until('the copy decided', async () => copy())) as { claims?: unknown[] };
          expect(outcome.claims, rejected ? 'after a rejected lead' : 'after a lead never recorded').to.have.length(2);
        }
      });

      it('waits SAME_PROCESS_WAIT_MS at most, in all: a post still under way after that is pending, so no answer waits for a queue', async function () {
        const registry = new ContactRegistry(store, HASHES);
        const contacts: Array<['mobile' | 'email', string]> = [['mobile', '+13105550341'], ['email', 'slow-5341@example.com']];
        expect(await registry.claim(contacts, 5341, now, 30)).to.have.property('claims').with.length(2);
        const started = Date.now();
        expect(await registry.claim(contacts, 5342, at(500), 30)).to.deep.equal({ duplicates: [], pending: { kinds: ['mobile', 'email'], until: now.getTime() + CLAIM_IN_FLIGHT_MS } });
        // One budget for both contacts, not one each.
        expect(Date.now() - started).to.be.within(SAME_PROCESS_WAIT_MS - 50, SAME_PROCESS_WAIT_MS + 1_000);
        registry.ended(5341);
      });

      it('a look (a test lead) waits too, and finds the contacts free once that post ended rejected', async function () {
        const registry = new ContactRegistry(store, HASHES);
        const contacts: Array<['mobile' | 'email', string]> = [['mobile', '+13105550351'], ['email', 'look-5351@example.com']];
        expect(await registry.claim(contacts, 5351, now, 30)).to.have.property('claims').with.length(2);
        const look = decided(registry.taken(contacts, at(300), 30));
        await new Promise((resolve) => setTimeout(resolve, 100));
        expect(look()).to.equal(undefined);
        await recordLead(5351, 'LeadRejected');
        registry.ended(5351);
        expect(await until('the look decided', async () => look())).to.deep.equal({ duplicates: [] });
      });

      it('is pending, not waiting, when that post waits for it: two posts crossing on two contacts never wait for each other', async function () {
        const mobile: ['mobile' | 'email', string] = ['mobile', '+13105550331'];
        const email: ['mobile' | 'email', string] = ['email', 'cross-5331@example.com'];
        // Post 5331 gets the mobile and post 5332 the e-mail: each append of the other waits until it has.
        const landed = new Map<string, () => void>();
        const gate = (name: string) => new Promise<void>((resolve) => landed.set(name, resolve));
        const mobileTaken = gate(HASHES.stream(...mobile));
        const emailTaken = gate(HASHES.stream(...email));
        const crossing = overriding(store, {
          append: async (name, events, options) => {
            const lead = (events[0]?.data as { lead_id?: number } | undefined)?.lead_id;
            if (lead === 5331 && name === HASHES.stream(...email)) await emailTaken;
            if (lead === 5332 && name === HASHES.stream(...mobile)) await mobileTaken;
            const appended = await store.append(name, events, options);
            landed.get(name)?.();
            return appended;
          },
        });
        const registry = new ContactRegistry(crossing, HASHES);
        const [first, second] = await Promise.all([registry.claim([mobile, email], 5331, now, 30), registry.claim([mobile, email], 5332, now, 30)]);
        // One of them finds the other waiting for it and is told to retry; the other then gets both.
        const outcomes = [first, second].map((outcome) => ('claims' in outcome ? 'claimed' : JSON.stringify(outcome)));
        const pending = JSON.stringify({ duplicates: [], pending: { kinds: [outcomes[0] === 'claimed' ? 'mobile' : 'email'], until: now.getTime() + CLAIM_IN_FLIGHT_MS } });
        expect(outcomes.sort()).to.deep.equal(['claimed', pending].sort());
      });
    });

    it('a duplicate names every contact held, and claims none of them', async function () {
      const registry = new ContactRegistry(store, HASHES);
      await recordLead(5101, 'LeadSold');
      const held: Array<['mobile' | 'email', string]> = [['mobile', '+13105550181'], ['email', 'held-5101@example.com']];
      expect(await registry.claim(held, 5101, now, 30)).to.have.property('claims');
      const free: Array<['mobile' | 'email', string]> = [['mobile', '+13105550182'], ['email', 'free-5102@example.com']];
      expect(await registry.claim([held[0]!, free[1]!], 5102, now, 30)).to.deep.equal({ duplicates: ['mobile'] });
      expect(await registry.claim([free[0]!, held[1]!], 5103, now, 30)).to.deep.equal({ duplicates: ['email'] });
      expect(await registry.claim(held, 5104, now, 30)).to.deep.equal({ duplicates: ['mobile', 'email'] });
      expect(await registry.duplicates(held, now, 30)).to.deep.equal(['mobile', 'email']);
      // The free contacts a duplicate claimed on its way were given back.
      expect(await registry.duplicates(free, new Date(now.getTime() + 5_000), 30)).to.deep.equal([]);
    });
  });

  describe('caps', function () {
    it('50 concurrent reservations on a cap of 7 take exactly 7 slots', async function () {
      const ledgers = [new CapLedger(store), new CapLedger(store)];
      const cap = { index: 0, max: 7, key: '2026-11-21' };
      const results = await Promise.all(Array.from({ length: 50 }, (_, i) => ledgers[i % 2]!.reserve('acme', [cap], i)));
      expect(results.filter((full) => full === null)).to.have.length(7);
      expect(await ledgers[0]!.reserve('acme', [cap], 99)).to.equal(cap);
    });

    it('sales gathered behind one append are each held to their own cap: a cap lowered by a reload is never passed by the sales routed after it', async function () {
      const ledger = new CapLedger(store);
      const before = { index: 0, max: 200, key: 'lowered' };
      const after = { index: 0, max: 3, key: 'lowered' };
      for (let id = 1; id <= 5; id++) expect(await ledger.reserve('lowered', [before], id)).to.equal(null);
      // One sale of the old file's cap starts an append; those that come while it is under way
      // gather into the next one, led by another sale of the old file: the ones routed by the new
      // file behind it may not take a slot past 3.
      const results = await Promise.all([
        ledger.reserve('lowered', [before], 6),
        ledger.reserve('lowered', [before], 7),
        ...[8, 9, 10].map((id) => ledger.reserve('lowered', [after], id)),
      ]);
      expect(results).to.deep.equal([null, null, after, after, after]);
      // With room for blocks, the slots went in blocks; those not handed out go back as the service stops.
      await ledger.returnUnused();
      expect((await readFolded(store, 'cap-lowered-0-lowered', capDecider)).state.used).to.equal(7);
    });

    describe('blocks of slots, while a period has room for many', function () {
      const used = async (stream: string) => (await readFolded(store, stream, capDecider)).state.used;
      const types = async (stream: string) => (await store.readStream(stream)).map((e) => e.type);

      it('200 sales to a large cap take their slots from blocks of 64: four appends, not 200', async function () {
        const ledger = new CapLedger(store);
        const cap = { index: 0, max: 1_000_000, key: 'large' };
        for (let id = 1; id <= 200; id++) expect(await ledger.reserve('large', [cap], id)).to.equal(null);
        expect(await types('cap-large-0-large')).to.deep.equal(Array(4).fill('CapSlotsReserved'));
        expect(await used('cap-large-0-large')).to.equal(256);
        await ledger.returnUnused();
        expect(await used('cap-large-0-large'), 'the 56 not sold, given back').to.equal(200);
      });

      it("a block is sized on the room the stream has left, not on what a fresh or idle instance last knew of it", async function () {
        // Other instances have sold 300 of a cap of 650, and 607 of a cap of 612.
        await store.append('cap-fresh-0-a', [{ type: 'CapSlotsReserved', data: { block: 'other', slots: 300 } }]);
        await store.append('cap-fresh-0-b', [{ type: 'CapSlotsReserved', data: { block: 'other', slots: 607 } }]);
        const fresh = new CapLedger(store);
        expect(await fresh.reserve('fresh', [{ index: 0, max: 650, key: 'a' }], 1)).to.equal(null);
        const [, block] = await store.readStream('cap-fresh-0-a');
        expect(block!.data, 'a 64th of the 350 left').to.deep.equal({ block: (block!.data as { block: string }).block, slots: 5 });
        // With 5 left, far below the 128 a block needs: one slot, in the stream under the sale's lead.
        expect(await fresh.reserve('fresh', [{ index: 0, max: 612, key: 'b' }], 2)).to.equal(null);
        expect((await store.readStream('cap-fresh-0-b')).map((e) => [e.type, e.data])).to.deep.equal([
          ['CapSlotsReserved', { block: 'other', slots: 607 }],
          ['CapSlotTaken', { lead_id: 2 }],
        ]);
        // So another instance still sells the other 4.
        const other = new CapLedger(store);
        let sold = 0;
        for (let id = 3; (await other.reserve('fresh', [{ index: 0, max: 612, key: 'b' }], id)) === null; id++) sold++;
        expect(sold).to.equal(4);
      });

      it('two instances racing to the end of a cap sell no more than it, and every slot reserved is sold or given back', async function () {
        const ledgers = [new CapLedger(store), new CapLedger(store)];
        const cap = { index: 0, max: 1_000, key: 'race' };
        const sold: number[] = [];
        // In waves of 50 at once, as posts arrive: the blocks shrink as the room does, to one slot a sale.
        for (let wave = 0; wave < 30; wave++) {
          const ids = Array.from({ length: 50 }, (_, i) => wave * 50 + i);
          const results = await Promise.all(ids.map((id) => ledgers[id % 2]!.reserve('race', [cap], id)));
          ids.forEach((id, i) => results[i] === null && sold.push(id));
        }
        expect(sold.length).to.be.at.most(1_000);
        // Each sells what it holds before it is refused: at most a block's worth is left in the other's hand.
        expect(sold.length).to.be.at.least(1_000 - 64);
        const types = new Set((await store.readStream('cap-race-0-race')).map((e) => e.type));
        expect([...types].sort(), 'blocks while the room was large, single slots at the end').to.deep.equal(['CapSlotTaken', 'CapSlotsReserved']);
        await Promise.all(ledgers.map((ledger) => ledger.returnUnused()));
        expect(await used('cap-race-0-race')).to.equal(sold.length);
      });

      describe('a cap lowered by a reload below what two instances hold in blocks', function () {
        const was = { index: 0, max: 5_000, key: '' };
        let sold = 0;
        const sell = async (ledger: CapLedger, cap: typeof was, count: number) => {
          for (let i = 0; i < count; i++) if ((await ledger.reserve('two', [cap], 1_000 + sold)) === null) sold++;
          return sold;
        };
        /** 20 sold from a's block of 64, 10 from b's: 128 slots reserved, 30 sold. */
        async function twoBlocks(key: string): Promise<[CapLedger, CapLedger]> {
          sold = 0;
          const ledgers: [CapLedger, CapLedger] = [new CapLedger(store), new CapLedger(store)];
          await sell(ledgers[0], { ...was, key }, 20);
          await sell(ledgers[1], { ...was, key }, 10);
          expect(await used(`cap-two-0-${key}`)).to.equal(128);
          return ledgers;
        }

        it('the reload gives both blocks back, and exactly the 10 left are sold', async function () {
          const [a, b] = await twoBlocks('reloaded');
          await Promise.all([a.giveBack(), b.giveBack()]);
          expect(await used('cap-two-0-reloaded')).to.equal(30);
          const now = { ...was, max: 40, key: 'reloaded' };
          expect(await sell(a, now, 30)).to.equal(40);
          expect(await sell(b, now, 5)).to.equal(40);
        });

        it('before its give-back, a block reserved under the higher cap sells none of its slots under the lower one: never past 40', async function () {
          const [a, b] = await twoBlocks('unreloaded');
          const now = { ...was, max: 40, key: 'unreloaded' };
          // By its own count alone, a would sell 20 more. It gives its block back instead, and
          // with b's still counted, finds the cap full.
          expect(await sell(a, now, 30)).to.equal(30);
          // b's next sale gives back b's block: the stream counts the 30 sold, and 10 more go.
          expect(await sell(b, now, 5)).to.equal(35);
          expect(await sell(a, now, 30)).to.equal(40);
          expect(await used('cap-two-0-unreloaded')).to.equal(40);
        });
      });

      it('a block reserved while a reload gives the blocks back is given back as it lands: it holds no slots under the cap the reload may have lowered', async function () {
        const ledger = new CapLedger(store);
        const cap = { index: 0, max: 5_000, key: 'mid-reload' };
        // A sale routed by the file before the reload: its block's append is under way as the reload gives back.
        const sale = ledger.reserve('reloading', [cap], 1);
        await ledger.giveBack();
        expect(await sale).to.equal(null);
        // The sale has its slot at once; the rest of the block goes back behind it.
        await until('the block given back', async () => (await store.readStream('cap-reloading-0-mid-reload')).length === 2, 10_000, 5);
        expect((await store.readStream('cap-reloading-0-mid-reload')).map((e) => [e.type, (e.data as { slots: number }).slots])).to.deep.equal([
          ['CapSlotsReserved', 64],
          ['CapSlotsReturned', 63],
        ]);
        // The next sale takes a block of its own, sized on the cap then in force.
        expect(await ledger.reserve('reloading', [{ ...cap, max: 600 }], 2)).to.equal(null);
        expect(await used('cap-reloading-0-mid-reload')).to.equal(1 + 9);
      });

      it("a stop gives back the slots in hand, and another instance sells them; a sale after the stop takes a single slot", async function () {
        const first = new CapLedger(store);
        const cap = { index: 0, max: 6_400, key: 'stop' };
        expect(await first.reserve('stop', [cap], 1)).to.equal(null);
        expect(await used('cap-stop-0-stop')).to.equal(64);
        await first.returnUnused();
        expect(await used('cap-stop-0-stop')).to.equal(1);
        const [reserved, returned, ...more] = await store.readStream('cap-stop-0-stop');
        expect(more).to.deep.equal([]);
        expect([reserved!.type, returned!.type]).to.deep.equal(['CapSlotsReserved', 'CapSlotsReturned']);
        expect(returned!.data).to.deep.equal({ block: (reserved!.data as { block: string }).block, slots: 63 });
        // A sale that still comes (a request the stop let finish) takes one slot in the stream, no block to leave behind.
        expect(await first.reserve('stop', [cap], 2)).to.equal(null);
        expect((await types('cap-stop-0-stop')).at(-1)).to.equal('CapSlotTaken');
        await first.returnUnused();
        expect(await used('cap-stop-0-stop')).to.equal(2);
        // Another instance sells all the rest: 6,398 slots.
        const second = new CapLedger(store);
        let sold = 0;
        for (let id = 3; (await second.reserve('stop', [cap], id)) === null; id++) sold++;
        expect(sold).to.equal(6_398);
      });

      it('a process killed with a block in hand leaves its slots taken: the cap sells at most that many fewer, never more', async function () {
        const killed = new CapLedger(store);
        const cap = { index: 0, max: 640, key: 'killed' };
        expect(await killed.reserve('killed', [cap], 1)).to.equal(null);
        // Ten slots reserved, one sold, and no stop to give back the other nine.
        expect(await used('cap-killed-0-killed')).to.equal(10);
        const next = new CapLedger(store);
        let sold = 0;
        for (let id = 2; (await next.reserve('killed', [cap], id)) === null; id++) sold++;
        expect(sold).to.equal(630);
        expect(await used('cap-killed-0-killed')).to.equal(640);
      });

      it("a test lead meets a full cap as this instance's next real lead would: not while it holds a slot, though the stream is full", async function () {
        const holder = new CapLedger(store);
        const other = new CapLedger(store);
        const cap = { index: 0, max: 200, key: 'held' };
        expect(await holder.reserve('held', [cap], 1)).to.equal(null);
        // A block of three (a 64th of the room): two still in hand. The other instance sells the rest.
        for (let id = 2; (await other.reserve('held', [cap], id)) === null; id++);
        expect(await other.fullCap('held', [cap])).to.equal(cap);
        expect(await holder.fullCap('held', [cap])).to.equal(null);
        expect(await holder.reserve('held', [cap], 1_000)).to.equal(null);
        expect(await holder.reserve('held', [cap], 1_001)).to.equal(null);
        expect(await holder.fullCap('held', [cap])).to.equal(cap);
        expect(await holder.reserve('held', [cap], 1_002)).to.equal(cap);
        expect(await used('cap-held-0-held')).to.equal(200);
      });
    });

    it('a buyer with two caps takes both or neither', async function () {
      const ledger = new CapLedger(store);
      const day = { index: 0, max: 5, key: 'd1' };
      const hour = { index: 1, max: 1, key: 'h1' };
      expect(await ledger.reserve('two', [day, hour], 1)).to.equal(null);
      // The cap that refused is named: the hour's, not the day's.
      expect(await ledger.reserve('two', [day, hour], 2)).to.equal(hour);
      // The day slot taken for lead 2 was given back: 4 remain.
      const results = await Promise.all([3, 4, 5, 6, 7].map((id) => ledger.reserve('two', [day], id)));
      expect(results.filter((full) => full === null)).to.have.length(4);
    });

    it('a slot given back is room again, for the ledger that found the cap full and for another', async function () {
      const ledger = new CapLedger(store);
      const other = new CapLedger(store);
      const cap = { index: 0, max: 1, key: 'back' };
      expect(await ledger.reserve('back', [cap], 1)).to.equal(null);
      expect(await ledger.reserve('back', [cap], 2)).to.equal(cap);
      expect(await other.reserve('back', [cap], 3)).to.equal(cap);
      await ledger.release('back', [cap], 1);
      expect(await ledger.reserve('back', [cap], 4)).to.equal(null);
      await other.release('back', [cap], 4);
      expect(await other.reserve('back', [cap], 5)).to.equal(null);
      expect(await ledger.reserve('back', [cap], 6)).to.equal(cap);
    });

    it("a slot whose lead is still not recorded 5 minutes on is given back when the cap is found full; a recorded lead's slot, or a young one, never", async function () {
      let clock = Date.now();
      const ledger = new CapLedger(store, () => clock);
      const cap = { index: 0, max: 2, key: 'orphans' };
      // Lead 1 is recorded; lead 2's process died between its slot and its lead.
      expect(await ledger.reserve('orphans', [cap], 1)).to.equal(null);
      await store.append('lead-1', [{ type: 'LeadReceived', data: { lead_id: 1 } }]);
      expect(await ledger.reserve('orphans', [cap], 2)).to.equal(null);
      // Full, and lead 2's slot is young: it may still be a post under way.
      expect(await ledger.reserve('orphans', [cap], 3)).to.equal(cap);
      // Five minutes on from when the slots were taken (the store stamps them with its own clock).
      clock = Date.now() + 5 * 60_000 + 1_000;
      expect(await ledger.reserve('orphans', [cap], 4)).to.equal(null);
      const stream = (await store.readStream('cap-orphans-0-orphans')).map((e) => [e.type, (e.data as { lead_id: number }).lead_id]);
      expect(stream).to.deep.equal([['CapSlotTaken', 1], ['CapSlotTaken', 2], ['CapSlotReleased', 2], ['CapSlotTaken', 4]]);
      // Both leads holding slots are recorded (lead 4 now, its slot past 5 minutes): the cap stays full.
      clock = Date.now() + 5 * 60_000 + 1_000;
      await store.append('lead-4', [{ type: 'LeadReceived', data: { lead_id: 4 } }]);
      expect(await ledger.reserve('orphans', [cap], 5)).to.equal(cap);
      expect(await store.readStream('cap-orphans-0-orphans')).to.have.length(4);
    });

    it('a give-back retried after it landed frees the slot once: the cap is never exceeded', async function () {
      const ledger = new CapLedger(store);
      const cap = { index: 0, max: 2, key: 'twice' };
      expect(await ledger.reserve('twice', [cap], 1)).to.equal(null);
      expect(await ledger.reserve('twice', [cap], 2)).to.equal(null);
      await ledger.release('twice', [cap], 2);
      await ledger.release('twice', [cap], 2);
      const results = await Promise.all([3, 4, 5].map((id) => ledger.reserve('twice', [cap], id)));
      expect(results.filter((full) => full === null)).to.have.length(1);
    });

    it('a take that fails on a later cap gives back the slots already taken', async function () {
      let failHour = true;
      const flaky = overriding(store, {
        append: (name, events, options) => (failHour && name.startsWith('cap-flaky-1-') ? Promise.reject(new EventStoreUnavailableError('disk full')) : store.append(name, events, options)),
      });
      const ledger = new CapLedger(flaky);
      const day = { index: 0, max: 1, key: 'd' };
      const hour = { index: 1, max: 5, key: 'h' };
      const error = await ledger.reserve('flaky', [day, hour], 1).then(() => null, (e: unknown) => e);
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
      failHour = false;
      // The day slot lead 1 took is given back in the background: the next lead gets it.
      await until('the day slot given back (CapSlotReleased)', async () => (await store.readStream('cap-flaky-0-d')).length >= 2, 10_000, 5);
      expect((await store.readStream('cap-flaky-0-d')).map((e) => e.type)).to.deep.equal(['CapSlotTaken', 'CapSlotReleased']);
      expect(await new CapLedger(store).reserve('flaky', [day, hour], 2)).to.equal(null);
    });
  });

  describe('caps, looked at without taking (test leads)', function () {
    it('hasRoom answers as a reservation would, appends nothing, and counts slots given back', async function () {
      const ledger = new CapLedger(store);
      const other = new CapLedger(store);
      const cap = { index: 0, max: 2, key: 'look' };
      const stream = 'cap-looked-0-look';
      expect(await ledger.hasRoom('looked', [cap])).to.equal(true);
      expect(await store.readStream(stream)).to.deep.equal([]);
      expect(await ledger.reserve('looked', [cap], 1)).to.equal(null);
      expect(await other.hasRoom('looked', [cap])).to.equal(true);
      expect(await other.reserve('looked', [cap], 2)).to.equal(null);
      expect(await ledger.hasRoom('looked', [cap])).to.equal(false);
      expect(await other.hasRoom('looked', [cap])).to.equal(false);
      // Every cap must have room: one full cap is enough to say no.
      expect(await ledger.hasRoom('looked', [{ index: 1, max: 5, key: 'look' }, cap])).to.equal(false);
      await ledger.release('looked', [cap], 1);
      expect(await other.hasRoom('looked', [cap])).to.equal(true);
      expect((await store.readStream(stream)).map((e) => e.type)).to.deep.equal(['CapSlotTaken', 'CapSlotTaken', 'CapSlotReleased']);
    });

    it('a look while a slot is being taken neither takes one nor makes the ledger count it twice', async function () {
      // The append lands, then its answer is held back: the look reads the new slot meanwhile.
      let landed!: () => void;
      const written = new Promise<void>((resolve) => (landed = resolve));
      let answer!: () => void;
      const held = new Promise<void>((resolve) => (answer = resolve));
      const slow = overriding(store, {
        append: async (name, events, options) => {
          const result = await store.append(name, events, options);
          landed();
          await held;
          return result;
        },
      });
      const ledger = new CapLedger(slow);
      const cap = { index: 0, max: 2, key: 'race' };
      const first = ledger.reserve('raced', [cap], 1);
      await written;
      expect(await ledger.hasRoom('raced', [cap])).to.equal(true);
      answer();
      expect(await first).to.equal(null);
      // One slot used of two: the second lead gets the other, a third finds the cap full.
      expect(await ledger.reserve('raced', [cap], 2)).to.equal(null);
      expect(await ledger.reserve('raced', [cap], 3)).to.equal(cap);
      expect(await store.readStream('cap-raced-0-race')).to.have.length(2);
    });
  });

  describe('idempotency keys', function () {
    const answer: IdempotentAnswer = { outcome: { lead_id: 1, code: 'SOLD', lead_status: 'sold', sold: true, revenue: 10, currency: 'USD' }, traceId: 'a'.repeat(32) };
    it('claim, complete, replay; another body conflicts; in flight is seen as such', async function () {
      const keys = new IdempotencyKeys(store, () => now.getTime());
      const body = Buffer.from('{"a":1}');
      const first = await keys.claim('sup', 'k-1', body);
      expect(first.kind).to.equal('claimed');
      expect((await keys.claim('sup', 'k-1', body)).kind).to.equal('in_flight');
      expect((await keys.claim('sup', 'k-1', Buffer.from('{"a":2}'))).kind).to.equal('other_body');
      if (first.kind === 'claimed') await first.complete(answer);
      const replay = await keys.claim('sup', 'k-1', body);
      expect(replay).to.deep.equal({ kind: 'replay', answer });
      // Per supplier: another supplier's same key is its own.
      expect((await keys.claim('other', 'k-1', body)).kind).to.equal('claimed');
    });

    it('a new key is claimed without reading its stream; a key seen before is read', async function () {
      const { store: counted, reads } = countingReads();
      const keys = new IdempotencyKeys(counted, () => now.getTime());
      const body = Buffer.from('{"a":1}');
      expect((await keys.claim('sup', 'k-new', body)).kind).to.equal('claimed');
      expect([...reads.values()].reduce((n, r) => n + r, 0)).to.equal(0);
      expect((await keys.claim('sup', 'k-new', body)).kind).to.equal('in_flight');
      expect([...reads.values()].reduce((n, r) => n + r, 0)).to.equal(1);
    });

    it('expires after 72 h, and a stale in-flight claim can be taken over', async function () {
      let clock = now.getTime();
      const keys = new IdempotencyKeys(store, () => clock);
      const body = Buffer.from('{}');
      const first = await keys.claim('sup', 'k-2', body);
      if (first.kind === 'claimed') await first.complete(answer);
      clock += 72 * 3_600_000 + 1;
      expect((await keys.claim('sup', 'k-2', body)).kind).to.equal('claimed');
      clock += 31_000;
      expect((await keys.claim('sup', 'k-2', body)).kind).to.equal('claimed');
    });

    it("a claim whose append was cut off takes back only its own: not another request's, made with the same body in the same millisecond", async function () {
      const clock = now.getTime();
      const body = Buffer.from('{"same":"millisecond"}');
      let cut = true;
      let other: Awaited<ReturnType<IdempotencyKeys['claim']>> | undefined;
      const lead = (leadId: number) => ({ leadId, recover: async () => null });
      // The first request's claim is cut off unwritten; meanwhile the second's, of the same body at the same time, lands.
      const cutting = overriding(store, {
        append: async (stream, events, options) => {
          if (!cut || !stream.startsWith('idempotency-')) return store.append(stream, events, options);
          cut = false;
          other = await new IdempotencyKeys(store, () => clock).claim('sup', 'k-same-ms', body, lead(2));
          throw new EventStoreUnavailableError('injected: cut off', { mayLandLater: true });
        },
      });
      const error = await new IdempotencyKeys(cutting, () => clock).claim('sup', 'k-same-ms', body, lead(1)).catch((e: unknown) => e);
      expect(error).to.be.instanceOf(EventStoreUnavailableError);
      expect(other?.kind).to.equal('claimed');
      // The second request's claim still stands: a third request with the key is told it is in flight.
      expect((await new IdempotencyKeys(store, () => clock).claim('sup', 'k-same-ms', body, lead(3))).kind).to.equal('in_flight');
    });

    it('in flight: a retry is told a second while the first may still be answered, then how long until the key can be taken over', async function () {
      let clock = now.getTime();
      const keys = new IdempotencyKeys(store, () => clock);
      const body = Buffer.from('{"retry":1}');
      expect((await keys.claim('sup', 'k-retry', body)).kind).to.equal('claimed');
      clock += 2_000;
      expect(await keys.claim('sup', 'k-retry', body)).to.deep.equal({ kind: 'in_flight', retryAfterMs: 1_000 });
      // Its process died: nothing will answer it before the claim is stale, 30 s after it was made.
      clock += 10_000;
      expect(await keys.claim('sup', 'k-retry', body)).to.deep.equal({ kind: 'in_flight', retryAfterMs: 18_000 });
      clock += 18_000;
      expect((await keys.claim('sup', 'k-retry', body)).kind).to.equal('claimed');
    });

    it("named by a keyed hash: the name is not the plain hash a guess of the key could be checked against; a fresh store reads no older name", async function () {
      const fresh = tempDir('support-keyed');
      const events = await EmbeddedEventStore.open(fresh.path);
      try {
        const hashes = ContactHashes.withSecret(Buffer.alloc(32, 7));
        const names = await idempotencyNames(hashes, events, () => now);
        const keyed = names.stream('sup', 'ada@example.com');
        expect(keyed).to.match(/^idempotency-[0-9a-f]{64}$/).and.not.equal(plainIdempotencyStream('sup', 'ada@example.com'));
        expect(keyed).to.not.equal(ContactHashes.withSecret(Buffer.alloc(32, 8)).keyedStream('idempotency', 'sup', 'ada@example.com'));
        expect(names.olderStream('sup', 'ada@example.com', now.getTime())).to.equal(null);
        const keys = new IdempotencyKeys(events, () => now.getTime(), names);
        const first = await keys.claim('sup', 'ada@example.com', Buffer.from('{}'));
        if (first.kind === 'claimed') await first.complete(answer);
        expect(await keys.claim('sup', 'ada@example.com', Buffer.from('{}'))).to.deep.equal({ kind: 'replay', answer });
        expect(await events.readStream(keyed)).to.have.length(2);
      } finally {
        await events.close();
        fresh.remove();
      }
    });

    it('a key answered under its plain name before the upgrade replays for its 72 h, then is free; one in flight there is in flight', async function () {
      const upgraded = tempDir('support-upgraded');
      const events = await EmbeddedEventStore.open(upgraded.path);
      try {
        // A store that held leads before this release: keys under the plain name may be live.
        await new LeadIdAllocator(events, 10, 'older').nextId();
        const before = new IdempotencyKeys(events, () => now.getTime());
        const body = Buffer.from('{"a":1}');
        const answered = await before.claim('sup', 'k-old', body);
        if (answered.kind === 'claimed') await answered.complete(answer);
        expect((await before.claim('sup', 'k-flight', body)).kind).to.equal('claimed');

        let clock = now.getTime() + 1000;
        const names = await idempotencyNames(ContactHashes.withSecret(Buffer.alloc(32, 7)), events, () => new Date(clock));
        const keys = new IdempotencyKeys(events, () => clock, names);
        expect(await keys.claim('sup', 'k-old', body)).to.deep.equal({ kind: 'replay', answer });
        expect((await keys.claim('sup', 'k-old', Buffer.from('{"a":2}'))).kind).to.equal('other_body');
        expect((await keys.claim('sup', 'k-flight', body)).kind).to.equal('in_flight');
        expect((await keys.claim('sup', 'k-new', body)).kind).to.equal('claimed');
        // 72 h after the upgrade no plain name is read: the key is the supplier's again.
        clock += IDEMPOTENCY_TTL_MS;
        expect(names.olderStream('sup', 'k-old', clock)).to.equal(null);
        expect((await keys.claim('sup', 'k-old', body)).kind).to.equal('claimed');
      } finally {
        await events.close();
        upgraded.remove();
      }
    });

    it('20 concurrent claims of one key: exactly one is claimed', async function () {
      const keys = new IdempotencyKeys(store, () => now.getTime());
      const results = await Promise.all(Array.from({ length: 20 }, () => keys.claim('sup', 'k-3', Buffer.from('x'))));
      expect(results.filter((r) => r.kind === 'claimed')).to.have.length(1);
      expect(results.filter((r) => r.kind === 'in_flight')).to.have.length(19);
    });
  });
});

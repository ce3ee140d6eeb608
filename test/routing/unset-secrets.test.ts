import { expect } from 'chai';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/http/logger.js';
import { unsetSecrets, warnOfUnsetSecrets } from '../../src/routing/unset-secrets.js';
import { routing } from './fixtures.js';

// A buyer whose `secret_env` names a variable that is not set (or set empty) gets its deliveries and
// bid requests unsigned, and would reject them or, worse, take them unchecked. The service says so
// once at start, naming the buyer and the variable; a variable's value is never written anywhere.

const SET_VALUE = 'whsec-5f1e-never-logged';

const file = {
  buyers: [
    // Both by one variable that is set: nothing to say.
    { id: 'signed', price: 1, delivery: { kind: 'webhook', url: 'https://signed.example/leads', secret_env: 'SIGNED_SECRET' }, ping: { kind: 'webhook', url: 'https://signed.example/bids', secret_env: 'SIGNED_SECRET' } },
    // Deliveries and bids by one variable that is not set: one warning for both.
    { id: 'acme-law', price: 1, delivery: { kind: 'webhook', url: 'https://acme.example/leads', secret_env: 'ACME_SECRET' }, ping: { kind: 'webhook', url: 'https://acme.example/bids', secret_env: 'ACME_SECRET' } },
    // Bids only, by a variable set to nothing, which signs nothing either.
    { id: 'empty-bidder', price: 1, ping: { kind: 'webhook', url: 'https://empty.example/bids', secret_env: 'EMPTY_SECRET' } },
    // Deliveries by a set variable, bids by an unset one: only the bids are named.
    { id: 'two-keys', price: 1, delivery: { kind: 'webhook', url: 'https://two.example/leads', secret_env: 'SIGNED_SECRET' }, ping: { kind: 'webhook', url: 'https://two.example/bids', secret_env: 'TWO_BIDS_SECRET' } },
    // No secret_env at all: unsigned by the operator's choice, not by a missing variable.
    { id: 'unsigned', price: 1, delivery: { kind: 'webhook', url: 'https://unsigned.example/leads' } },
    { id: 'pull', price: 1 },
  ],
};
const env = { SIGNED_SECRET: SET_VALUE, EMPTY_SECRET: '' };

describe('routing file: secret_env variables that are not set', function () {
  it('names each buyer and variable that signs nothing, and what goes unsigned', function () {
    expect(unsetSecrets(routing(file), env)).to.deep.equal([
      { buyer: 'acme-law', secret_env: 'ACME_SECRET', unsigned: ['deliveries', 'pings'] },
      { buyer: 'empty-bidder', secret_env: 'EMPTY_SECRET', unsigned: ['pings'] },
      { buyer: 'two-keys', secret_env: 'TWO_BIDS_SECRET', unsigned: ['pings'] },
    ]);
  });

  it('with every variable set, there is nothing to say', function () {
    expect(unsetSecrets(routing(file), { ...env, ACME_SECRET: 'a', EMPTY_SECRET: 'b', TWO_BIDS_SECRET: 'c' })).to.deep.equal([]);
  });

  it('logs one warning per buyer and variable, with their names and never a value', function () {
    const lines: string[] = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    // pino writes synchronously to a plain stream: the lines are there when the call returns.
    warnOfUnsetSecrets(routing(file), env, createLogger({ level: 'info', destination }));
    const logged = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(logged.map((l) => [l.level, l.buyer, l.secret_env, l.unsigned])).to.deep.equal([
      [40, 'acme-law', 'ACME_SECRET', ['deliveries', 'pings']],
      [40, 'empty-bidder', 'EMPTY_SECRET', ['pings']],
      [40, 'two-keys', 'TWO_BIDS_SECRET', ['pings']],
    ]);
    for (const l of logged) expect(l.msg).to.be.a('string').and.include(String(l.buyer)).and.include(String(l.secret_env));
    expect(lines.join('\n')).to.not.include(SET_VALUE);
  });
});

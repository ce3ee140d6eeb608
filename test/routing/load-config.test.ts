import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MAX_ROUTING_FILE_BYTES, RoutingConfigError, loadRoutingConfig, parseRoutingConfig } from '../../src/routing/load-config.js';
import { tempDir } from '../support/tmp.js';
import { problemsOf, routing } from './fixtures.js';

const EXAMPLE = fileURLToPath(new URL('../../../config/routing.json', import.meta.url));
const sha12 = (content: string | Buffer) => createHash('sha256').update(content).digest('hex').slice(0, 12);

describe('loading the routing file', function () {
  describe('defaults', function () {
    it('given a buyer with only id and price, when loaded, then every default is filled in', function () {
      const config = routing({ buyers: [{ id: 'nationwide-leads', price: 12.75 }] });

      expect(config).to.deep.equal({
        source: 'test.json',
        version: sha12('{"buyers":[{"id":"nationwide-leads","price":12.75}]}'),
        currency: 'USD',
        strategy: 'highest_price',
        duplicate_window_days: 30,
        min_bid: 0,
        buyers: [{
          id: 'nationwide-leads', name: 'nationwide-leads', price: 12.75, priority: 100, active: true,
          states: null, zip_prefixes: null, require: {}, caps: [], hours: null, delivery: { kind: 'pull' }, ping: null,
          return_window_days: 7, return_reasons: ['bad_phone', 'not_interested', 'duplicate', 'fraud'],
        }],
        buckets: [{ id: 'unsold', default: true, states: null, zip_prefixes: null }],
      });
    });

    it('given a webhook, a cap and hours without their optional fields, when loaded, then their defaults are filled in', function () {
      const [buyer] = routing({
        buyers: [{
          id: 'acme-law', price: 42.5,
          caps: [{ period: 'day', max: 100 }],
          hours: { tz: 'America/Los_Angeles', start: '08:00', end: '18:00' },
          delivery: { kind: 'webhook', url: 'https://buyer.example/leads' },
        }],
      }).buyers;

      expect(buyer!.caps).to.deep.equal([{ period: 'day', max: 100, tz: 'UTC' }]);
      expect(buyer!.hours).to.deep.equal({ tz: 'America/Los_Angeles', days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], start: '08:00', end: '18:00' });
      expect(buyer!.delivery).to.deep.equal({ kind: 'webhook', url: 'https://buyer.example/leads', timeout_ms: 5000, max_attempts: 8, secret_env: null });
    });

    it('given webhook bidders with and without max_bid, when loaded, then the one without is capped at 10000 and static bidders have none', function () {
      const buyers = routing({
        buyers: [
          { id: 'capped', price: 1, ping: { kind: 'webhook', url: 'https://buyer.example/bids', max_bid: 250 } },
          { id: 'uncapped', price: 1, ping: { kind: 'webhook', url: 'https://buyer.example/bids' } },
          { id: 'static', price: 1, ping: { kind: 'static' } },
        ],
      }).buyers;

      expect(buyers.map((b) => b.ping)).to.deep.equal([
        { kind: 'webhook', url: 'https://buyer.example/bids', timeout_ms: 500, secret_env: null, max_bid: 250 },
        { kind: 'webhook', url: 'https://buyer.example/bids', timeout_ms: 500, secret_env: null, max_bid: 10000 },
        { kind: 'static' },
      ]);
    });

    it('given an empty bucket list, when loaded, then the implicit default bucket is unsold', function () {
      expect(routing({ buyers: [], buckets: [] }).buckets).to.deep.equal([{ id: 'unsold', default: true, states: null, zip_prefixes: null }]);
    });

    it('given buckets, when loaded, then they keep their order and unset flags become false / null', function () {
      expect(routing({ buyers: [], buckets: [{ id: 'unsold-tx', states: ['TX'] }, { id: 'unsold', default: true }] }).buckets).to.deep.equal([
        { id: 'unsold-tx', default: false, states: ['TX'], zip_prefixes: null },
        { id: 'unsold', default: true, states: null, zip_prefixes: null },
      ]);
    });

    it('given values that differ from the defaults, when loaded, then they are kept', function () {
      const config = routing({ currency: 'CAD', strategy: 'priority', duplicate_window_days: 0, buyers: [{ id: 'b', price: 1, priority: 0, active: false, return_window_days: 0, return_reasons: [] }] });

      expect(config).to.include({ currency: 'CAD', strategy: 'priority', duplicate_window_days: 0 });
      expect(config.buyers[0]).to.include({ priority: 0, active: false, return_window_days: 0 });
      expect(config.buyers[0]!.return_reasons).to.deep.equal([]);
    });
  });

  describe('errors', function () {
    it('given a file with several mistakes, when loaded, then every one is reported, one line each', function () {
      const problems = problemsOf({
        currency: 'usd',
        buyers: [
          { id: 'acme-law', price: 42.5, caps: [{ period: 'day', max: 100, tz: 'America/Los_Angeles' }] },
          { id: 'acme-law', price: 10.001, caps: [{ period: 'day', max: 5, tz: 'Mars/Olympus' }], hours: { tz: 'UTC', start: '9', end: '17:00' } },
        ],
        buckets: [{ id: 'unsold', default: true }, { id: 'unsold-tx', default: true, states: ['TX'] }],
      });

      expect(problems).to.deep.equal([
        "test.json: currency: must be an ISO 4217 code of 3 upper-case letters, got 'usd'",
        'test.json: buyers[1].price: must have at most 2 decimal places, got 10.001',
        "test.json: buyers[1].caps[0].tz: unknown time zone 'Mars/Olympus'",
        "test.json: buyers[1].hours.start: must be HH:MM (00:00-23:59), got '9'",
        "test.json: buyers[1].id: duplicate buyer id (the same as buyers[0].id)",
        'test.json: buckets[1].default: only one bucket may be the default (buckets[0] already is)',
        'test.json: buckets[1].states: the default bucket takes every lead no other bucket matched; it cannot have filters',
      ]);
    });

    it('given a file with a problem in each of thousands of entries, when loaded, then the first 50 are listed and a last line says there are more', function () {
      const problems = problemsOf({ buyers: Array.from({ length: 20_000 }, () => ({})) });

      expect(problems).to.have.length(51);
      expect(problems.slice(0, 3)).to.deep.equal(['test.json: buyers[0].id: is required', 'test.json: buyers[0].price: is required', 'test.json: buyers[1].id: is required']);
      expect(problems[50]).to.equal('test.json: and more: only the first 50 problems are listed');
    });

    it('given one buyer with a wrong value far down a long list, when loaded, then it is still found', function () {
      const zips = Array.from({ length: 1000 }, (_, i) => String(10000 + i));
      zips[900] = '9x';

      expect(problemsOf({ buyers: [{ id: 'a', price: 1, zip_prefixes: zips }] })).to.deep.equal(["test.json: buyers[0].zip_prefixes[900]: must be 1-5 digits, got '9x'"]);
    });

    it('given an unknown field nested 100,000 levels deep, when loaded, then it is one problem, not a stack overflow', function () {
      withFile(`{"buyers": [], "extra": ${'['.repeat(100_000)}null${']'.repeat(100_000)}}`, (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: extra: unknown field`);
      });
    });

    it('given a bad file, when loaded, then the error is a RoutingConfigError with the problems as data', function () {
      const error = catchError(() => parseRoutingConfig({ buyers: [{ id: 'acme-law' }] }, 'config/routing.json'));

      expect(error).to.be.instanceOf(RoutingConfigError);
      expect(error).to.include({ name: 'RoutingConfigError', source: 'config/routing.json', message: 'config/routing.json: buyers[0].price: is required' });
      expect((error as RoutingConfigError).problems).to.deep.equal([{ path: 'buyers[0].price', message: 'is required' }]);
    });

    it('given a file that is not JSON, when loaded, then the message names the file and the parse error', function () {
      withFile('{ "buyers": [ }', (path) => {
        const error = catchError(() => loadRoutingConfig(path));

        expect(error).to.be.instanceOf(RoutingConfigError);
        expect(error.message).to.match(new RegExp(`^${escape(path)}: invalid JSON: Unexpected token`));
        expect(error.message.split('\n')).to.have.length(1);
      });
    });

    it('given a long file that is not JSON, when loaded, then the message says on which line and column', function () {
      withFile('{\n  "currency": "USD",\n  "strategy": "highest_price"\n  "buyers": []\n}\n', (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.match(/: invalid JSON: .*line 4,? column 3\)?$/);
      });
    });

    it('given a Latin-1 file (an accent in a name), when loaded, then it is refused in one line naming where the first byte that is no UTF-8 is', function () {
      withFile(Buffer.from('{\n  "buyers": [{"id": "a", "name": "Caf\xe9 Law", "price": 10}]\n}\n', 'latin1'), (path) => {
        const error = catchError(() => loadRoutingConfig(path));

        expect(error).to.be.instanceOf(RoutingConfigError);
        expect(error.message).to.equal(`${path}: not UTF-8 at line 2, column 38 (a byte there is no UTF-8 character): save the file as UTF-8`);
      });
    });

    it('given a file that ends in the middle of a UTF-8 character, when loaded, then it is refused at that character', function () {
      withFile(Buffer.concat([Buffer.from('{"buyers":[]}\n'), Buffer.from([0xe2, 0x82])]), (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: not UTF-8 at line 2, column 1 (a byte there is no UTF-8 character): save the file as UTF-8`);
      });
    });

    for (const [name, bom, encoding] of [['UTF-16 little-endian', [0xff, 0xfe], 'utf16le'], ['UTF-16 big-endian', [0xfe, 0xff], 'utf16be']] as const) {
      it(`given a ${name} file with its byte-order mark (Notepad's "Unicode"), when loaded, then the one line says to save it as UTF-8`, function () {
        const le = Buffer.from('{"buyers":[{"id":"a","price":10}]}', 'utf16le');
        withFile(Buffer.concat([Buffer.from(bom), encoding === 'utf16le' ? le : le.swap16()]), (path) => {
          expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: the file is UTF-16: save it as UTF-8`);
        });
      });
    }

    it('given a UTF-8 file with accents in a name, when loaded, then the name is kept as written', function () {
      withFile('{"buyers":[{"id":"a","name":"Café Law – Zürich","price":10}]}', (path) => {
        expect(loadRoutingConfig(path).buyers[0]!.name).to.equal('Café Law – Zürich');
      });
    });

    it('given a file one byte over the size limit, when loaded, then it is refused by its size in one line, before it is read', function () {
      withFile('', (path) => {
        truncateSync(path, MAX_ROUTING_FILE_BYTES + 1);

        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: is ${MAX_ROUTING_FILE_BYTES + 1} bytes; a routing file is at most 1 MB (${MAX_ROUTING_FILE_BYTES} bytes)`);
      });
    });

    it('given a leads export of tens of MB in place of the routing file, when loaded, then it is refused by its size in MB', function () {
      withFile('', (path) => {
        truncateSync(path, 59 * 1024 * 1024 + 300 * 1024);

        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: is 59.3 MB; a routing file is at most 1 MB`);
      });
    });

    it('given a file of exactly the size limit, when loaded, then it is read and loads', function () {
      const json = '{"buyers":[{"id":"a","price":1}]}';
      withFile(json + ' '.repeat(MAX_ROUTING_FILE_BYTES - json.length), (path) => {
        expect(loadRoutingConfig(path).buyers.map((b) => b.id)).to.deep.equal(['a']);
      });
    });

    it('given a path with no size that never ends (a device), when loaded, then no more than the limit is read and it is refused', function () {
      if (!existsSync('/dev/zero')) this.skip();

      expect(catchError(() => loadRoutingConfig('/dev/zero')).message).to.equal('/dev/zero: is over 1 MB; a routing file is at most 1 MB');
    });

    it('given keys given twice at several levels, when loaded, then each is refused by its path, before the other problems', function () {
      const text = '{"currency": "USD", "buyers": [\n  {"id": "a", "price": 1, "active": true, "price": 2},\n  {"id": "b", "price": -1, "caps": [{"period": "day", "max": 5, "max": 50}]}\n], "currency": "EUR"}';
      withFile(text, (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message.split('\n')).to.deep.equal([
          `${path}: buyers[0].price: given twice`,
          `${path}: buyers[1].caps[0].max: given twice`,
          `${path}: currency: given twice`,
          `${path}: buyers[1].price: must be >= 0`,
        ]);
      });
    });

    it('given a key three times, when loaded, then it says so', function () {
      withFile('{"buyers": [], "strategy": "priority", "strategy": "priority", "strategy": "round_robin"}', (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: strategy: given 3 times`);
      });
    });

    it('given a path with no file, when loaded, then the message says it cannot be read', function () {
      const error = catchError(() => loadRoutingConfig('/nonexistent/routing.json'));

      expect(error.message).to.match(/^\/nonexistent\/routing\.json: cannot read the file: ENOENT/);
    });

    it('given an invalid file on disk, when loaded, then each line starts with its path', function () {
      withFile('{"buyers":[{"id":"acme-law","price":1,"caps":[{"period":"day","max":1,"tz":"Mars/Olympus"}]}]}', (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: buyers[0].caps[0].tz: unknown time zone 'Mars/Olympus'`);
      });
    });
  });

  describe('what a refusal says of the values in the file', function () {
    // Refusals are logged, and a log holds no consumer's data and no secret: a file put in the
    // routing file's place may be anything, and the message must name places, never values.
    const EXPORT = [
      { lead_id: 1042, first_name: 'Ada', last_name: 'Lovelace', email: 'ada.lovelace@outlook.com', mobile: '+12135550143', zip: '90210' },
      { lead_id: 1043, first_name: 'Grace', last_name: 'Hopper', email: 'grace.hopper@outlook.com', mobile: '+12135550144', zip: '90211' },
    ];
    const PERSONAL = ['1042', 'Ada', 'Lovelace', 'ada.lovelace', 'outlook', '2135550143', '90210', 'Grace', 'Hopper', '2135550144', '90211'];
    const SECRET = 'whsec_9f8e7d6c5b4a39281706f5e4d3c2b1a0';

    const holdsNone = (message: string, values: readonly string[]) => {
      for (const value of values) expect(message, value).to.not.include(value);
    };

    it('given a leads export copied over the routing file, when loaded, then the one line says it is an array of 2, and holds none of its values', function () {
      withFile(JSON.stringify(EXPORT, null, 2), (path) => {
        const message = catchError(() => loadRoutingConfig(path)).message;

        expect(message).to.equal(`${path}: must be an object, got an array of 2`);
        holdsNone(message, PERSONAL);
      });
    });

    it('given the export as the list of buyers, with a null and a repeated key among its values, when loaded, then every line names a place and none a value', function () {
      const text = JSON.stringify({ buyers: EXPORT.map((lead) => ({ ...lead, s1: null })) }).replace('"zip":"90210"', '"zip":"90210","zip":"90210"');
      withFile(text, (path) => {
        const lines = catchError(() => loadRoutingConfig(path)).message.split('\n');

        expect(lines).to.include.members([`${path}: buyers[0].zip: given twice`, `${path}: buyers[0].id: is required`, `${path}: buyers[0].email: unknown field`, `${path}: buyers[1].s1: unknown field`]);
        holdsNone(lines.join('\n'), PERSONAL);
      });
    });

    it('given an export keyed by e-mail, when loaded, then the keys are not named either', function () {
      withFile(JSON.stringify({ buyers: [], 'ada.lovelace@outlook.com': EXPORT[0], '+12135550144': null }), (path) => {
        const message = catchError(() => loadRoutingConfig(path)).message;

        expect(message).to.equal(`${path}: *: unknown field, named with other characters than letters, digits, _ and - (its name is not repeated here)`);
        holdsNone(message, PERSONAL);
      });
    });

    it('given a broken export that is not JSON, when loaded, then the parse error gives the token and its line and column, not the text around it', function () {
      const text = '[\n  {"first_name": "Ada", "last_name": "Lovelace", "email": ada.lovelace@outlook.com, "mobile": "+12135550143"}\n]';
      withFile(text, (path) => {
        const message = catchError(() => loadRoutingConfig(path)).message;

        expect(message).to.equal(`${path}: invalid JSON: Unexpected token 'a' (line 2, column ${text.split('\n')[1]!.indexOf('ada.') + 1})`);
        holdsNone(message, PERSONAL);
      });
      withFile('first_name,last_name,email\nAda,Lovelace,ada.lovelace@outlook.com\n', (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: invalid JSON: Unexpected token 'i' (line 1, column 2)`);
      });
      const end = `{"buyers": [], "note": "${'x'.repeat(40)}", "x": Lovelace}`;
      withFile(end, (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: invalid JSON: Unexpected token 'L' (line 1, column ${end.indexOf('Lovelace') + 1})`);
      });
      withFile('{"a": tru}', (path) => {
        expect(catchError(() => loadRoutingConfig(path)).message).to.equal(`${path}: invalid JSON: Unexpected token '}' (line 1, column 10)`);
      });
    });

    it('given a webhook secret pasted into secret_env, when loaded, then the line says how long it is, not what it is', function () {
      const delivery = { kind: 'webhook', url: 'https://127.0.0.1:9444/leads', secret_env: SECRET };
      withFile(JSON.stringify({ buyers: [{ id: 'hooky', price: 30, delivery, ping: { ...delivery, url: 'https://127.0.0.1:9444/bid' } }] }), (path) => {
        const message = catchError(() => loadRoutingConfig(path)).message;

        expect(message.split('\n')).to.deep.equal([
          `${path}: buyers[0].delivery.secret_env: must name an environment variable (A-Z 0-9 _) that holds the secret, not the secret itself; got a string of 38 characters`,
          `${path}: buyers[0].ping.secret_env: must name an environment variable (A-Z 0-9 _) that holds the secret, not the secret itself; got a string of 38 characters`,
        ]);
        holdsNone(message, [SECRET, 'whsec', '9f8e7d6c']);
      });
    });

    it('given a file of one huge value where a code goes, when loaded, then the line stays short', function () {
      withFile(JSON.stringify({ buyers: [], strategy: EXPORT.map((l) => l.email).join(',').repeat(10_000) }), (path) => {
        const message = catchError(() => loadRoutingConfig(path)).message;

        expect(message.length).to.be.below(200);
        holdsNone(message, PERSONAL);
      });
    });
  });

  describe('version', function () {
    it('given a file on disk, when loaded, then the version is the first 12 hex chars of the sha256 of its bytes', function () {
      const text = '{\n  "buyers": [ { "id": "acme-law", "price": 42.5 } ]\n}\n';
      withFile(text, (path) => {
        expect(loadRoutingConfig(path).version).to.equal(sha12(text));
      });
    });

    it('given a file starting with a byte-order mark, when loaded, then it is accepted and the bytes still set the version', function () {
      const text = '\uFEFF{"buyers":[]}';
      withFile(text, (path) => {
        expect(loadRoutingConfig(path).version).to.equal(sha12(Buffer.from(text, 'utf8')));
      });
    });

    it('given the same rules with keys in another order, when parsed, then the version is the same', function () {
      const a = parseRoutingConfig({ strategy: 'priority', buyers: [{ id: 'acme-law', price: 42.5 }] }, 'a');
      const b = parseRoutingConfig({ buyers: [{ price: 42.5, id: 'acme-law' }], strategy: 'priority' }, 'b');

      expect(a.version).to.equal(sha12('{"buyers":[{"id":"acme-law","price":42.5}],"strategy":"priority"}'));
      expect(b.version).to.equal(a.version);
    });

    it('given a changed price, when parsed, then the version changes', function () {
      const before = parseRoutingConfig({ buyers: [{ id: 'acme-law', price: 42.5 }] }, 'x').version;
      const after = parseRoutingConfig({ buyers: [{ id: 'acme-law', price: 42.51 }] }, 'x').version;

      expect(after).to.not.equal(before);
    });
  });

  describe('the example shipped in config/routing.json', function () {
    it('given the example file, when loaded, then it passes and holds the buyers and buckets it documents', function () {
      const config = loadRoutingConfig(EXAMPLE);

      expect(config.version).to.equal(sha12(readFileSync(EXAMPLE)));
      expect(config).to.include({ source: EXAMPLE, currency: 'USD', strategy: 'highest_price', duplicate_window_days: 30 });
      expect(config.buyers.map((b) => [b.id, b.price, b.active, b.delivery.kind])).to.deep.equal([
        ['acme-law', 42.5, true, 'webhook'],
        ['lone-star-injury', 35, true, 'pull'],
        ['nationwide-leads', 12.75, true, 'pull'],
        ['sunset-legal', 55, false, 'pull'],
      ]);
      expect(config.buyers[0]!.delivery).to.deep.equal({ kind: 'webhook', url: 'https://buyer.example/leads', timeout_ms: 5000, max_attempts: 8, secret_env: 'ACME_WEBHOOK_SECRET' });
      expect(config.buyers[1]!.states).to.deep.equal(['TX', 'FL']);
      expect(config.buyers[2]).to.include({ states: null, zip_prefixes: null, hours: null });
      expect(config.buyers[2]!.caps).to.deep.equal([{ period: 'day', max: 1000, tz: 'UTC' }]);
      expect(config.buckets.map((b) => [b.id, b.default])).to.deep.equal([['unsold', true], ['unsold-tx', false]]);
    });
  });
});

function catchError(run: () => unknown): Error {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected an error, got none');
}

function withFile(content: string | Buffer, test: (path: string) => void): void {
  const dir = tempDir('routing');
  try {
    const path = join(dir.path, 'routing.json');
    writeFileSync(path, content);
    test(path);
  } finally {
    dir.remove();
  }
}

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

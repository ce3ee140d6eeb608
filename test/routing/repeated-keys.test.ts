import { expect } from 'chai';
import { repeatedKeys } from '../../src/routing/repeated-keys.js';

const paths = (text: string) => repeatedKeys(text).map((r) => [r.path, r.times]);

describe('keys given twice in a JSON text', function () {
  it('given no key twice in one object, when scanned, then none is found, also where two objects share their keys', function () {
    expect(paths('{"buyers":[{"id":"a","price":1},{"id":"b","price":2}],"buckets":[]}')).to.deep.equal([]);
  });

  it('given a key twice at the top, when scanned, then its path is the key', function () {
    expect(paths('{"currency":"USD","buyers":[],"currency":"EUR"}')).to.deep.equal([[['currency'], 2]]);
  });

  it('given a key twice in a buyer, when scanned, then its path goes through the list and the index', function () {
    const text = '{"buyers":[{"id":"a","price":1},\n {"id":"acme-law",\n  "active": false,\n  "price": 42.5,\n  "active": true}]}';

    expect(paths(text)).to.deep.equal([[['buyers', 1, 'active'], 2]]);
  });

  it('given keys twice at several levels, when scanned, then each is found, in the order of its second occurrence', function () {
    const text = '{"buyers":[{"id":"a","caps":[{"period":"day","max":1,"max":2}],"id":"b"}],"min_bid":1,"min_bid":2}';

    expect(paths(text)).to.deep.equal([[['buyers', 0, 'caps', 0, 'max'], 2], [['buyers', 0, 'id'], 2], [['min_bid'], 2]]);
  });

  it('given a key three times, when scanned, then it is found once, given 3 times', function () {
    expect(paths('{"a":1,"a":2,"a":3}')).to.deep.equal([[['a'], 3]]);
  });

  it('given a key spelled with an escape the second time, when scanned, then it is the same key', function () {
    expect(paths('{"active":true,"\\u0061ctive":false}')).to.deep.equal([[['active'], 2]]);
  });

  it('given strings that hold quotes, braces, commas and colons as values, when scanned, then none is taken for a key', function () {
    expect(paths('{"name":"a \\"name\\": {\\"x\\",[","note":"name","x":{"name":"}"}}')).to.deep.equal([]);
  });

  it('given a value string equal to a key, when scanned, then it is not counted as the key', function () {
    expect(paths('{"a":"a","b":"a","c":["a","a"]}')).to.deep.equal([]);
  });

  it('given a key twice whose values are objects, when scanned, then the key is found and the objects\' own keys are not mixed', function () {
    expect(paths('{"hours":{"tz":"UTC"},"hours":{"tz":"UTC"}}')).to.deep.equal([[['hours'], 2]]);
  });

  it('given items of a list after nested lists, when scanned, then their index counts only the list\'s own items', function () {
    expect(paths('[[1,2,3],{"a":[4,5]},{"b":1,"b":2}]')).to.deep.equal([[[2, 'b'], 2]]);
  });

  it('given nesting 200,000 levels deep, when scanned, then it finds the key at the bottom without overflowing the stack', function () {
    const text = `${'{"a":'.repeat(200_000)}{"x":1,"x":2}${'}'.repeat(200_000)}`;

    const [found] = repeatedKeys(text);
    expect(found!.path).to.have.length(200_001);
    expect(found!.path.at(-1)).to.equal('x');
  });

  it('given text that is no JSON (a bad escape, an unclosed string, a stray brace), when scanned, then it ends without a fault', function () {
    for (const text of ['{"a\\x":1,"a\\x":2}', '{"a":"b', '}}]]{"a":1,', '{"a":1,"a', '"\\']) expect(() => repeatedKeys(text), text).to.not.throw();
  });

  it('given more repeated keys than asked for, when scanned with a most, then it stops at that many', function () {
    const text = `[${Array.from({ length: 100 }, () => '{"a":1,"a":2}').join(',')}]`;

    expect(repeatedKeys(text, 3).map((r) => r.path)).to.deep.equal([[0, 'a'], [1, 'a'], [2, 'a']]);
  });
});

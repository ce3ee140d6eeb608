import { expect } from 'chai';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

// Someone who clones the repository has only the repository: no planning documents beside it, no
// issue tracker, no history of who built what when. The docs, comments and tests must explain
// the project in its own words, and every relative link in the Markdown must resolve inside it.

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SKIP = new Set(['node_modules', 'dist', 'data', '.git', '.bench']);
const TEXT = /\.(ts|js|json|md|yml|yaml)$|^(Dockerfile|\.dockerignore|\.gitignore)$/;

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (SKIP.has(entry.name)) return [];
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return files(path);
    return TEXT.test(entry.name) && entry.name !== 'package-lock.json' ? [path] : [];
  });
}

// Built from pieces so that this file does not match itself.
const OUTSIDE = [
  { what: 'a path outside the repository', pattern: new RegExp(['\\.\\.', 'shared'].join('/')) },
  { what: 'a planning document', pattern: new RegExp(['DESIGN', 'SEED'].map((n) => `\\b${n}\\.md\\b`).join('|')) },
  { what: 'an issue number', pattern: new RegExp(['\\b[Ii]ssues?', '#?\\d+\\b'].join(' ')) },
  {
    what: 'a work session',
    pattern: new RegExp(`\\b(?:first|second|third|fourth|fifth|sixth|last|this|next|previous) ${'sess'}ion\\b|\\b${'sess'}ion \\d+\\b`, 'i'),
  },
];

describe('the repository stands alone', () => {
  const all = files(ROOT);

  it('scans the docs, the sources, the tests and the benchmarks', () => {
    const names = all.map((f) => relative(ROOT, f));
    for (const expected of ['README.md', 'BENCH.md', 'docs/architecture.md', 'src/service.ts', 'test/support/service.ts', 'bench/run.ts']) {
      expect(names).to.include(expected);
    }
  });

  it('no file points at planning documents, issue numbers or work sessions', () => {
    const found: string[] = [];
    for (const file of all) {
      const lines = readFileSync(file, 'utf8').split('\n');
      lines.forEach((line, i) => {
        for (const { what, pattern } of OUTSIDE) {
          if (pattern.test(line)) found.push(`${relative(ROOT, file)}:${i + 1} names ${what}: ${line.trim().slice(0, 120)}`);
        }
      });
    }
    expect(found, found.join('\n')).to.deep.equal([]);
  });

  it('every relative link in the Markdown resolves to a file in the repository', () => {
    const broken: string[] = [];
    for (const file of all.filter((f) => f.endsWith('.md'))) {
      for (const [, target] of readFileSync(file, 'utf8').matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^(?:[a-z]+:|#)/i.test(target!)) continue;
        const path = resolve(dirname(file), target!.split('#')[0]!);
        if (!path.startsWith(ROOT) || !existsSync(path)) broken.push(`${relative(ROOT, file)} → ${target}`);
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });
});

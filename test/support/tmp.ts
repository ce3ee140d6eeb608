import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A fresh directory per test, removed after it. */
export function tempDir(label = 'leadpost'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), `${label}-`));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

// GET /console: the web console, for the people who are not API clients. Plain ES modules and a
// stylesheet from the repository's console/ folder, and Chart.js from its npm package, all served
// by this process: nothing from a CDN, no build step. The page holds no authority of its own: it
// sends the API key the user typed as X-API-KEY to the same routes as any client.

import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import { gzip as gzipCallback } from 'node:zlib';
import { fileURLToPath } from 'node:url';
import type Router from '@koa/router';
import type { Context } from 'koa';
import { ShellError } from '../http/errors.js';
import type { ShellState } from '../http/state.js';

/** The console/ folder at the package root (this file runs from dist/src/console/). */
const CONSOLE_DIR = fileURLToPath(new URL('../../../console/', import.meta.url));
/** Chart.js's browser build, beside the CommonJS entry its package exports. */
const CHART_JS = join(dirname(createRequire(import.meta.url).resolve('chart.js')), 'chart.umd.js');

// Stricter than the docs page: the console's own files set no inline style, so none is allowed.
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "connect-src 'self'",
  "img-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const gzip = promisify(gzipCallback);

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
};

interface Asset {
  readonly type: string;
  /** Text: the shell treats any body that is not a string or a stream as JSON. */
  readonly body: string;
  readonly etag: string;
  /** The same bytes gzipped, with their own ETag: two representations of one file. */
  readonly gzip: Buffer;
  readonly gzipEtag: string;
}

async function asset(file: string): Promise<Asset> {
  const body = readFileSync(file, 'utf8');
  const tag = createHash('sha256').update(body).digest('base64url').slice(0, 27);
  // Compressed once per process, on the thread pool: the event loop goes on answering meanwhile.
  const gzipped = await gzip(body, { level: 9 });
  return { type: TYPES[extname(file)] ?? 'application/octet-stream', body, etag: `"${tag}"`, gzip: gzipped, gzipEtag: `"${tag}-gz"` };
}

/** Every file of console/ and the chart library, read once: the set is fixed for the process. */
async function loadAssets(): Promise<Map<string, Asset>> {
  const names = readdirSync(CONSOLE_DIR).filter((name) => extname(name) in TYPES);
  const files = await Promise.all([...names.map((name) => asset(join(CONSOLE_DIR, name))), asset(CHART_JS)]);
  return new Map(files.map((file, i) => [names[i] ?? 'chart.umd.js', file]));
}

// no-cache with an ETag: the browser asks each time and gets a 304 while the file is the same, so
// an upgraded service never runs with yesterday's scripts. Gzipped for a browser that takes it:
// a first load is about a third of the bytes (Chart.js alone 210 KB, 70 KB gzipped).
function send(ctx: Context & { state: ShellState }, file: Asset): void {
  ctx.state.pageHeaders = { 'Content-Security-Policy': PAGE_CSP, 'Cache-Control': 'no-cache' };
  ctx.vary('Accept-Encoding');
  const gzipped = ctx.acceptsEncodings('gzip', 'identity') === 'gzip';
  const etag = gzipped ? file.gzipEtag : file.etag;
  ctx.set('ETag', etag);
  ctx.type = file.type;
  if (ctx.get('If-None-Match') === etag) {
    ctx.status = 304;
    return;
  }
  if (!gzipped) {
    ctx.body = file.body;
    return;
  }
  ctx.set('Content-Encoding', 'gzip');
  // A stream, which the shell passes through as it is (a Buffer it would take for JSON).
  ctx.body = Readable.from([file.gzip], { objectMode: false });
  ctx.length = file.gzip.length;
}

export function registerConsoleRoutes(router: Router<ShellState>): void {
  let assets: Promise<Map<string, Asset>> | undefined;
  // A failed read is not kept: the next request reads again.
  const files = () =>
    (assets ??= loadAssets().catch((error: unknown) => {
      assets = undefined;
      throw error;
    }));

  router.get('/console', async (ctx) => send(ctx, (await files()).get('index.html')!));

  router.get('/console/:file', async (ctx) => {
    const name = ctx.params.file ?? '';
    const file = name === 'index.html' ? undefined : (await files()).get(name);
    if (!file) throw new ShellError('NOT_FOUND');
    send(ctx, file);
  });
}

// GET /console: the web console, for the people who are not API clients. Plain ES modules and a
// stylesheet from the repository's console/ folder, and Chart.js from its npm package, all served
// by this process: nothing from a CDN, no build step. The page holds no authority of its own: it
// sends the API key the user typed as X-API-KEY to the same routes as any client.

import { createHash } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, extname, join } from 'node:path';
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
}

function asset(file: string): Asset {
  const body = readFileSync(file, 'utf8');
  return { type: TYPES[extname(file)] ?? 'application/octet-stream', body, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/** Every file of console/ and the chart library, read once: the set is fixed for the process. */
function loadAssets(): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const name of readdirSync(CONSOLE_DIR)) if (extname(name) in TYPES) assets.set(name, asset(join(CONSOLE_DIR, name)));
  assets.set('chart.umd.js', asset(CHART_JS));
  return assets;
}

// no-cache with an ETag: the browser asks each time and gets a 304 while the file is the same, so
// an upgraded service never runs with yesterday's scripts.
function send(ctx: Context & { state: ShellState }, file: Asset): void {
  ctx.state.pageHeaders = { 'Content-Security-Policy': PAGE_CSP, 'Cache-Control': 'no-cache' };
  ctx.set('ETag', file.etag);
  ctx.type = file.type;
  if (ctx.get('If-None-Match') === file.etag) {
    ctx.status = 304;
    return;
  }
  ctx.body = file.body;
}

export function registerConsoleRoutes(router: Router<ShellState>): void {
  let assets: Map<string, Asset> | undefined;
  const files = () => (assets ??= loadAssets());

  router.get('/console', (ctx) => send(ctx, files().get('index.html')!));

  router.get('/console/:file', (ctx) => {
    const name = ctx.params.file ?? '';
    const file = name === 'index.html' ? undefined : files().get(name);
    if (!file) throw new ShellError('NOT_FOUND');
    send(ctx, file);
  });
}

// GET /docs: the reference rendered by Swagger UI (swagger-ui-dist from npm, served from
// node_modules by this process, so the page works without internet and loads nothing from a CDN).
// GET /docs/openapi.json: the document. Both are public: a supplier reads them before it has a key,
// and they hold no secret.

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type Router from '@koa/router';
import { ShellError } from '../http/errors.js';
import type { ShellState } from '../http/state.js';
import { openApiDocument } from './openapi.js';

const swaggerUiDir = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));

// The page runs only same-origin files: no inline script, nothing from elsewhere. Swagger UI sets
// inline styles; images are its inline SVG and data: icons.
const PAGE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self' data:",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>leadpost API reference</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="reference"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script src="/docs/assets/start.js"></script>
</body>
</html>
`;

// validatorUrl null: Swagger UI would otherwise send the document to validator.swagger.io.
const START = `window.ui = SwaggerUIBundle({
  url: '/docs/openapi.json',
  dom_id: '#reference',
  deepLinking: true,
  docExpansion: 'list',
  defaultModelsExpandDepth: 0,
  displayRequestDuration: true,
  validatorUrl: null,
});
`;

const ASSETS: Readonly<Record<string, { type: string; load: () => string }>> = {
  'swagger-ui.css': { type: 'text/css; charset=utf-8', load: () => readFileSync(join(swaggerUiDir, 'swagger-ui.css'), 'utf8') },
  'swagger-ui-bundle.js': { type: 'text/javascript; charset=utf-8', load: () => readFileSync(join(swaggerUiDir, 'swagger-ui-bundle.js'), 'utf8') },
  'start.js': { type: 'text/javascript; charset=utf-8', load: () => START },
};

export function registerDocsRoutes(router: Router<ShellState>): void {
  const loaded = new Map<string, string>();

  router.get('/docs', (ctx) => {
    ctx.state.pageHeaders = { 'Content-Security-Policy': PAGE_CSP, 'Cache-Control': 'no-cache' };
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = PAGE;
  });

  router.get('/docs/openapi.json', async (ctx) => {
    ctx.body = await openApiDocument();
  });

  router.get('/docs/assets/:file', (ctx) => {
    const file = ctx.params.file ?? '';
    const asset = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
    if (!asset) throw new ShellError('NOT_FOUND');
    let text = loaded.get(file);
    if (text === undefined) loaded.set(file, (text = asset.load()));
    // The files change only with the installed package: an hour of caching spares 1.7 MB per view.
    ctx.state.pageHeaders = { 'Content-Security-Policy': PAGE_CSP, 'Cache-Control': 'public, max-age=3600' };
    ctx.type = asset.type;
    ctx.body = text;
  });
}

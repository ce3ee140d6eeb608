/** @type {import('dependency-cruiser').IConfiguration} */
// The layers' rule, checked by `npm test` (test/architecture/layers.test.ts): the domain — commands,
// events, leads, routing, enrichment, projections, read models, keys, delivery — knows nothing of
// HTTP. Outcome codes, field errors and money are domain ideas; only src/http maps them to
// statuses and the decision envelope. Type-only imports count too, so the TypeScript source is
// read (with swc: the TypeScript compiler here has no JavaScript API for tools to call).
const DOMAIN = '^src/(commands|events|leads|routing|enrichment|projections|read-models|keys|delivery)/';

module.exports = {
  forbidden: [
    {
      name: 'domain-knows-no-http',
      severity: 'error',
      comment: 'The domain never imports the HTTP layer: HTTP maps domain outcomes to statuses and the envelope.',
      from: { path: DOMAIN },
      to: { path: '^src/http/' },
    },
  ],
  options: {
    parser: 'swc',
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};

// The layer rule: the picture in docs/architecture.md ("Layers"), as dependency-cruiser checks it
// on every `npm run lint` (and so `npm test`; `npm run lint:layers` alone). A module may import
// its own folder and any row below its own. An import that runs up a row, or across to a sibling
// folder of the same row, fails the build; so does an import cycle that passes through two
// folders. Type-only imports count (`tsPreCompilationDeps`): a type is as much a dependency as a
// value, and "no proxy types in backend/" means types too. Dynamic `import()`s count as well.
//
// Change the picture and this list together.

/** Top to bottom. Folders in one row are siblings: neither imports the other (the tools excepted). */
const LAYERS = [
  // Entry points and tools: they wire or drive what is below and may import any of it.
  { row: 'tools', paths: ['src/app.ts', 'src/gateway.ts', 'src/cli/', 'src/demo/', 'src/replay/', 'src/harness/'], siblingsImport: true },
  { row: 'api', paths: ['src/api/'] },
  // Under the API, over everything it observes: step records, refusals, flow decisions, the gateway's pool.
  { row: 'obs', paths: ['src/obs/'] },
  { row: 'flow, admission', paths: ['src/flow/', 'src/admission/'] },
  // Gateway mode's implementation of the backend seam: it imports the seam, never the reverse.
  { row: 'proxy', paths: ['src/proxy/'] },
  { row: 'backend', paths: ['src/backend/'] },
  { row: 'engine', paths: ['src/engine/'] },
  { row: 'model, structures', paths: ['src/model/', 'src/structures/'] },
  { row: 'util', paths: ['src/util/'] },
];

const re = (p) => `^${p.replaceAll('.', '\\.')}`;

const upward = LAYERS.slice(1).map((layer, i) => ({
  name: `layers: ${layer.row} imports up`,
  comment: `${layer.row} may import only the rows below it (docs/architecture.md, "Layers"); invert the dependency (an interface or a value declared down here) instead`,
  severity: 'error',
  from: { path: layer.paths.map(re) },
  to: { path: LAYERS.slice(0, i + 1).flatMap((above) => above.paths.map(re)) },
}));

const sideways = LAYERS.filter((layer) => layer.paths.length > 1 && layer.siblingsImport !== true).flatMap((layer) =>
  layer.paths.map((from) => ({
    name: `layers: ${layer.row} imports a sibling`,
    comment: `${from} and ${layer.paths.filter((p) => p !== from).join(', ')} sit side by side (docs/architecture.md, "Layers"): what both need goes a row down`,
    severity: 'error',
    from: { path: re(from) },
    to: { path: layer.paths.filter((p) => p !== from).map(re) },
  })),
);

export default {
  forbidden: [
    ...upward,
    ...sideways,
    {
      name: 'layers: harness talks HTTP',
      comment: 'the harness drives a server over HTTP: of the server it may import only the bottom rows and the Prometheus text parser (docs/architecture.md, "harness/")',
      severity: 'error',
      from: { path: '^src/harness/' },
      to: { path: '^src/', pathNot: ['^src/harness/', '^src/util/', '^src/structures/', '^src/model/', '^src/proxy/scrape\\.ts$'] },
    },
    {
      name: 'no cycle across folders',
      comment: 'an import that closes a cycle through another top-level folder of src/ (cycles inside one folder are that folder\'s business)',
      severity: 'error',
      from: { path: '^src/([^/]+)' },
      to: { circular: true, pathNot: '^src/$1(/|$)' },
    },
  ],
  options: {
    includeOnly: '^src/',
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
  },
};

/**
 * The layering rules `npm run lint` enforces (dependency-cruiser). The domain (lock rules) is the
 * centre: it owns its port (domain/lease-store.ts) and knows nothing of HTTP, stores, auth or metrics;
 * everything else may depend on it. No folder may reach back into a folder that depends on it.
 * test/lint/dependency-rules.test.ts shows the rules failing on fixtures.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-folder-cycles',
      comment: 'Folders depend on each other one way only (e.g. store -> domain, never domain -> store).',
      severity: 'error',
      scope: 'folder',
      from: {},
      to: { circular: true },
    },
    {
      name: 'no-module-cycles',
      comment: 'No import cycles between modules either.',
      severity: 'error',
      from: {},
      to: { circular: true },
    },
    {
      name: 'domain-is-independent',
      comment: 'The lock rules know nothing of HTTP, the stores, auth, metrics or the configuration module.',
      severity: 'error',
      from: { path: '(^|/)src/domain/' },
      to: { path: ['(^|/)src/(http|store|auth|observability|cli)/', '(^|/)src/[^/]+\\.ts$'] },
    },
    {
      name: 'stores-are-separate',
      comment:
        'A store imports nothing of another store: code two stores share (the wait room, the clock) lives in ' +
        'src/store/shared/, so changing one backend never changes another.',
      severity: 'error',
      from: { path: '(^|/)src/store/([^/]+)/' },
      to: { path: '(^|/)src/store/([^/]+)/', pathNot: ['(^|/)src/store/$2/', '(^|/)src/store/shared/'] },
    },
    {
      name: 'client-is-standalone',
      comment:
        'keyholder/client ships into applications: it imports only its own files, node built-ins, openapi-fetch and ' +
        'zod (to check every answer before trusting it; no server code, no Fastify, no store driver), and ' +
        '@opentelemetry/api by a dynamic import that may fail (trace context, when the application has it).',
      severity: 'error',
      from: { path: '(^|/)src/client/' },
      to: {
        pathNot: [
          '(^|/)src/client/',
          '(^|/)node_modules/openapi-fetch/',
          '(^|/)node_modules/openapi-typescript-helpers/',
          '(^|/)node_modules/zod/',
          '(^|/)node_modules/@opentelemetry/api/',
        ],
        dependencyTypesNot: ['core'],
      },
    },
    {
      name: 'no-dev-dependencies-in-src',
      comment: 'src/ is what runs in the image, where only production dependencies are installed.',
      severity: 'error',
      from: { path: '(^|/)src/' },
      to: { dependencyTypes: ['npm-dev'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'] },
  },
};

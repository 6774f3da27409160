/**
 * Import boundaries (`npm run lint`), drawn in docs/design/layers.md. Most
 * rules are `reachable` rules: they hold by any path through the module
 * graph, not only for direct imports. What each rule protects:
 * - the pure layers (template language, engine, plan, resource model) can be
 *   tested and reasoned about without a database, a thread pool, a web server
 *   or a UI;
 * - lib/evaluation runs only pure code on its threads;
 * - lib/db and lib/services never reach the layers above them;
 * - only lib/db talks to Kiln's own database (one place for its SQL, its
 *   transactions and its retries); a resource type that manages an outside
 *   PostgreSQL server (Kiln::Postgres::Database, and its capacity checks) may
 *   use `pg` for that server;
 * - the browser bundle (components/, app/) imports no server code;
 * - Prisma's schema engine is for writing migrations only: start-up (npm
 *   start, the workers, `db:migrate`) applies them without it;
 * - no import cycles. test/lint/boundaries.test.ts plants violations and
 *   checks that these rules catch them.
 */
/**
 * The pure layers (see docs/design/layers.md): they can be tested and reasoned
 * about without a database, a thread pool, a web server or a UI.
 */
const PURE = ['^lib/(template|engine|plan|sdk)/', '^lib/resources/(types|schema|secrets|catalog|replace-rules)\\.ts$']
/** What does I/O or runs above the pure layers. */
const IMPURE = [
  '^lib/(db|api|services|server|realtime|cli|evaluation|auth|metrics|ui)/',
  '^lib/resources/(builtin/|registry\\.ts$|outside-run\\.ts$)',
  '^lib/(config|env)\\.ts$',
  '^components/',
  '^app/',
  '^worker/',
  '^node_modules/(pg|@prisma|socket\\.io|next|tinypool)/',
]

/** What lib/evaluation may not reach: it may use a thread pool and read its settings, nothing else that does I/O. */
const ABOVE_EVALUATION = [
  '^lib/(db|api|services|server|realtime|cli|auth|metrics|ui)/',
  '^lib/resources/(builtin/|registry\\.ts$|outside-run\\.ts$)',
  '^lib/config\\.ts$',
  '^components/',
  '^app/',
  '^worker/',
  '^node_modules/(pg|@prisma|socket\\.io|next)/',
]

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-cycles',
      severity: 'error',
      comment: 'Import cycles make load order matter and modules impossible to take apart.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'pure-layers-stay-pure',
      severity: 'error',
      comment:
        'The template language, the engine, the plan (checks, preview, diffs, masking, errors) and the resource model ' +
        'reach nothing that does I/O, by any path: no database, thread pool, services, server, UI, resource implementation or driver.',
      from: { path: PURE },
      to: { path: IMPURE, reachable: true },
    },
    {
      name: 'evaluation-reaches-only-pure-layers',
      severity: 'error',
      comment: 'lib/evaluation runs the pure layers on threads; it reaches no database, service, server or resource implementation by any path.',
      from: { path: '^lib/evaluation/' },
      to: { path: ABOVE_EVALUATION, reachable: true },
    },
    {
      name: 'database-layer-reaches-no-service',
      severity: 'error',
      comment: 'lib/db serves the layers above it (services, worker): it reaches no service, API, server or thread pool by any path.',
      from: { path: '^lib/db/' },
      to: { path: ['^lib/(services|api|server|realtime|evaluation|cli)/', '^worker/', '^components/', '^app/'], reachable: true },
    },
    {
      name: 'services-reach-no-transport',
      severity: 'error',
      comment: 'lib/services are the use cases: the HTTP API, the Socket.IO server and the CLI call them, never the other way.',
      from: { path: '^lib/services/' },
      to: { path: ['^lib/(api|server|realtime|cli)/', '^worker/', '^components/', '^app/'], reachable: true },
    },
    {
      name: 'only-lib-db-talks-to-the-database',
      severity: 'error',
      comment: "Kiln's own database is reached only through lib/db (its queries and functions).",
      // bench/ is a measuring instrument: it reads PostgreSQL's own counters (transaction ids, pg_stat_statements).
      from: { path: '^(lib|worker|app|components|server\\.ts|scripts)', pathNot: ['^lib/db/', '^lib/resources/builtin/postgres-(database|capacity)\\.ts$'] },
      // Type-only imports too: a module that takes a pg.Pool to run its own SQL talks to the database.
      to: { path: ['^node_modules/(@types/)?pg/', '^node_modules/@prisma/', '^lib/db/generated/'] },
    },
    {
      name: 'schema-engine-only-writes-migrations',
      severity: 'error',
      comment:
        "Prisma's WASM schema engine (development dependencies, internal APIs) is loaded by lib/db/migration-author.ts alone, and that only by `npm run db:migration` (scripts/db.ts): start-up applies migrations with lib/db/migrate.ts.",
      from: { pathNot: ['^lib/db/migration-author\\.ts$', '^scripts/db\\.ts$'] },
      to: { path: ['^node_modules/@prisma/(schema-engine-wasm|driver-adapter-utils)/', '^lib/db/migration-author\\.ts$'] },
    },
    {
      name: 'ui-imports-no-server-code',
      severity: 'error',
      comment: 'components/ and app/ are bundled for the browser: they may use lib/ui (pure) and the realtime contracts, never server modules.',
      from: { path: '^(components|app)/' },
      to: { path: ['^lib/(db|api|services|server|engine|template|resources|auth|cli)/', '^lib/realtime/(?!contracts)', '^worker/', '^server\\.ts$', '^node_modules/(pg|@prisma)/'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: ['^\\.next', '^lib/db/generated/', '^test-results'] },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default', 'types'], extensions: ['.ts', '.tsx', '.js', '.mjs', '.cjs'] },
  },
}

/**
 * Import boundaries (`npm run lint`). What each rule protects:
 * - the convergence logic and the template language are pure: they can be
 *   tested and reasoned about without a database, a web server or a UI;
 * - only lib/db talks to Kiln's own database (one place for its SQL, its
 *   transactions and its retries); a resource type that manages an outside
 *   PostgreSQL server (Kiln::Postgres::Database, and its capacity checks) may
 *   use `pg` for that server;
 * - the browser bundle (components/, app/) imports no server code;
 * - Prisma's schema engine is for writing migrations only: start-up (npm
 *   start, the workers, `db:migrate`) applies them without it;
 * - no import cycles.
 */
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
      name: 'engine-and-template-are-pure',
      severity: 'error',
      comment: 'lib/engine and lib/template import nothing from the database, the API, the services, the server or the UI.',
      from: { path: '^lib/(engine|template)/' },
      to: { path: ['^lib/(db|api|services|server|realtime|cli)/', '^components/', '^app/', '^worker/', '^node_modules/(pg|@prisma|socket\\.io|next)/'] },
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

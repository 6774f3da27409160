// ESLint: TypeScript's recommended rules, React's hooks rules, and at most 150
// lines to a function of lib/ and worker/. Import
// boundaries and cycles are checked by dependency-cruiser (.dependency-cruiser.cjs),
// which sees the whole module graph; `npm run lint` runs both.
import js from '@eslint/js'
import reactHooks from 'eslint-plugin-react-hooks'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  { ignores: ['node_modules/', '.next/', '.data/', 'lib/db/generated/', 'test-results/', 'bench-results/', 'next-env.d.ts'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.{ts,tsx}'],
    rules: {
      // `_`-prefixed arguments and variables document "deliberately unused".
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      // An empty catch that says why in a comment is a decision, not an accident.
      'no-empty': ['error', { allowEmptyCatch: true }],
      // One env parser: everything else gets its settings passed down from lib/env.ts.
      'no-restricted-properties': ['error', { object: 'process', property: 'env', message: 'read the environment through lib/env.ts (env(), childEnv())' }],
    },
  },
  {
    // Services, routers and the worker are composed of small systems sharing their resources
    // (docs/design/layers.md), never grown as one long closure: a function past 150 lines is split.
    files: ['lib/**/*.ts', 'worker/**/*.ts'],
    rules: { 'max-lines-per-function': ['error', { max: 150, skipBlankLines: true, skipComments: true }] },
  },
  {
    // The env parser itself; the Prisma CLI's config, which the CLI loads on its own; a child's environment.
    files: ['lib/env.ts', 'prisma.config.ts', 'lib/db/embedded.ts'],
    rules: { 'no-restricted-properties': 'off' },
  },
  {
    // Tests and benchmarks read JSON answers of the API as they come.
    files: ['test/**/*.ts', 'bench/**/*.ts'],
    rules: { '@typescript-eslint/no-explicit-any': 'off' },
  },
  {
    files: ['components/**/*.{ts,tsx}', 'app/**/*.{ts,tsx}'],
    plugins: { 'react-hooks': reactHooks },
    rules: { 'react-hooks/rules-of-hooks': 'error', 'react-hooks/exhaustive-deps': 'warn' },
  },
  {
    files: ['**/*.{js,mjs,cjs}'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly', module: 'writable', require: 'readonly', URL: 'readonly', setTimeout: 'readonly' } },
  },
)

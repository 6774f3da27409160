// The golden graph tests alone, without the global set-up that starts
// PostgreSQL (they need none):
//   npx vitest run --config test/engine/graph-golden/vitest.config.ts
// The main configuration runs them too, with everything else.
import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    root: fileURLToPath(new URL('../../..', import.meta.url)),
    include: ['test/engine/graph-golden.test.ts'],
    environment: 'node',
  },
})

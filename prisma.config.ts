// Prisma CLI configuration. The datasource URL is only needed by `prisma migrate`
// on a machine that has the native schema engine; `prisma generate` works without it.
import path from 'node:path'
import { defineConfig } from 'prisma/config'

// The Prisma CLI reads this file outside Kiln's env parser (lib/env.ts).
const engineFromEnv = process.env.PRISMA_SCHEMA_ENGINE_BINARY
if (!engineFromEnv) process.env.PRISMA_SCHEMA_ENGINE_BINARY = path.resolve('prisma/schema-engine-stub.sh')

export default defineConfig({
  schema: 'prisma/schema.prisma',
  migrations: { path: 'prisma/migrations' },
  datasource: { url: process.env.DATABASE_URL ?? 'postgresql://localhost/kiln' },
})

/**
 * npm run db:migrate            apply pending migrations (DATABASE_URL, or the embedded cluster)
 * npm run db:migration <name>   write a new migration from the change to prisma/schema.prisma
 *                               and lib/db/functions (development only: loads Prisma's schema
 *                               engine, and needs the right to create a scratch database)
 */
import { env } from '../lib/env'
import { applyMigrations } from '../lib/db/migrate'
import { resolveDatabase } from '../lib/db/bootstrap'

async function main() {
  const [cmd, name] = process.argv.slice(2)
  if (cmd === 'create') {
    if (!name) throw new Error('usage: npm run db:migration <name>')
    // Loaded here only: `db:migrate` (and every start) must not need the schema engine.
    const { createMigration } = await import('../lib/db/migration-author')
    const db = await resolveDatabase(env(), { log: (l) => console.log(l) })
    try {
      const folder = await createMigration(db.url, name)
      console.log(folder ? `wrote prisma/migrations/${folder}/migration.sql` : 'neither schema.prisma nor lib/db/functions changed since the last migration')
    } finally {
      await db.release()
    }
    return
  }
  if (cmd === 'deploy') {
    const db = await resolveDatabase(env(), { log: (l) => console.log(l) })
    try {
      const applied = await applyMigrations(db.url)
      console.log(applied.length ? `applied ${applied.join(', ')}` : 'database is up to date')
    } finally {
      await db.release()
    }
    return
  }
  throw new Error('usage: tsx scripts/db.ts create <name> | deploy')
}

main().catch((err) => {
  console.error(err instanceof Error ? err.message : err)
  process.exit(1)
})

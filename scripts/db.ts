/**
 * npm run db:migrate            apply pending migrations (DATABASE_URL, or the embedded cluster)
 * npm run db:migration <name>   write a new migration from the change to prisma/schema.prisma
 */
import { env } from '../lib/env'
import { applyMigrations, createMigration } from '../lib/db/migrate'
import { resolveDatabase } from '../lib/db/bootstrap'

async function main() {
  const [cmd, name] = process.argv.slice(2)
  if (cmd === 'create') {
    if (!name) throw new Error('usage: npm run db:migration <name>')
    const db = await resolveDatabase(env(), { log: (l) => console.log(l) })
    try {
      const folder = await createMigration(db.url, name)
      console.log(folder ? `wrote prisma/migrations/${folder}/migration.sql` : 'schema.prisma has not changed since the last migration')
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

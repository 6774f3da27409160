import path from 'node:path'
import { startEmbeddedPostgres } from './lib/db/embedded'
import { ensureDatabase } from './lib/db/bootstrap'
import { applyMigrations } from './lib/db/migrate'
import { createDb } from './lib/db/client'
import { builtinTypes, createRegistry, typeCatalog } from './lib/resources/registry'
import { createStackService } from './lib/services/stacks'
import { benchTemplate } from './bench/shapes'
const cluster = await startEmbeddedPostgres({ dataDir: path.join('.data', 'bench-pg') })
await ensureDatabase(cluster.adminUrl, 'kiln_bench')
const url = cluster.databaseUrl('kiln_bench')
await applyMigrations(url)
const db = createDb(url, { max: 4 })
const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ('svc') RETURNING id`)
const actor = { projectId: rows[0].id as string, name: 'svc' }
const registry = createRegistry(builtinTypes())
const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 64 << 20, maxResourcesPerStack: 100_000 }, defaultTimeoutMins: 120 })
const log: string[] = []
const origConnect = db.pool.connect.bind(db.pool)
;(db.pool as any).connect = async (...a: any[]) => {
  const client = await origConnect(...a)
  if (!(client as any).__wrapped) {
    const q = client.query.bind(client)
    ;(client as any).query = async (...args: any[]) => { const t = performance.now(); const r = await q(...args); log.push(`${(performance.now() - t).toFixed(2)} ${String(typeof args[0] === 'string' ? args[0] : args[0].text).slice(0, 60).replace(/\s+/g, ' ')}`); return r }
    ;(client as any).__wrapped = true
  }
  return client
}
for (let i = 0; i < 6; i++) {
  log.length = 0
  const t = performance.now()
  await services.create(actor, { name: `svc-${Date.now()}-${i}`, template: benchTemplate('layered', 100, 0.2, { value: 'a', replace: false }) })
  const total = performance.now() - t
  if (i >= 4) { console.log('total', total.toFixed(1)); console.log(log.join('\n')) }
}
await db.pool.query(`DELETE FROM job WHERE stack_id IN (SELECT id FROM stack WHERE project_id = $1)`, [actor.projectId])
await db.pool.query(`DELETE FROM stack WHERE project_id = $1`, [actor.projectId])
await db.close(); await cluster.stop()

/**
 * `npm run bench:listings [-- --runs 200]`
 *
 * The plain listings (the project's stacks with their progress, a stack's
 * resources, a page of its events) through Prisma Client's typed queries
 * against the one SQL statement each, on a stack with 1,000 resources and
 * 5,000 events (and 200 stacks in the project, one of them running a
 * traversal of 1,000 nodes). The two forms run alternately, so that a change
 * of this machine's speed during the run hits both alike; prints the median
 * and the 90th percentile of each, in milliseconds. Uses a dedicated embedded
 * PostgreSQL (<KILN_DATA_DIR>/bench-listings-pg) or DATABASE_URL's database
 * (its stacks and projects are emptied first!).
 */
import crypto from 'node:crypto'
import { createDb, type Db } from '../lib/db/client'
import { eventsPage } from '../lib/db/queries/events'
import { listResources } from '../lib/db/queries/resources'
import { listStacks } from '../lib/db/queries/stacks'
import { env } from '../lib/env'
import { benchDatabase } from './database'
import { alternatives } from './listings-alternatives'

const RESOURCES = 1000
const EVENTS = 5000
const STACKS = 200

async function seed(db: Db): Promise<{ projectId: string; stackId: string }> {
  const q = (sql: string, args: unknown[] = []) => db.pool.query(sql, args)
  await q('TRUNCATE stack, project, worker, job, event_watch CASCADE')
  const { rows: [p] } = await q(`INSERT INTO project (name) VALUES ('bench') RETURNING id`)
  const projectId = String(p.id)
  // STACKS stacks, created a second apart; the newest one runs a traversal over RESOURCES rows.
  await q(
    `INSERT INTO stack (id, project_id, name, action, status, timeout_mins, created_at)
     SELECT gen_random_uuid(), $1, 'stack-' || i, 'CREATE', 'COMPLETE', 60, now() - (i || ' seconds')::interval FROM generate_series(1, $2) i`,
    [projectId, STACKS - 1],
  )
  const stackId = crypto.randomUUID()
  const templateId = crypto.randomUUID()
  const traversalId = crypto.randomUUID()
  await q(`INSERT INTO stack (id, project_id, name, action, status, timeout_mins) VALUES ($1, $2, 'big', 'UPDATE', 'IN_PROGRESS', 60)`, [stackId, projectId])
  await q(`INSERT INTO raw_template (id, stack_id, source, template) VALUES ($1, $2, '', '{}')`, [templateId, stackId])
  await q(`INSERT INTO traversal (id, stack_id, action, raw_template_id, deadline, node_count, roots_pending) VALUES ($1, $2, 'UPDATE', $3, now() + interval '1 hour', $4, 1)`, [traversalId, stackId, templateId, RESOURCES])
  await q(`UPDATE stack SET current_traversal_id = $2, raw_template_id = $3 WHERE id = $1`, [stackId, traversalId, templateId])
  await q(
    `INSERT INTO resource (stack_id, name, type, action, status, physical_id, current_template_id, properties, attributes, requires)
     SELECT $1, 'r' || lpad(i::text, 4, '0'), 'OS::Heat::TestResource', CASE WHEN i % 10 = 0 THEN 'DELETE' ELSE 'CREATE' END, 'COMPLETE', 'phys-' || i, $2,
            jsonb_build_object('value', repeat('x', 200), 'index', i), jsonb_build_object('output', repeat('y', 200)), ARRAY[greatest(i - 1, 1)]
       FROM generate_series(1, $3) i`,
    [stackId, templateId, RESOURCES],
  )
  await q(
    `INSERT INTO sync_point (traversal_id, resource_id, is_update, stack_id, required, state)
     SELECT $1, id, true, $2, 1, (ARRAY['DONE', 'RUNNING', 'WAITING', 'BLOCKED', 'FAILED', 'SKIPPED'])[1 + id % 6] FROM resource WHERE stack_id = $2`,
    [traversalId, stackId],
  )
  await q(
    `INSERT INTO event (stack_id, seq, traversal_id, kind, resource_id, resource_name, action, status, reason, data)
     SELECT $1, i, $2, 'resource', 1 + i % $4, 'r' || lpad((1 + i % $4)::text, 4, '0'), 'UPDATE', 'COMPLETE', 'state changed', jsonb_build_object('inputs', i % 7)
       FROM generate_series(1, $3) i`,
    [stackId, traversalId, EVENTS, RESOURCES],
  )
  await q('VACUUM ANALYZE')
  return { projectId, stackId }
}

function stats(ms: number[]) {
  const s = [...ms].sort((a, b) => a - b)
  const at = (f: number) => s[Math.min(s.length - 1, Math.floor(f * s.length))]!
  return { median: Math.round(at(0.5) * 100) / 100, p90: Math.round(at(0.9) * 100) / 100 }
}

async function main() {
  const runsArg = process.argv.indexOf('--runs')
  const runs = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 200
  const e = env()
  const { url, stop: stopPg } = await benchDatabase(e, { dir: 'bench-listings-pg', database: 'kiln_bench_listings' })
  const db = createDb(url, { max: 2 })
  try {
    const { projectId, stackId } = await seed(db)
    const alt = alternatives(db)
    const cases: { name: string; sql: () => Promise<unknown[]>; prisma: () => Promise<unknown[]> }[] = [
      { name: 'stacks (page of 21, with progress)', sql: () => listStacks(db.pool, projectId, { limit: 21 }), prisma: () => alt.listStacks(projectId, { limit: 21 }) },
      { name: 'stacks (name filter)', sql: () => listStacks(db.pool, projectId, { name: 'stack-1', limit: 21 }), prisma: () => alt.listStacks(projectId, { name: 'stack-1', limit: 21 }) },
      { name: `resources (${RESOURCES} rows)`, sql: () => listResources(db.pool, stackId), prisma: () => alt.listResources(stackId) },
      { name: 'events (page of 100 after 2,500)', sql: () => eventsPage(db.pool, stackId, { after: 2500, limit: 100 }), prisma: () => alt.eventsPage(stackId, { after: 2500, limit: 100 }) },
      { name: `events (page of ${EVENTS})`, sql: () => eventsPage(db.pool, stackId, { after: 0, limit: EVENTS }), prisma: () => alt.eventsPage(stackId, { after: 0, limit: EVENTS }) },
    ]
    for (const c of cases) {
      const [a, b] = [await c.sql(), await c.prisma()]
      if (a.length !== b.length) throw new Error(`${c.name}: SQL gave ${a.length} rows, Prisma ${b.length}`)
      const sql: number[] = []
      const prisma: number[] = []
      for (let i = 0; i < Math.min(20, runs); i++) await Promise.all([c.sql(), c.prisma()])
      for (let i = 0; i < runs; i++) {
        for (const [fn, out] of i % 2 ? ([[c.sql, sql], [c.prisma, prisma]] as const) : ([[c.prisma, prisma], [c.sql, sql]] as const)) {
          const t = performance.now()
          await fn()
          out.push(performance.now() - t)
        }
      }
      const s = stats(sql)
      const p = stats(prisma)
      console.log(`${c.name.padEnd(40)} rows ${String(a.length).padStart(5)}  SQL median ${s.median} ms (p90 ${s.p90})  Prisma median ${p.median} ms (p90 ${p.p90})  Prisma/SQL ${(p.median / s.median).toFixed(2)}`)
    }
  } finally {
    await db.close()
    await stopPg()
  }
}

main().catch((err) => {
  console.error(err)
  process.exit(1)
})

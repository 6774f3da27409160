/**
 * Kiln's sessions on the target server are bounded per process (4 actions of
 * Kiln::Postgres::Database at once), and one project's queue cannot take them
 * all: a project's creates take turns before they take a session, so while
 * project A's restore is held (a gate: a lock on its snapshot, which the copy
 * waits for) and A has more creates queued behind it, project B's database is
 * still made, by the same single worker.
 */
import crypto from 'node:crypto'
import pg from 'pg'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { TARGET_ACTIONS_PER_PROCESS } from '../../lib/resources/builtin/postgres-capacity'
import { useKilnEnv } from '../helpers/stack-env'
import { serverNames } from '../helpers/target-cleanup'

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
})

afterAll(async () => {
  if (admin) await names.drop(admin)
  await admin?.end()
})

const names = serverNames('kiln_ses')
const database = (props: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  heat_template_version: '2018-08-31',
  resources: { db: { type: 'Kiln::Postgres::Database', properties: props, ...extra } },
})

async function submit(token: string, template: unknown): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { token, body: { name: `s-${crypto.randomBytes(4).toString('hex')}`, template } })
  expect(r.status, r.text).toBe(201)
  return r.body.stack.id as string
}

test("one project's queue of creates behind a long restore does not hold every session slot of the process", async () => {
  const source = await submit(api.a.token, database({ name: names.fresh() }, { deletion_policy: 'Snapshot' }))
  expect(await c.settle(source)).toBe('CREATE_COMPLETE')
  expect((await api.call('DELETE', `/api/stacks/${source}`)).status).toBe(202)
  expect(await c.settle(source)).toBe('DELETE_COMPLETE')
  const snap = ((await api.call('GET', `/api/stacks/${source}/snapshots`)).body.snapshots as { name: string }[])[0]!.name

  const gate = new pg.Client({ connectionString: db.urlFor('postgres') })
  await gate.connect()
  await gate.query('BEGIN')
  await gate.query(`COMMENT ON DATABASE "${snap}" IS 'a test holds this lock'`)
  const restored = names.fresh()
  const aStacks: string[] = []
  try {
    aStacks.push(await submit(api.a.token, database({ name: restored, from_snapshot: snap })))
    await c.waitFor(
      async () => (await admin.query(`SELECT 1 FROM pg_stat_activity WHERE query LIKE $1 AND wait_event_type = 'Lock'`, [`CREATE DATABASE "${restored}"%`])).rowCount === 1,
      30_000,
      "A's restore to wait at the gate",
      100,
    )
    // As many more of A's creates as the process has slots: each waits for A's restore to end.
    for (let i = 0; i < TARGET_ACTIONS_PER_PROCESS; i++) aStacks.push(await submit(api.a.token, database({ name: names.fresh() })))
    await c.waitFor(async () => (await c.db.pool.query(`SELECT count(*)::int AS n FROM resource WHERE stack_id = ANY($1) AND status = 'IN_PROGRESS'`, [aStacks])).rows[0].n === aStacks.length, 30_000, "A's creates to start")
    // B's database is made meanwhile.
    const b = await submit(api.b.token, database({ name: names.fresh() }))
    expect(await c.settle(b, 30_000)).toBe('CREATE_COMPLETE')
  } finally {
    await gate.query('ROLLBACK')
    await gate.end()
  }
  for (const id of aStacks) expect(await c.settle(id)).toBe('CREATE_COMPLETE')
})

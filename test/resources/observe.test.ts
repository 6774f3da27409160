/**
 * `observe`, called as the engine calls it: Kiln::File against a real file
 * system and Kiln::Postgres::Database against a real server, each changed out
 * of band in every way observe reports (content, mode, removal; connection
 * limit, ownership, PUBLIC's privilege, a missing role, a dropped database),
 * compared with what was stored (lib/engine/drift.ts). Observing is
 * read-only: it makes no directory and takes no ownership record. Then a
 * stack check with real workers, which observes too.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { compareObserved, describeDrift } from '../../lib/engine/drift'
import { fileResource } from '../../lib/resources/builtin/file'
import { postgresDatabaseResource as database } from '../../lib/resources/builtin/postgres-database'
import { noneResource, valueResource } from '../../lib/resources/builtin/simple'
import { testResource } from '../../lib/resources/builtin/test-resource'
import { waitConditionHandleResource } from '../../lib/resources/builtin/wait-condition'
import { validateProperties } from '../../lib/resources/schema'
import type { ResourceContext, ResourceState, ResourceType } from '../../lib/resources/types'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { outsideRecords, resourceContext, uuid, type OutsideRecords } from '../helpers/resource-context'

let records: OutsideRecords
beforeAll(async () => {
  records = await outsideRecords()
})
afterAll(async () => {
  await records?.close()
})

/** Create with `type` as the engine would, and return what it would store. */
async function created(type: ResourceType, ctx: ResourceContext, given: Record<string, unknown>): Promise<ResourceState> {
  const { value: props, issues } = validateProperties(type.properties, given)
  expect(issues).toEqual([])
  const out = await type.create(ctx, props)
  return { physicalId: out.physicalId ?? ctx.physicalName, properties: props, attributes: out.attributes ?? {}, data: out.data ?? {} }
}

const drift = async (type: ResourceType, ctx: ResourceContext, state: ResourceState) => compareObserved(state.properties, await type.observe!(ctx, state))

describe('Kiln::File', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-observe-'))
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))
  const projectId = uuid()
  const ctx = (over: Partial<Omit<ResourceContext, 'objects'>> = {}) => resourceContext(records, { projectId, config: { workspaceDir: dir }, resourceUuid: uuid(), ...over })
  const at = (rel: string) => path.join(dir, projectId, rel)

  test('in sync as written (a mode written 644 is seen as 644); then content, mode and removal out of band', async () => {
    const c = ctx()
    const state = await created(fileResource, c, { path: 'conf/app.ini', content: 'a=1\n', mode: '644' })
    expect(await fileResource.observe!(c, state)).toEqual({ state: 'exists', properties: { path: 'conf/app.ini', content: 'a=1\n', mode: '644' }, attributes: state.attributes })
    expect(await drift(fileResource, c, state)).toEqual({ state: 'IN_SYNC', changes: [], problems: [] })

    fs.writeFileSync(at('conf/app.ini'), 'a=2\n')
    fs.chmodSync(at('conf/app.ini'), 0o600)
    const seen = await fileResource.observe!(c, state)
    expect(seen).toMatchObject({ state: 'exists', attributes: { size: 4, sha256: crypto.createHash('sha256').update('a=2\n').digest('hex') } })
    const finding = compareObserved(state.properties, seen)
    expect(finding).toEqual({
      state: 'MODIFIED',
      changes: [
        { property: 'content', stored: 'a=1\n', seen: 'a=2\n' },
        { property: 'mode', stored: '644', seen: '0600' },
      ],
      problems: [],
    })
    expect(describeDrift(finding)).toBe('modified outside Kiln: content, mode')

    fs.rmSync(at('conf/app.ini'))
    expect(await drift(fileResource, c, state)).toEqual({ state: 'DELETED', changes: [], problems: [] })
  })

  test('is read-only: a file never written makes no directory and no record; a link is never followed', async () => {
    const c = ctx()
    const state: ResourceState = { physicalId: 'deep/er/never.txt', properties: { path: 'deep/er/never.txt', content: '', mode: '0644' }, attributes: {}, data: {} }
    expect(await fileResource.observe!(c, state)).toEqual({ state: 'gone' })
    expect(fs.existsSync(at('deep'))).toBe(false)
    expect(await c.objects.find([{ kind: 'file', scope: projectId, key: 'deep/er/never.txt' }])).toEqual([null])

    fs.mkdirSync(path.join(dir, 'elsewhere'), { recursive: true })
    fs.writeFileSync(path.join(dir, 'elsewhere', 'secret.txt'), 'not yours')
    fs.mkdirSync(at(''), { recursive: true })
    fs.symlinkSync(path.join(dir, 'elsewhere'), at('linked'))
    const linked: ResourceState = { physicalId: 'linked/secret.txt', properties: { path: 'linked/secret.txt', content: '' }, attributes: {}, data: {} }
    await expect(fileResource.observe!(c, linked)).rejects.toThrow('linked is a symbolic link; Kiln never follows links')
  })

  test('stops when its signal has fired', async () => {
    const ac = new AbortController()
    ac.abort(new Error('stack deleted'))
    const state: ResourceState = { physicalId: 'x', properties: { path: 'x' }, attributes: {}, data: {} }
    await expect(fileResource.observe!(ctx({ signal: ac.signal }), state)).rejects.toThrow('stack deleted')
  })
})

describe('Kiln::Postgres::Database', () => {
  let admin: pg.Client
  let target: string
  beforeAll(async () => {
    target = records.db.urlFor('postgres')
    admin = new pg.Client({ connectionString: target })
    await admin.connect()
  })
  afterAll(async () => {
    await admin?.end()
  })

  test('in sync as made; then the connection limit, PUBLIC, the owner and the role changed out of band; then dropped', async () => {
    const name = `kiln_obs_${crypto.randomBytes(4).toString('hex')}`
    const c = resourceContext(records, { resourceUuid: uuid(), config: { workspaceDir: '/nonexistent', targetDatabaseUrl: target } })
    const state = await created(database, c, { name })
    try {
      expect(await database.observe!(c, state)).toEqual({ state: 'exists', properties: { name, connection_limit: -1 } })

      await admin.query(`ALTER DATABASE ${name} WITH CONNECTION LIMIT 3`)
      await admin.query(`GRANT CONNECT ON DATABASE ${name} TO PUBLIC`)
      expect(await drift(database, c, state)).toEqual({
        state: 'MODIFIED',
        changes: [{ property: 'connection_limit', stored: -1, seen: 3 }],
        problems: ['PUBLIC may connect to the database'],
      })

      await admin.query(`ALTER DATABASE ${name} OWNER TO CURRENT_USER`)
      expect((await drift(database, c, state)).problems).toEqual([`the database is owned by ${(await admin.query('SELECT current_user AS u')).rows[0].u}, not by its role ${name}`, 'PUBLIC may connect to the database'])
      await admin.query(`DROP ROLE ${name}`)
      expect((await drift(database, c, state)).problems[0]).toBe(`the login role ${name} is missing`)

      await admin.query(`DROP DATABASE ${name}`)
      expect(await database.observe!(c, state)).toEqual({ state: 'gone' })
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.query(`DROP ROLE IF EXISTS ${name}`)
    }
  })
})

describe('state-only types', () => {
  test('observe what the engine stored: never gone, never drifted', async () => {
    const c = resourceContext(records)
    const state: ResourceState = { physicalId: 'p', properties: { value: 'v', wait_secs: 0 }, attributes: { output: 'v' }, data: {} }
    for (const type of [testResource, noneResource, valueResource, waitConditionHandleResource]) {
      expect(await type.observe!(c, state), type.name).toEqual({ state: 'exists', properties: state.properties, attributes: state.attributes })
    }
  })
})

describe('stack check', () => {
  let db: TestDatabase
  let c: TestCluster
  beforeAll(async () => {
    db = await testDatabase()
    c = await TestCluster.start(db.url, { workers: 1 })
  })
  afterAll(async () => {
    await c?.stop()
    await db?.drop()
  })

  test('observes each resource: a file edited out of band fails the check, naming what changed', async () => {
    const template = {
      heat_template_version: '2018-08-31',
      resources: {
        conf: { type: 'Kiln::File', properties: { path: 'check/conf.txt', content: 'v1' } },
        other: { type: 'OS::Heat::TestResource', properties: { value: 'x' } },
      },
    }
    const { stack } = await c.services.create(c.actor, { name: 'checked', template })
    expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
    await c.services.check(c.actor, stack.id)
    expect(await c.settle(stack.id)).toBe('CHECK_COMPLETE')

    fs.writeFileSync(path.join(c.projectWorkspace(), 'check/conf.txt'), 'edited')
    await c.services.check(c.actor, stack.id)
    expect(await c.settle(stack.id)).toBe('CHECK_FAILED')
    const rows = await c.rows(stack.id)
    expect(rows.find((r) => r.name === 'conf')).toMatchObject({ action: 'CHECK', status: 'FAILED', status_reason: 'Resource CHECK failed: check/conf.txt: modified outside Kiln: content' })
  })
})

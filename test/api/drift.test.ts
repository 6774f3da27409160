/**
 * Drift over the real API with worker processes: `POST /api/stacks/{id}/drift`
 * runs a traversal that observes every resource; a file edited out of band
 * and a database dropped out of band are found, stored per resource
 * (`GET …/drift`), marked in the resource listing and the events, and shown
 * by `kiln stack drift` the way Terraform shows changes made outside it. The
 * rows themselves are left as they were. An update with `converge` (Kiln's
 * API and Heat's) brings them back; one without leaves them.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import path from 'node:path'
import pg from 'pg'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { childEnv } from '../../lib/env'
import { renderDrift, type DriftReport } from '../../lib/cli/drift'
import { useKilnEnv } from '../helpers/stack-env'
import { serverNames } from '../helpers/target-cleanup'

const { db, cluster: c, api } = useKilnEnv({ cluster: { workers: 2 } })
/** A superuser session on the server Kiln::Postgres::Database makes databases on (the test database's own). */
let admin: pg.Client

beforeAll(async () => {
  admin = new pg.Client({ connectionString: db.urlFor('postgres') })
  await admin.connect()
}, 120_000)

afterAll(async () => {
  if (admin) await names.drop(admin)
  await admin?.end()
})

const names = serverNames('kiln_drift')
const dbName = names.fresh()
const template = {
  heat_template_version: '2018-08-31',
  parameters: { secret: { type: 'string', hidden: true, default: 'hush-hush-123' } },
  resources: {
    conf: { type: 'Kiln::File', properties: { path: 'drift/conf.txt', content: { list_join: ['', ['v1 ', { get_param: 'secret' }]] } } },
    db: { type: 'Kiln::Postgres::Database', properties: { name: dbName } },
    other: { type: 'OS::Heat::TestResource', properties: { value: 'x' } },
  },
}

function kiln(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.mjs', ...args], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: api.a.token }), timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr })
    })
  })
}

async function drift(id: string): Promise<DriftReport & { resources: (DriftReport['resources'][number] & { resourceId: number })[] }> {
  const r = await api.call('POST', `/api/stacks/${id}/drift`, { body: {} })
  expect(r.status, r.text).toBe(202)
  expect(await c.settle(id)).toBe('DRIFT_COMPLETE')
  const got = await api.call('GET', `/api/stacks/${id}/drift`)
  expect(got.status, got.text).toBe(200)
  return got.body.drift
}

describe('drift', () => {
  let id: string
  const workspaceFile = () => path.join(c.projectWorkspace(api.a.projectId), 'drift/conf.txt')

  test('none at first: every resource in sync; no drift check, no result (404)', async () => {
    const created = await api.call('POST', '/api/stacks', { body: { name: 'drifting', template } })
    expect(created.status, created.text).toBe(201)
    id = created.body.stack.id
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const none = await api.call('GET', `/api/stacks/${id}/drift`)
    expect(none.status).toBe(404)
    expect(none.text).toContain('no drift check has run on stack drifting')

    const d = await drift(id)
    expect(d.resources.map((r) => [r.name, r.state])).toEqual([['conf', 'IN_SYNC'], ['db', 'IN_SYNC'], ['other', 'IN_SYNC']])
    expect(d.summary).toEqual({ inSync: 3, modified: 0, deleted: 0, notChecked: 0 })
    expect(renderDrift(d)).toContain('No drift: the objects of stack drifting match what Kiln stored')
  })

  test('a file edited and a database dropped out of band are found, stored, listed and shown; the rows are left as they were', async () => {
    fs.writeFileSync(workspaceFile(), 'edited by hand')
    await admin.query(`DROP DATABASE ${dbName}`)
    const d = await drift(id)
    const byName = Object.fromEntries(d.resources.map((r) => [r.name, r]))
    // The stored value is derived from a hidden parameter's value: masked whole in what is shown.
    expect(byName.conf).toMatchObject({ type: 'Kiln::File', state: 'MODIFIED', changes: [{ property: 'content', stored: '******', seen: 'edited by hand' }], problems: [] })
    expect(byName.db).toMatchObject({ type: 'Kiln::Postgres::Database', state: 'DELETED', changes: [] })
    expect(byName.other!.state).toBe('IN_SYNC')
    expect(d.summary).toEqual({ inSync: 1, modified: 1, deleted: 1, notChecked: 0 })
    expect(d.current).toBe(true)
    expect(JSON.stringify(d)).not.toContain('hush-hush-123')

    // The resource listing marks each row with its finding; the rows keep their state.
    const listed = (await api.call('GET', `/api/stacks/${id}/resources`)).body.resources as { name: string; action: string; status: string; drift: { state: string; changes: unknown[] } | null }[]
    expect(listed.map((r) => [r.name, `${r.action}_${r.status}`, r.drift?.state])).toEqual([
      ['conf', 'CREATE_COMPLETE', 'MODIFIED'],
      ['db', 'CREATE_COMPLETE', 'DELETED'],
      ['other', 'CREATE_COMPLETE', 'IN_SYNC'],
    ])
    expect(listed[0]!.drift!.changes).toEqual([{ property: 'content', stored: '******', seen: 'edited by hand' }])

    // Each node's event says what it found (names only; the values are in GET …/drift).
    const events = (await api.call('GET', `/api/stacks/${id}/events?limit=1000`)).body.events as { kind: string; resourceName: string; reason: string; traversalId: string; data: Record<string, unknown> | null }[]
    const found = events.filter((e) => e.traversalId === d.traversalId && e.data?.drift).map((e) => [e.resourceName, e.data!.drift, e.data!.changed, e.reason])
    expect(found.sort()).toEqual([
      ['conf', 'MODIFIED', ['content'], 'modified outside Kiln: content'],
      ['db', 'DELETED', [], 'deleted outside Kiln'],
      ['other', 'IN_SYNC', [], 'in sync'],
    ])

    // As Terraform shows changes made outside it.
    const shown = renderDrift(d)
    expect(shown).toContain('Kiln found changes made outside Kiln to stack drifting')
    expect(shown).toContain(['  # conf (Kiln::File) has changed outside Kiln', '  ~ resource "conf" {', '      ~ content = "******" -> "edited by hand"', '    }'].join('\n'))
    expect(shown).toContain(['  # db (Kiln::Postgres::Database) has been deleted outside Kiln', '  - resource "db" {}'].join('\n'))
    expect(shown).not.toContain('"other"')
    expect(shown.split('\n').at(-1)).toBe('2 of 3 resources drifted: 1 modified, 1 deleted, 1 in sync.')
  })

  test('kiln stack drift runs a check and prints it; --exit-code exits 2 on drift', async () => {
    const out = await kiln(['stack', 'drift', 'drifting', '--exit-code'])
    expect(out.code, out.stderr).toBe(2)
    expect(out.stdout).toContain('~ content = "******" -> "edited by hand"')
    expect(out.stdout).toContain('- resource "db" {}')
    const last = await kiln(['stack', 'drift', 'drifting', '--last', '--json'])
    expect(last.code, last.stderr).toBe(0)
    expect(JSON.parse(last.stdout).summary).toEqual({ inSync: 1, modified: 1, deleted: 1, notChecked: 0 })
  })

  test('an update without converge leaves the drift as it is; with converge, the file is written again and the database made again', async () => {
    // Without converge nothing is looked at: the same submission is "no changes", and a forced update changes nothing either.
    const same = await api.call('PATCH', `/api/stacks/${id}`, { body: {} })
    expect(same.status, same.text).toBe(200)
    expect(same.body.noChanges).toBe(true)
    const patch = await api.call('PATCH', `/api/stacks/${id}`, { body: { force: true } })
    expect(patch.status, patch.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(fs.readFileSync(workspaceFile(), 'utf8')).toBe('edited by hand')
    expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).rowCount).toBe(0)

    // A preview observes nothing: it cannot say what converge would do.
    const preview = await api.call('POST', `/api/stacks/${id}/preview`, { body: { converge: true } })
    expect(preview.status).toBe(400)
    expect(preview.body.error.issues[0].path).toBe('body.converge')

    const converged = await api.call('PATCH', `/api/stacks/${id}`, { body: { converge: true } })
    expect(converged.status, converged.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(fs.readFileSync(workspaceFile(), 'utf8')).toBe('v1 hush-hush-123')
    expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [dbName])).rowCount).toBe(1)
    // The file was rewritten in place; the database, gone, was made by a replacement.
    const rows = await c.rows(id)
    expect(rows.filter((r) => r.name === 'conf').map((r) => `${r.action}_${r.status}`)).toEqual(['UPDATE_COMPLETE'])
    expect(rows.filter((r) => r.name === 'db' && !(r.action === 'DELETE' && r.status === 'COMPLETE')).map((r) => `${r.action}_${r.status}`)).toEqual(['CREATE_COMPLETE'])
    expect(rows.filter((r) => r.name === 'other').map((r) => `${r.action}_${r.status}`)).toEqual(['CREATE_COMPLETE'])

    const d = await drift(id)
    expect(d.summary).toEqual({ inSync: 3, modified: 0, deleted: 0, notChecked: 0 })
  })

  test("Heat's converge (openstack stack update --converge) brings back a file edited and chmodded by hand", async () => {
    fs.writeFileSync(workspaceFile(), 'edited again')
    fs.chmodSync(workspaceFile(), 0o600)
    const base = `/v1/${api.a.projectId}/stacks/drifting/${id}`
    const bad = await api.call('PATCH', base, { body: { converge: 'sometimes' } })
    expect(bad.status).toBe(400)
    expect(bad.text).toContain('converge must be true or false')
    const r = await api.call('PATCH', base, { body: { converge: 'true' } })
    expect(r.status, r.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(fs.readFileSync(workspaceFile(), 'utf8')).toBe('v1 hush-hush-123')
    expect(fs.statSync(workspaceFile()).mode & 0o777).toBe(0o644)
  })

  test('a drift check is refused while an operation runs', async () => {
    const slow = await api.call('POST', '/api/stacks', {
      body: { name: 'busy', template: { heat_template_version: '2018-08-31', resources: { h: { type: 'OS::Heat::WaitConditionHandle' }, w: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: 'h' }, timeout: 600 } } } } },
    })
    const busy = slow.body.stack.id as string
    // Held at the wait condition until the test signals it.
    await c.waitFor(async () => (await c.rows(busy)).some((r) => r.name === 'w' && r.action === 'CREATE' && r.status === 'IN_PROGRESS'), 30_000, 'the wait condition to wait')
    const refused = await api.call('POST', `/api/stacks/${busy}/drift`, { body: {} })
    expect(refused.status).toBe(409)
    expect(refused.text).toContain('busy is CREATE_IN_PROGRESS; check its drift when it is done')
    expect((await api.call('POST', `/api/stacks/${busy}/resources/h/signal`, { body: {} })).status).toBe(200)
    expect(await c.settle(busy)).toBe('CREATE_COMPLETE')
  })
})

/**
 * Property schemas and the built-in resource types, against a real
 * filesystem for Kiln::File (ownership, takeover, stale cleanup).
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { describe, expect, test } from 'vitest'
import { fileResource } from '../../lib/resources/builtin/file'
import { randomStringResource, valueResource } from '../../lib/resources/builtin/simple'
import { testResource } from '../../lib/resources/builtin/test-resource'
import { changedProperties, needsReplacement, validateProperties } from '../../lib/resources/schema'
import { ReplaceRequired, type ResourceContext } from '../../lib/resources/types'
import { createLogger } from '../../lib/logger'

function ctx(over: Partial<ResourceContext> = {}, signal = new AbortController().signal): ResourceContext {
  return {
    stackId: 's1',
    stackName: 'st',
    resourceName: 'r',
    resourceUuid: '00000000-0000-4000-8000-000000000001',
    replacesUuid: null,
    physicalName: 'st-r-000000000001',
    signal,
    progress: () => {},
    log: createLogger({ level: 'silent', format: 'text' }),
    config: { workspaceDir: os.tmpdir() },
    ...over,
  }
}

describe('property schemas', () => {
  test("Heat's coercions, defaults, null as absent, and every problem at its path", () => {
    const { value, issues } = validateProperties(testResource.properties, { value: 5, wait_secs: '1.5', fail: 'yes', update_replace: null, action_wait_secs: { create: '2' } })
    expect(issues).toEqual([])
    expect(value).toMatchObject({ value: '5', wait_secs: 1.5, fail: true, update_replace: false, action_wait_secs: { create: 2 }, client_name: '' })
    const bad = validateProperties(testResource.properties, { wait_secs: 'soon', action_wait_secs: { craete: 1 }, valeu: 'x' })
    expect(bad.issues.map((i) => i.path).sort()).toEqual(['action_wait_secs.craete', 'valeu', 'wait_secs'])
    expect(bad.issues.find((i) => i.path === 'valeu')!.message).toContain('did you mean value?')
    expect(validateProperties(valueResource.properties, {}).issues).toEqual([{ path: 'value', message: 'Property value not assigned' }])
    expect(validateProperties(randomStringResource.properties, { length: 0 }).issues[0]!.message).toContain('out of range')
  })

  test('changed properties and which of them force a replacement', () => {
    const changed = changedProperties({ value: 'a', wait_secs: 0, update_replace_value: 'x' }, { value: 'b', wait_secs: 0, update_replace_value: 'y' })
    expect(changed).toEqual(['update_replace_value', 'value'])
    expect(needsReplacement(testResource.properties, changed)).toEqual(['update_replace_value'])
  })
})

describe('OS::Heat::TestResource', () => {
  test('fails after its wait; update_replace asks for a replacement; an abort stops a long wait at once', async () => {
    const props = validateProperties(testResource.properties, { fail: true, wait_secs: 0.2 }).value
    const t0 = Date.now()
    await expect(testResource.create(ctx(), props)).rejects.toThrow('Test Resource failed r')
    expect(Date.now() - t0).toBeGreaterThanOrEqual(190)
    const ok = validateProperties(testResource.properties, { value: 'v' }).value
    expect(await testResource.create(ctx(), ok)).toEqual({ physicalId: 'st-r-000000000001', attributes: { output: 'v' } })
    await expect(testResource.update(ctx(), { ...ok, update_replace: true }, { physicalId: 'p', properties: ok, attributes: {}, data: {} }, ['value'])).rejects.toBeInstanceOf(ReplaceRequired)
    const ac = new AbortController()
    const long = testResource.create(ctx({}, ac.signal), validateProperties(testResource.properties, { wait_secs: 60 }).value)
    const t1 = Date.now()
    setTimeout(() => ac.abort(new Error('stack deleted')), 50)
    await expect(long).rejects.toThrow('stack deleted')
    expect(Date.now() - t1).toBeLessThan(1000)
  })
})

describe('OS::Heat::Value and OS::Heat::RandomString', () => {
  test('Value converts to its type', async () => {
    expect((await valueResource.create(ctx(), { value: '1,2', type: 'comma_delimited_list' })).attributes).toEqual({ value: ['1', '2'] })
    expect((await valueResource.create(ctx(), { value: '{"a":1}', type: 'json' })).attributes).toEqual({ value: { a: 1 } })
    await expect(valueResource.create(ctx(), { value: 'x', type: 'number' })).rejects.toThrow('not a number')
  })

  test('RandomString honours length and class minimums; get_resource is the string', async () => {
    const props = validateProperties(randomStringResource.properties, { length: 12, character_classes: [{ class: 'digits', min: 4 }, { class: 'uppercase', min: 3 }] }).value
    const out = await randomStringResource.create(ctx(), props)
    const s = out.attributes!.value as string
    expect(s).toHaveLength(12)
    expect(s.replace(/\D/g, '').length).toBeGreaterThanOrEqual(4)
    expect(s.replace(/[^A-Z]/g, '').length).toBeGreaterThanOrEqual(3)
    expect(out.physicalId).toBe(s)
    await expect(randomStringResource.create(ctx(), { length: 2, character_classes: [{ class: 'digits', min: 3 }] })).rejects.toThrow('cannot be smaller')
  })
})

describe('Kiln::File', () => {
  test('writes atomically, takes over from its own resource, refuses others, and a stale cleanup leaves the successor alone', async () => {
    const ws = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-file-'))
    const config = { workspaceDir: ws }
    const first = ctx({ config })
    const props = validateProperties(fileResource.properties, { path: 'app/conf.txt', content: 'one' }).value
    const created = await fileResource.create(first, props)
    expect(fs.readFileSync(path.join(ws, 'app/conf.txt'), 'utf8')).toBe('one')
    expect(created.attributes).toMatchObject({ size: 3 })

    // another stack may not take the path
    await expect(fileResource.create(ctx({ config, stackId: 's2' }), props)).rejects.toThrow('managed by')
    // a replacement row of the same resource takes it over
    const second = ctx({ config, resourceUuid: '00000000-0000-4000-8000-000000000002', replacesUuid: first.resourceUuid })
    await fileResource.create(second, { ...props, content: 'two' })
    // the old row's cleanup must not delete the successor's file
    await fileResource.delete(first, { physicalId: 'app/conf.txt', properties: props, attributes: {}, data: {} })
    expect(fs.readFileSync(path.join(ws, 'app/conf.txt'), 'utf8')).toBe('two')
    // the owner's delete removes it, and deleting again is fine
    await fileResource.delete(second, { physicalId: 'app/conf.txt', properties: props, attributes: {}, data: {} })
    await fileResource.delete(second, { physicalId: 'app/conf.txt', properties: props, attributes: {}, data: {} })
    expect(fs.existsSync(path.join(ws, 'app/conf.txt'))).toBe(false)
    // an unmanaged file is never overwritten
    fs.writeFileSync(path.join(ws, 'mine.txt'), 'user data')
    await expect(fileResource.create(first, { ...props, path: 'mine.txt' })).rejects.toThrow('not managed by Kiln')
    expect(fs.readdirSync(path.join(ws, '.kiln', 'tmp'))).toEqual([])
    fs.rmSync(ws, { recursive: true, force: true })
  })

  test('paths must stay inside the workspace', () => {
    for (const p of ['/etc/passwd', '../x', 'a/../../x', '.kiln/owners/x']) {
      expect(validateProperties(fileResource.properties, { path: p }).issues, p).not.toEqual([])
    }
    expect(validateProperties(fileResource.properties, { path: 'a/b.txt' }).issues).toEqual([])
  })
})

describe('Kiln::Postgres::Database', () => {
  test('creates a database and login role, takes over its own, refuses others, and drops only what it owns', async () => {
    const { inject } = await import('vitest')
    const pg = (await import('pg')).default
    const { postgresDatabaseResource: db } = await import('../../lib/resources/builtin/postgres-database')
    const url = inject('adminUrl')
    const name = `kiln_rt_${Date.now().toString(36)}`
    const config = { workspaceDir: os.tmpdir(), targetDatabaseUrl: url }
    const first = ctx({ config })
    const props = validateProperties(db.properties, { name }).value
    const out = await db.create(first, props)
    expect(out.physicalId).toBe(name)
    // the role can log in with the generated password
    const asRole = new pg.Client({ connectionString: out.attributes!.url as string })
    await asRole.connect()
    expect((await asRole.query('SELECT current_database() AS d, current_user AS u')).rows[0]).toEqual({ d: name, u: name })
    await asRole.end()
    await expect(db.create(ctx({ config, stackId: 'other' }), props)).rejects.toThrow('not managed by this resource')
    const second = ctx({ config, resourceUuid: '00000000-0000-4000-8000-000000000002' })
    const taken = await db.create(second, props)
    const state = (o: typeof out) => ({ physicalId: o.physicalId ?? null, properties: props, attributes: o.attributes ?? {}, data: {} })
    await db.delete(first, state(out)) // stale: the successor owns it now
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    const exists = async () => (await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount
    expect(await exists()).toBe(1)
    await db.delete(second, state(taken))
    expect(await exists()).toBe(0)
    expect((await admin.query('SELECT 1 FROM pg_roles WHERE rolname = $1', [name])).rowCount).toBe(0)
    await admin.end()
  })
})

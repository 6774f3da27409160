/**
 * Property schemas and the built-in resource types, called directly as the
 * engine calls them: Kiln::File against a real file system, and both types
 * with their records of outside objects in a real database (ownership,
 * takeover, stale cleanup, tenants kept inside their project).
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest'
import { fileResource, MAX_FILE_BYTES } from '../../lib/resources/builtin/file'
import { randomStringResource, valueResource } from '../../lib/resources/builtin/simple'
import { testResource } from '../../lib/resources/builtin/test-resource'
import { changedProperties, needsReplacement, shownValue, validateProperties } from '../../lib/resources/schema'
import { ReplaceRequired, type ResourceContext, type ResourceTypeConfig } from '../../lib/resources/types'
import { outsideRecords, resourceContext, type OutsideRecords } from '../helpers/resource-context'

let records: OutsideRecords
beforeAll(async () => {
  records = await outsideRecords()
})
afterAll(async () => {
  await records?.close()
})

function ctx(over: Partial<Omit<ResourceContext, 'objects'>> = {}, signal = new AbortController().signal): ResourceContext {
  return resourceContext(records, { config: { workspaceDir: os.tmpdir() }, ...over }, signal)
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

  test('an integer is a JSON integer or a string of decimal digits, held exactly; a range applies after conversion', async () => {
    const { postgresDatabaseResource: db } = await import('../../lib/resources/builtin/postgres-database')
    const limit = (v: unknown) => validateProperties(db.properties, { connection_limit: v })
    for (const given of ['0x10', ' 7', '7 ', '1e3', '7.5', 7.5, '1_000', '', 'Infinity', true, [7]]) {
      expect(limit(given).issues, JSON.stringify(given)).toEqual([{ path: 'connection_limit', message: `Value '${typeof given === 'string' ? given : JSON.stringify(given)}' is not an integer` }])
    }
    for (const given of [1e20, '99999999999999999999']) expect(limit(given).issues[0]?.message, String(given)).toContain('is too large an integer')
    for (const [given, value] of [[7, 7], ['7', 7], ['+7', 7], ['-1', -1], ['007', 7], [-0, 0], [2147483647, 2147483647]] as const) {
      expect(limit(given), String(given)).toEqual({ value: { connection_limit: value }, issues: [] })
    }
    // the type's range (-1 .. int4) after conversion
    expect(limit('-2').issues[0]!.message).toContain('-2 is out of range')
    expect(limit(2147483648).issues[0]!.message).toContain('out of range')
    // numbers: decimal text only, finite
    const wait = (v: unknown) => validateProperties(testResource.properties, { wait_secs: v })
    for (const [given, value] of [['1.5', 1.5], ['1e3', 1000], ['.5', 0.5], [2, 2]] as const) expect(wait(given).value.wait_secs, String(given)).toBe(value)
    for (const given of ['0x10', ' 1', 'Infinity', 'NaN', '1,5']) expect(wait(given).issues, given).toHaveLength(1)
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
  const workspaces: string[] = []
  /** A fresh workspace directory and project, and a context in them (records of other tests' projects never count here). */
  function inWorkspace(config: Partial<ResourceTypeConfig> = {}) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-file-'))
    workspaces.push(dir)
    const projectId = crypto.randomUUID()
    const full = { workspaceDir: dir, ...config }
    return { dir, projectId, root: path.join(dir, projectId), at: (over: Partial<Omit<ResourceContext, 'objects'>> = {}) => ctx({ config: full, projectId, ...over }) }
  }
  afterAll(() => {
    for (const d of workspaces) fs.rmSync(d, { recursive: true, force: true })
  })
  const props = (p: Record<string, unknown>) => {
    const v = validateProperties(fileResource.properties, p)
    expect(v.issues).toEqual([])
    return v.value
  }
  const state = (p: Record<string, unknown>) => ({ physicalId: String(p.path), properties: p, attributes: {}, data: {} })
  const uuidN = (n: number) => `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`
  /** Every message a tenant reads names paths relative to its workspace, never the server's. */
  const failure = async (p: Promise<unknown>, dir: string): Promise<string> => {
    const err = (await p.then(() => null, (e: unknown) => e)) as Error | null
    expect(err, 'the action should have failed').not.toBeNull()
    expect(err!.message).not.toContain(dir)
    expect(err!.name).toBe('ResourceActionError')
    return err!.message
  }

  test('writes atomically, takes over from its own resource, refuses others, and a stale cleanup leaves the successor alone', async () => {
    const { root, dir, at } = inWorkspace()
    const first = at()
    const p = props({ path: 'app/conf.txt', content: 'one' })
    const created = await fileResource.create(first, p)
    expect(fs.readFileSync(path.join(root, 'app/conf.txt'), 'utf8')).toBe('one')
    expect(created.attributes).toMatchObject({ size: 3, path: 'app/conf.txt' })

    // another stack of the project may not take the path
    expect(await failure(fileResource.create(at({ stackId: uuidN(52) }), p), dir)).toContain('belongs to resource r of stack')
    // a replacement row of the same resource takes it over
    const second = at({ resourceUuid: uuidN(2), replacesUuid: first.resourceUuid })
    await fileResource.create(second, { ...p, content: 'two' })
    // the old row's cleanup must not delete the successor's file
    await fileResource.delete(first, state(p))
    expect(fs.readFileSync(path.join(root, 'app/conf.txt'), 'utf8')).toBe('two')
    // the owner's delete removes it (and the directory it leaves empty), and deleting again is fine
    await fileResource.delete(second, state(p))
    await fileResource.delete(second, state(p))
    expect(fs.existsSync(path.join(root, 'app'))).toBe(false)
    // a file Kiln did not write is never overwritten
    fs.writeFileSync(path.join(root, 'mine.txt'), 'user data')
    expect(await failure(fileResource.create(first, { ...p, path: 'mine.txt' }), dir)).toBe('mine.txt already exists and was not written by Kiln; remove it or choose another path')
    expect(fs.readFileSync(path.join(root, 'mine.txt'), 'utf8')).toBe('user data')
    expect(fs.readdirSync(path.join(dir, '.kiln-tmp'))).toEqual([])
  })

  test('paths are plain relative paths: no "..", ".", empty names or leading "/", so a file has one name', () => {
    for (const p of ['/etc/passwd', '../x', 'a/../../x', './.kiln/owners/x.json', 'a/./b', 'a//b', 'a/', '.', '..', 'x'.repeat(256), 'a\0b']) {
      expect(validateProperties(fileResource.properties, { path: p }).issues, p).toEqual([expect.objectContaining({ path: 'path' })])
    }
    for (const p of ['a/b.txt', '.kiln/owners/x.json', '...', 'a/.hidden', 'x'.repeat(255)]) expect(validateProperties(fileResource.properties, { path: p }).issues, p).toEqual([])
  })

  test("a project's files live in its own workspace: another project's stack with the same paths, or a forged ownership record, cannot reach them", async () => {
    const { dir, root, at } = inWorkspace()
    const projectB = '00000000-0000-4000-8000-00000000000b'
    const stackB = uuidN(60)
    await fileResource.create(at(), props({ path: 'shared/conf.txt', content: 'A' }))
    // B writes what used to be the ownership record of A's file, naming its own resource, then the same path.
    const forged = JSON.stringify({ stackId: stackB, resource: 'victim', uuid: uuidN(61) })
    const b = (name: string, n: number) => at({ projectId: projectB, stackId: stackB, resourceName: name, resourceUuid: uuidN(n) })
    await fileResource.create(b('forge', 62), props({ path: '.kiln/owners/shared/conf.txt.json', content: forged }))
    const victim = await fileResource.create(b('victim', 61), props({ path: 'shared/conf.txt', content: 'B' }))
    // Written in B's own workspace; its path attribute is relative to it (the server's path is not B's to know).
    expect(victim.attributes!.path).toBe('shared/conf.txt')
    expect(fs.readFileSync(path.join(dir, projectB, 'shared/conf.txt'), 'utf8')).toBe('B')
    expect(fs.readFileSync(path.join(root, 'shared/conf.txt'), 'utf8')).toBe('A')
    await fileResource.delete(b('victim', 61), state({ path: 'shared/conf.txt' }))
    await fileResource.delete(b('forge', 62), state({ path: '.kiln/owners/shared/conf.txt.json' }))
    expect(fs.readFileSync(path.join(root, 'shared/conf.txt'), 'utf8')).toBe('A')
    expect(fs.readdirSync(path.join(dir, projectB))).toEqual([])
    expect(await fileResource.observe!(at(), state({ path: 'shared/conf.txt', content: 'A' }))).toMatchObject({ state: 'exists', properties: { content: 'A' } })
  })

  test('a symbolic link in the workspace is never followed: not as a parent, not as the file', async () => {
    const { dir, root, at } = inWorkspace()
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-outside-'))
    workspaces.push(outside)
    fs.writeFileSync(path.join(outside, 'secret.txt'), 'outside')
    fs.mkdirSync(root, { recursive: true })
    fs.symlinkSync(outside, path.join(root, 'link'))
    fs.symlinkSync(path.join(outside, 'secret.txt'), path.join(root, 'target.txt'))

    expect(await failure(fileResource.create(at(), props({ path: 'link/x.txt', content: 'x' })), dir)).toBe('link is a symbolic link; Kiln never follows links')
    expect(await failure(fileResource.create(at(), props({ path: 'link/secret.txt', content: 'x' })), dir)).toBe('link is a symbolic link; Kiln never follows links')
    expect(await failure(fileResource.create(at(), props({ path: 'target.txt', content: 'x' })), dir)).toContain('target.txt already exists and was not written by Kiln')
    expect(fs.readdirSync(outside)).toEqual(['secret.txt'])
    expect(fs.readFileSync(path.join(outside, 'secret.txt'), 'utf8')).toBe('outside')

    // A file Kiln wrote whose directory is then swapped for a link: an update, a look (observe) and the delete never go through it.
    const p = props({ path: 'sub/own.txt', content: 'mine' })
    await fileResource.create(at(), p)
    fs.renameSync(path.join(root, 'sub'), path.join(root, 'moved'))
    fs.symlinkSync(outside, path.join(root, 'sub'))
    fs.writeFileSync(path.join(outside, 'own.txt'), 'not Kiln\'s')
    expect(await failure(fileResource.update(at(), { ...p, content: 'new' }, state(p), ['content']), dir)).toBe('sub is a symbolic link; Kiln never follows links')
    expect(await failure(fileResource.observe!(at(), state(p)), dir)).toBe('sub is a symbolic link; Kiln never follows links')
    await fileResource.delete(at(), state(p))
    expect(fs.readFileSync(path.join(outside, 'own.txt'), 'utf8')).toBe("not Kiln's")
    expect(fs.readdirSync(path.join(dir, '.kiln-tmp'))).toEqual([])
  })

  test("sizes: content over the limit is refused at validation, a project's files within its quota, large content shown cut", async () => {
    const big = 'x'.repeat(MAX_FILE_BYTES + 1)
    expect(validateProperties(fileResource.properties, { path: 'a', content: big }).issues).toEqual([{ path: 'content', message: `the content may be at most ${MAX_FILE_BYTES} bytes` }])
    expect(validateProperties(fileResource.properties, { path: 'a', content: 'é'.repeat(MAX_FILE_BYTES / 2) }).issues).toEqual([])
    expect(validateProperties(fileResource.properties, { path: 'a', content: 'é'.repeat(MAX_FILE_BYTES / 2 + 1) }).issues).toHaveLength(1)

    const { dir, root, at } = inWorkspace({ workspaceQuotaBytes: 1000 })
    const one = at({ resourceName: 'one', resourceUuid: uuidN(71) })
    const two = at({ resourceName: 'two', resourceUuid: uuidN(72) })
    await fileResource.create(one, props({ path: 'one.txt', content: 'a'.repeat(600) }))
    expect(await failure(fileResource.create(two, props({ path: 'two.txt', content: 'b'.repeat(600) })), dir)).toBe(
      "two.txt: 600 bytes would take the project's files to 1200 bytes, over its workspace quota of 1000 bytes (KILN_WORKSPACE_QUOTA_BYTES)",
    )
    expect(fs.existsSync(path.join(root, 'two.txt'))).toBe(false)
    // a file's own bytes are not counted twice when it is rewritten; another project has a quota of its own
    await fileResource.update(one, props({ path: 'one.txt', content: 'a'.repeat(900) }), state({ path: 'one.txt' }), ['content'])
    await fileResource.create(at({ projectId: '00000000-0000-4000-8000-00000000000c', resourceName: 'two', resourceUuid: uuidN(73) }), props({ path: 'two.txt', content: 'b'.repeat(600) }))
    // deleting frees the bytes
    await fileResource.delete(one, state({ path: 'one.txt' }))
    await fileResource.create(two, props({ path: 'two.txt', content: 'b'.repeat(600) }))

    const shown = shownValue(fileResource.properties.content, 'é'.repeat(5000)) as string
    expect(Buffer.byteLength(shown)).toBeLessThan(4200)
    expect(shown).toMatch(/^é+… \[10000 bytes in all; the first 4096 shown\]$/)
    expect(shownValue(fileResource.properties.content, 'short')).toBe('short')
  })

  test('long names: 251-255 bytes work and leave no temp file; longer ones are refused before anything is written', async () => {
    const { dir, root, projectId, at } = inWorkspace()
    for (const n of [251, 255]) {
      const name = 'n'.repeat(n)
      const p = props({ path: `long/${name}`, content: String(n) })
      await fileResource.create(at(), p)
      expect(fs.readFileSync(path.join(root, 'long', name), 'utf8')).toBe(String(n))
      await fileResource.delete(at(), state(p))
    }
    // 128 characters, 384 bytes: passes the pattern's character count, refused by its bytes
    const wide = '€'.repeat(128)
    expect(await failure(fileResource.create(at(), props({ path: `long/${wide}`, content: 'x' })), dir)).toContain('is 384 bytes; at most 255 are allowed')
    expect(fs.readdirSync(path.join(dir, '.kiln-tmp'))).toEqual([])
    expect(fs.readdirSync(root)).toEqual([])
    expect((await records.pool.query(`SELECT key FROM outside_object WHERE scope = $1 AND key LIKE 'long/%'`, [projectId])).rows).toEqual([])
  })

  test('a delete removes the directories it leaves empty, up to the workspace, and no further', async () => {
    const { root, at } = inWorkspace()
    const deep = props({ path: 'a/b/c/deep.txt', content: 'd' })
    const beside = props({ path: 'a/beside.txt', content: 'b' })
    await fileResource.create(at({ resourceName: 'deep', resourceUuid: uuidN(81) }), deep)
    await fileResource.create(at({ resourceName: 'beside', resourceUuid: uuidN(82) }), beside)
    await fileResource.delete(at({ resourceName: 'deep', resourceUuid: uuidN(81) }), state(deep))
    expect(fs.readdirSync(path.join(root, 'a'))).toEqual(['beside.txt'])
    await fileResource.delete(at({ resourceName: 'beside', resourceUuid: uuidN(82) }), state(beside))
    expect(fs.readdirSync(root)).toEqual([])
  })

  /**
   * The moment another file's delete removes a directory it left empty falls between the walk's
   * check of that directory and its realpath: the directory is removed there, once, as that delete would.
   */
  function removedMidWalk(dir: string) {
    const real = fs.promises.realpath.bind(fs.promises)
    let done = false
    return vi.spyOn(fs.promises, 'realpath').mockImplementation(async (p, ...rest) => {
      if (!done && p === dir) {
        done = true
        fs.rmdirSync(dir)
      }
      return real(p, ...rest)
    })
  }

  test("a directory another file's delete removes mid-walk: a delete finds its file gone, a create makes the directory again", async () => {
    const { root, at } = inWorkspace()
    // A file whose create died before writing: its record is there, the file and its directory's content are not.
    const never = props({ path: 'shared/never.txt', content: 'n' })
    await fileResource.create(at({ resourceName: 'never', resourceUuid: uuidN(91) }), never)
    fs.rmSync(path.join(root, 'shared/never.txt'))
    let spy = removedMidWalk(path.join(root, 'shared'))
    try {
      await fileResource.delete(at({ resourceName: 'never', resourceUuid: uuidN(91) }), state(never))
    } finally {
      spy.mockRestore()
    }
    expect(fs.readdirSync(root)).toEqual([])

    fs.mkdirSync(path.join(root, 'shared'))
    spy = removedMidWalk(path.join(root, 'shared'))
    try {
      await fileResource.create(at({ resourceName: 'made', resourceUuid: uuidN(92) }), props({ path: 'shared/made.txt', content: 'm' }))
      expect(spy.mock.calls.length).toBeGreaterThan(0)
    } finally {
      spy.mockRestore()
    }
    expect(fs.readFileSync(path.join(root, 'shared/made.txt'), 'utf8')).toBe('m')
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
    await expect(db.create(ctx({ config, stackId: '00000000-0000-4000-8000-000000000099' }), props)).rejects.toThrow(`database ${name} belongs to resource ${first.resourceName} of stack ${first.stackId}`)
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
    expect((await records.pool.query(`SELECT 1 FROM outside_object WHERE key = $1`, [name])).rowCount).toBe(0)
    await admin.end()
  })

  test("a role or database Kiln did not create is never altered or dropped, and a tenant role's password never reaches the server", async () => {
    const { inject } = await import('vitest')
    const pg = (await import('pg')).default
    const { postgresDatabaseResource: db } = await import('../../lib/resources/builtin/postgres-database')
    const url = inject('adminUrl')
    const admin = new pg.Client({ connectionString: url })
    await admin.connect()
    const operator = `app_reader_${Date.now().toString(36)}`
    await admin.query(`CREATE ROLE ${operator} LOGIN PASSWORD 'operator-secret' IN ROLE pg_read_all_data`)
    try {
      const secret = async () => (await admin.query('SELECT rolpassword FROM pg_authid WHERE rolname = $1', [operator])).rows[0]?.rolpassword as string | undefined
      const before = await secret()
      const config = { workspaceDir: os.tmpdir(), targetDatabaseUrl: url }
      const props = validateProperties(db.properties, { name: operator }).value
      await expect(db.create(ctx({ config }), props)).rejects.toThrow(`database ${operator}: the name is taken on the server by something this project does not own; choose another name`)
      // its delete (a cleanup by the properties the create started with) leaves the role alone
      await db.delete(ctx({ config }), { physicalId: null, properties: props, attributes: {}, data: {} })
      expect(await secret()).toBe(before)
      expect((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [operator])).rowCount).toBe(0)
      expect((await records.pool.query(`SELECT 1 FROM outside_object WHERE key = $1`, [operator])).rowCount).toBe(0)

      // A role Kiln makes gets a SCRAM verifier computed here; the password itself never left Kiln.
      const name = `kiln_pw_${Date.now().toString(36)}`
      const own = ctx({ config, resourceName: 'pw' })
      const out = await db.create(own, validateProperties(db.properties, { name }).value)
      const stored = (await admin.query('SELECT rolpassword, rolconnlimit, rolinherit FROM pg_authid WHERE rolname = $1', [name])).rows[0]
      expect(stored.rolpassword).toMatch(/^SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/)
      expect(stored.rolpassword).not.toContain(out.attributes!.password as string)
      expect(stored).toMatchObject({ rolconnlimit: 20, rolinherit: false })
      await db.delete(own, { physicalId: name, properties: {}, attributes: out.attributes!, data: {} })
    } finally {
      await admin.query(`DROP ROLE IF EXISTS ${operator}`)
      await admin.end()
    }
  })
})

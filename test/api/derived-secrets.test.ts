/**
 * Attributes made from a secret are secret (lib/resources/secrets.ts), over
 * HTTP with real workers: a `Kiln::File` whose content is a hidden parameter
 * shows its digest nowhere in clear (resource show, events, outputs, the Heat
 * API, the socket stream, a failure message quoting it, the worker logs); an
 * output that reads it is sensitive; a resource whose property reads it is
 * masked too. A file made from plain values still shows its digest. A file's
 * `path` attribute is relative to the project's workspace: the server's path
 * shows nowhere. Rows written before (an absolute path, a digest not among
 * the row's secret forms) are put right by their migration.
 */
import { createHash, randomBytes } from 'node:crypto'
import fs from 'node:fs'
import path from 'node:path'
import { io as connect } from 'socket.io-client'
import { beforeAll, describe, expect, test } from 'vitest'
import { around, stackUrls, sweep } from '../helpers/secret-sweep'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1 } })

const PW = `hunter2xyz-${randomBytes(6).toString('hex')}`
const PLAIN = 'just some text'
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex')
const DIGEST = sha256(PW)

const TEMPLATE = (opts: { failing: boolean }) => `heat_template_version: 2018-08-31
parameters:
  pw:
    type: string
    hidden: true
resources:
  secret_file:
    type: Kiln::File
    properties:
      path: conf/secret.txt
      content: { get_param: pw }
  plain_file:
    type: Kiln::File
    properties:
      path: conf/plain.txt
      content: ${PLAIN}
  consumer:
    type: OS::Heat::TestResource
    properties:
      value: { get_attr: [secret_file, sha256] }
${opts.failing ? `  as_number:
    type: OS::Heat::Value
    depends_on: [consumer]
    properties:
      type: number
      value: { get_attr: [secret_file, sha256] }
` : ''}outputs:
  digest:
    value: { get_attr: [secret_file, sha256] }
  size:
    value: { get_attr: [secret_file, size] }
  everything:
    value: { get_attr: [secret_file] }
  through_consumer:
    value: { get_attr: [consumer, output] }
  secret_path:
    value: { get_attr: [secret_file, path] }
  plain_digest:
    value: { get_attr: [plain_file, sha256] }
`
const SENSITIVE = ['digest', 'size', 'everything', 'through_consumer']
const RESOURCES = ['secret_file', 'plain_file', 'consumer', 'as_number']

const stack = { id: '', frames: [] as string[] }

beforeAll(async () => {
  const created = await api.call('POST', '/api/stacks', { body: { name: 'files', template: TEMPLATE({ failing: false }), parameters: { pw: PW } } })
  expect(created.status, created.text).toBe(201)
  stack.id = created.body.stack.id as string
  expect(await c.settle(stack.id)).toBe('CREATE_COMPLETE')
  // From here on the socket stream is watched too: an update whose new resource fails converting the digest
  // to a number (its message would quote it).
  const s = connect(api.url, { transports: ['websocket'], reconnection: false, forceNew: true, auth: { token: api.a.token } })
  s.onAny((event: string, payload: unknown) => stack.frames.push(`${event} ${JSON.stringify(payload)}`))
  await new Promise<void>((resolve) => s.on('connect', () => s.emit('stack:subscribe', stack.id, () => resolve())))
  expect((await api.call('PUT', `/api/stacks/${stack.id}`, { body: { template: TEMPLATE({ failing: true }), parameters: { pw: PW } } })).status).toBe(202)
  expect(await c.settle(stack.id)).toBe('UPDATE_FAILED')
  await c.waitFor(async () => stack.frames.some((f) => f.includes('as_number') && f.includes('FAILED')), 10_000, 'the failed update on the socket')
  s.close()
}, 120_000)

type Row = { name: string; statusReason: string; properties: Record<string, unknown>; attributes: Record<string, unknown> }
const resources = async () => (await api.call('GET', `/api/stacks/${stack.id}/resources`)).body.resources as Row[]

describe('a Kiln::File made from a hidden parameter', () => {
  test('its digest, and the server’s path, appear in no response, socket event or log line', async () => {
    // They are really there: the file holds the secret, the rows the digest, the failure quoted it.
    const ws = c.projectWorkspace(api.a.projectId)
    expect(fs.readFileSync(path.join(ws, 'conf/secret.txt'), 'utf8')).toBe(PW)
    const stored = JSON.stringify((await c.db.pool.query(`SELECT attributes, properties, status_reason FROM resource WHERE stack_id = $1`, [stack.id])).rows)
    expect(stored).toContain(DIGEST)
    const failed = (await c.db.pool.query(`SELECT status_reason FROM resource WHERE stack_id = $1 AND name = 'as_number'`, [stack.id])).rows[0].status_reason as string
    expect(failed).toMatch(/^Resource CREATE failed: Value '.+' is not a number$/)

    const traversals = (await api.call('GET', `/api/stacks/${stack.id}/traversals`)).body.traversals.map((t: { id: string }) => t.id) as string[]
    const needles = [DIGEST, c.workspace]
    const { leaks, fetched } = await sweep(api, stackUrls(api, { id: stack.id, name: 'files', traversals, resources: RESOURCES, keys: [...SENSITIVE, 'secret_path', 'plain_digest'] }), needles)
    expect(fetched).toBeGreaterThan(60)
    for (const f of stack.frames) {
      const at = around(f, needles)
      if (at !== null) leaks.push(`socket: ${at}`)
    }
    const logs = c.workers.map((w) => w.output.join('')).join('\n')
    expect(logs).toMatch(/as_number/) // the failure was logged: there is something to search
    const inLogs = around(logs, [DIGEST])
    if (inLogs !== null) leaks.push(`worker log: ${inLogs}`)
    expect(leaks).toEqual([])
  })

  test('masked, not dropped: its digest and size are masked, its path is relative, and what reads them is masked too', async () => {
    const rows = await resources()
    const row = (n: string) => rows.find((r) => r.name === n)!
    expect(row('secret_file').attributes).toEqual({ path: 'conf/secret.txt', sha256: '******', size: '******' })
    expect(row('consumer').properties.value).toBe('******')
    expect(row('consumer').attributes.output).toBe('******')
    expect(row('as_number').statusReason).toBe("Resource CREATE failed: Value '******' is not a number")
    // the Heat API's resource show
    const heat = await api.call('GET', `/v1/${api.a.projectId}/stacks/files/${stack.id}/resources/secret_file`)
    expect(heat.status).toBe(200)
    expect(heat.body.resource.attributes).toEqual({ path: 'conf/secret.txt', sha256: '******', size: '******' })
  })

  test('an output that reads its digest or size is sensitive: masked in the lists, shown only when asked for by name', async () => {
    const masked = Object.fromEntries(SENSITIVE.map((k) => [k, { value: '******', sensitive: true }]))
    const shown = (await api.call('GET', `/api/stacks/${stack.id}`)).body.stack.outputs
    expect(shown).toMatchObject(masked)
    expect(shown.secret_path).toEqual({ value: 'conf/secret.txt' })
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs`)).body.outputs).toMatchObject(masked)
    const heat = (await api.call('GET', `/v1/${api.a.projectId}/stacks/files/${stack.id}`)).body.stack.outputs as { output_key: string; output_value: unknown }[]
    for (const k of SENSITIVE) expect(heat.find((o) => o.output_key === k)?.output_value, k).toBe('******')
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/digest?reveal=true`)).body.output).toEqual({ key: 'digest', value: DIGEST, sensitive: true })
    expect((await api.call('GET', `/api/stacks/${stack.id}/outputs/size?reveal=true`)).body.output.value).toBe(Buffer.byteLength(PW))
  })

  test('a preview of an update that reads its digest shows it masked', async () => {
    const reader = '  reader:\n    type: OS::Heat::TestResource\n    properties:\n      value: { get_attr: [secret_file, sha256] }\n'
    const template = TEMPLATE({ failing: false }).replace('outputs:', `${reader}outputs:`)
    const preview = await api.call('POST', `/api/stacks/${stack.id}/preview`, { body: { template, parameters: { pw: PW } } })
    expect(preview.status, preview.text).toBe(200)
    expect(JSON.stringify(preview.body)).toMatch(/"reader"/)
    expect(preview.text).toContain('******')
    expect(around(preview.text, [DIGEST, c.workspace])).toBeNull()
  })
})

describe('a Kiln::File made from plain values', () => {
  test('shows its digest and size, and its path relative to the workspace', async () => {
    const plain = (await resources()).find((r) => r.name === 'plain_file')!
    expect(plain.attributes).toEqual({ path: 'conf/plain.txt', sha256: sha256(PLAIN), size: Buffer.byteLength(PLAIN) })
    expect((await api.call('GET', `/api/stacks/${stack.id}`)).body.stack.outputs.plain_digest).toEqual({ value: sha256(PLAIN) })
    const heat = await api.call('GET', `/v1/${api.a.projectId}/stacks/files/${stack.id}/resources/plain_file`)
    expect(heat.body.resource.attributes.sha256).toBe(sha256(PLAIN))
  })
})

describe('rows written before attributes made from secrets were secret', () => {
  test('their migration makes the path relative and the digest and size of a secret file secret; a plain file keeps its digest', async () => {
    // Two files and an output: nothing else of the stack holds the digest.
    const template = TEMPLATE({ failing: false }).replace(/ {2}consumer:[\s\S]*?(?=outputs:)/, '').replace(/ {2}through_consumer:\n.*\n/, '').replaceAll('conf/', 'older/')
    expect(template).not.toContain('consumer')
    const created = await api.call('POST', '/api/stacks', { body: { name: 'older', template, parameters: { pw: PW } } })
    expect(created.status, created.text).toBe(201)
    const id = created.body.stack.id as string
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    // As an earlier version stored them: the server's path, and no forms of the attributes.
    const abs = path.join(c.projectWorkspace(api.a.projectId), 'older')
    await c.db.pool.query(
      `UPDATE resource SET attributes = jsonb_set(attributes, '{path}', to_jsonb($2 || '/' || (properties->>'path'))),
              secret_forms = CASE WHEN name = 'secret_file' THEN ARRAY[$3] ELSE secret_forms END
        WHERE stack_id = $1 AND type = 'Kiln::File'`,
      [id, path.dirname(abs), PW],
    )
    const before = (await api.call('GET', `/api/stacks/${id}/resources`)).body.resources as Row[]
    expect(before.find((r) => r.name === 'secret_file')!.attributes.sha256).toBe(DIGEST) // what the migration is for
    const dir = path.join('prisma', 'migrations', fs.readdirSync('prisma/migrations').find((d) => d.endsWith('_file_attributes_relative_and_secret'))!)
    await c.db.pool.query(fs.readFileSync(path.join(dir, 'migration.sql'), 'utf8'))
    const after = (await api.call('GET', `/api/stacks/${id}/resources`)).body.resources as Row[]
    expect(after.find((r) => r.name === 'secret_file')!.attributes).toEqual({ path: 'older/secret.txt', sha256: '******', size: '******' })
    expect(after.find((r) => r.name === 'plain_file')!.attributes).toEqual({ path: 'older/plain.txt', sha256: sha256(PLAIN), size: Buffer.byteLength(PLAIN) })
    expect((await api.call('GET', `/api/stacks/${id}`)).body.stack.outputs.digest).toEqual({ value: '******', sensitive: true })
  })
})

/**
 * The example of examples/notes, as its script runs it: the Notes provider
 * (a process of its own, keeping notes on disk), registered with Kiln, and
 * its stack: a note, a PostgreSQL database, and a Kiln::Exec step that
 * signals a wait condition through the handle's own endpoint and token. A
 * note edited by hand is drift; the stack's delete removes the note.
 */
import { execFile, type ChildProcess } from 'node:child_process'
import fs from 'node:fs'
import { createServer, type AddressInfo } from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, expect, test } from 'vitest'
import { childEnv } from '../../lib/env'
import { startApiServer, type ApiServer } from '../helpers/api-server'
import { TestCluster } from '../helpers/cluster'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { startNotesProvider } from '../helpers/notes-provider'

const SECRET = 'notes-example-secret-0123456789'
let db: TestDatabase
let c: TestCluster
let api: ApiServer
let provider: ChildProcess
let providerUrl: string
let notesDir: string

function kiln(args: string[]): Promise<{ stdout: string }> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['bin/kiln.mjs', ...args], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: api.a.token }), timeout: 60_000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`kiln ${args.join(' ')}: ${stderr || err.message}`))
      else resolve({ stdout })
    })
  })
}

async function freePort(): Promise<number> {
  const s = createServer()
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r))
  const port = (s.address() as AddressInfo).port
  await new Promise<void>((r) => s.close(() => r()))
  return port
}

beforeAll(async () => {
  notesDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-notes-'))
  ;({ url: providerUrl, proc: provider } = await startNotesProvider(notesDir, SECRET))
  // The wait condition handle's endpoint is Kiln's public URL: the API server listens where the workers say it is.
  const port = await freePort()
  db = await testDatabase()
  c = await TestCluster.start(db.url, { workers: 2, env: { KILN_EXEC_COMMANDS: '/bin/sh', KILN_PUBLIC_URL: `http://127.0.0.1:${port}` } })
  api = await startApiServer(c, { port })
}, 120_000)

afterAll(async () => {
  provider?.kill('SIGTERM')
  await api?.close()
  await c?.stop()
  await db?.drop()
  fs.rmSync(notesDir, { recursive: true, force: true })
})

test('the Notes example: provider, database, an Exec step that signals a wait condition; drift and delete', async () => {
  // Registered as the example's script does, with the CLI.
  const reg = await kiln(['provider', 'add', 'notes', providerUrl, '--prefix', 'Notes', '--secret', SECRET])
  expect(reg.stdout).toContain('provider notes registered: Notes::Note')
  expect((await kiln(['provider', 'list'])).stdout).toMatch(/notes\s+Notes\s+http:\/\/127\.0\.0\.1:\d+\s+project\s+Note/)
  const created = await api.call('POST', '/api/stacks', { body: { name: 'notes-demo', template: fs.readFileSync('examples/notes/stack.yaml', 'utf8') } })
  expect(created.status, created.text).toBe(201)
  const id = created.body.stack.id as string
  expect(await c.settle(id, 120_000)).toBe('CREATE_COMPLETE')

  const outputs = (await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs as Record<string, { value: unknown }>
  const file = String(outputs.note_file!.value)
  expect(path.dirname(file)).toBe(path.join(notesDir, 'notes'))
  const database = String(outputs.database!.value)
  const note = JSON.parse(fs.readFileSync(file, 'utf8'))
  expect(note).toMatchObject({ title: 'welcome', body: `Kiln was here (database ${database})` })
  expect(outputs.announced!.value).toEqual(JSON.stringify({ '1': '5 words' }))

  // Drift: the note edited by hand.
  fs.writeFileSync(file, JSON.stringify({ ...note, body: 'edited by hand' }))
  expect((await api.call('POST', `/api/stacks/${id}/drift`, { body: {} })).status).toBe(202)
  expect(await c.settle(id)).toBe('DRIFT_COMPLETE')
  const drift = (await api.call('GET', `/api/stacks/${id}/drift`)).body.drift
  expect(drift.resources.find((r: { name: string }) => r.name === 'note')).toMatchObject({ state: 'MODIFIED', changes: [{ property: 'body', seen: 'edited by hand' }] })

  expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
  expect(await c.settle(id, 60_000)).toBe('DELETE_COMPLETE')
  expect(fs.readdirSync(path.join(notesDir, 'notes'))).toEqual([])
  expect((await kiln(['provider', 'remove', 'notes'])).stdout).toContain('provider notes removed')
})

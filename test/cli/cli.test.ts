/**
 * The `kiln` CLI run as a process (bin/kiln.mjs) against a running API with
 * Socket.IO and worker processes: create --wait with live progress, update
 * while running (supersedes), preview, cancel, events, export-graph, validate
 * errors with line and column, and non-zero exits on FAILED.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { childEnv } from '../../lib/env'
import { gateHeld } from '../helpers/gate'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 2, leaseMs: 2000 } })
let dir: string

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-cli-'))
})
afterAll(() => {
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

function kiln(args: string[], opts: { token?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['bin/kiln.mjs', ...args], { env: childEnv({ KILN_URL: api.url, KILN_TOKEN: opts.token ?? api.a.token }), timeout: 60_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr })
    })
  })
}

function file(name: string, body: string): string {
  const p = path.join(dir, name)
  fs.writeFileSync(p, body)
  return p
}

const chain = (value: string, wait: number, fail = false) => `heat_template_version: 2018-08-31
resources:
  a:
    type: OS::Heat::TestResource
    properties: { value: ${value}, wait_secs: ${wait} }
  b:
    type: OS::Heat::TestResource
    properties: { value: { get_attr: [a, output] }, wait_secs: ${wait}, fail: ${fail} }
outputs:
  result: { value: { get_attr: [b, output] } }
`

/**
 * `chain(value)` behind a gate (test/helpers/gate.ts): `a` waits for a wait condition that only a signal
 * to gate_handle releases, so the update is still running when the next command arrives, however long
 * a CLI process takes to start on a busy machine.
 */
const gatedChain = (value: string) => `heat_template_version: 2018-08-31
resources:
  gate_handle:
    type: OS::Heat::WaitConditionHandle
  gate:
    type: OS::Heat::WaitCondition
    properties: { handle: { get_resource: gate_handle }, timeout: 3600 }
  a:
    type: OS::Heat::TestResource
    depends_on: gate
    properties: { value: ${value} }
  b:
    type: OS::Heat::TestResource
    properties: { value: { get_attr: [a, output] } }
outputs:
  result: { value: { get_attr: [b, output] } }
`

// Every CLI process starts TypeScript (seconds each on a busy machine): a test that runs several may take minutes.
describe('kiln CLI', { timeout: 300_000 }, () => {
  test('create --wait follows the live stream to the end and prints the events', async () => {
    const r = await kiln(['stack', 'create', 'cli1', '-t', file('one.yaml', chain('one', 0.2)), '--wait'])
    expect(r.stderr).not.toContain('no live stream')
    expect(r.code).toBe(0)
    expect(r.stdout).toMatch(/a\s+CREATE_COMPLETE/)
    expect(r.stdout).toMatch(/b\s+CREATE_COMPLETE/)
    expect(r.stdout.trim().split('\n').at(-1)).toMatch(/^CREATE_COMPLETE/)
    const show = await kiln(['--json', 'stack', 'show', 'cli1'])
    expect(JSON.parse(show.stdout).outputs.result.value).toBe('one')
    const list = await kiln(['stack', 'list'])
    expect(list.stdout).toMatch(/cli1\s+\S+\s+CREATE_COMPLETE/)
  })

  test('update while running supersedes; preview; events; export-graph; watch', async () => {
    // The first update waits at the gate. The second supersedes it: its a and b move at once, but its
    // delete of the gate waits for the gate's row, which the first update's wait holds until the signal.
    await kiln(['stack', 'update', 'cli1', '-t', file('two.yaml', gatedChain('two'))])
    const id = (await api.call('GET', '/api/stacks/cli1')).body.stack.id as string
    await gateHeld(c, id)
    const first = (await c.stack(id)).currentTraversalId
    const superseding = kiln(['stack', 'update', 'cli1', '-t', file('three.yaml', chain('three', 0.2)), '--wait'])
    await c.waitFor(async () => (await c.stack(id)).currentTraversalId !== first, 60_000, 'the second update to start')
    expect((await api.call('POST', `/api/stacks/${id}/resources/gate_handle/signal`, { body: {} })).status).toBe(200)
    const second = await superseding
    expect(second.code).toBe(0)
    expect(second.stdout.trim().split('\n').at(-1)).toMatch(/^UPDATE_COMPLETE/)
    expect((await c.db.pool.query('SELECT outcome FROM traversal WHERE id = $1', [first])).rows[0].outcome).toBe('SUPERSEDED')
    expect(JSON.parse((await kiln(['--json', 'stack', 'show', 'cli1'])).stdout).outputs.result.value).toBe('three')

    const prev = await kiln(['stack', 'preview', 'cli1', '-t', file('four.yaml', chain('four', 0))])
    expect(prev.stdout).toContain('  # a will be updated in place\n  ~ a (OS::Heat::TestResource)\n      ~ value: "three" -> "four"\n      ~ wait_secs: 0.2 -> 0')
    expect(prev.stdout).toContain('  ~ b (OS::Heat::TestResource)\n      ~ value: "three" -> (known after apply)')
    expect(prev.stdout).toContain('  ~ result: "three" -> (known after apply)  (may change)')
    expect(prev.stdout).toContain('Plan: 0 to create, 2 to update, 0 to replace, 0 to delete, 0 unchanged.')

    const events = await kiln(['--json', 'stack', 'events', 'cli1', '--limit', '1000'])
    const kinds = new Set((JSON.parse(events.stdout) as { kind: string }[]).map((e) => e.kind))
    expect([...kinds]).toEqual(expect.arrayContaining(['stack', 'resource', 'node']))

    const dotFile = path.join(dir, 'g.dot')
    expect((await kiln(['stack', 'export-graph', 'cli1', '-o', dotFile])).code).toBe(0)
    expect(fs.readFileSync(dotFile, 'utf8')).toMatch(/^digraph/)
    const gml = await kiln(['stack', 'export-graph', 'cli1', '--format', 'graphml'])
    expect(gml.stdout).toContain('<graphml')

    // watch a running operation to its end
    await kiln(['stack', 'update', 'cli1', '-t', file('five.yaml', chain('five', 0.5))])
    const w = await kiln(['stack', 'watch', 'cli1'])
    expect(w.code).toBe(0)
    expect(w.stdout).toMatch(/UPDATE_COMPLETE/)
  })

  test('output: a sensitive output is masked in the list and in show, and printed as it is with --reveal', async () => {
    const template = `heat_template_version: 2018-08-31
parameters:
  pw: { type: string, hidden: true }
resources:
  v: { type: OS::Heat::Value, properties: { value: { str_replace: { template: 'user:PW@db', params: { PW: { get_param: pw } } } } } }
outputs:
  dsn: { value: { get_attr: [v, value] } }
  plain: { value: open-value }
`
    const created = await kiln(['stack', 'create', 'cli3', '-t', file('secret.yaml', template), '-P', 'pw=s3cret-pass', '--wait'])
    expect(created.code).toBe(0)
    for (const args of [['stack', 'output', 'cli3'], ['stack', 'output', 'cli3', 'dsn'], ['stack', 'show', 'cli3']]) {
      const r = await kiln(args)
      expect(r.code, args.join(' ')).toBe(0)
      expect(r.stdout).toContain('dsn = "******" (sensitive)')
      expect(r.stdout).not.toContain('s3cret-pass')
    }
    expect((await kiln(['stack', 'output', 'cli3'])).stdout).toContain('plain = "open-value"')
    const revealed = await kiln(['stack', 'output', 'cli3', 'dsn', '--reveal'])
    expect(revealed).toMatchObject({ code: 0, stdout: 'user:s3cret-pass@db\n' })
    expect(JSON.parse((await kiln(['--json', 'stack', 'output', 'cli3', 'dsn', '--reveal'])).stdout)).toEqual({ key: 'dsn', value: 'user:s3cret-pass@db', sensitive: true })
    const unnamed = await kiln(['stack', 'output', 'cli3', '--reveal'])
    expect(unnamed.code).toBe(2)
    expect(unnamed.stderr).toContain('name it')
    const missing = await kiln(['stack', 'output', 'cli3', 'nope', '--reveal'])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('output nope not found')
  })

  test('plan and apply; update sends the version it read (a stale one is refused with the diff); no changes; diff of two traversals', async () => {
    const one = file('p1.yaml', chain('p1', 0))
    expect((await kiln(['stack', 'create', 'cli-plan', '-t', one, '--wait'])).code).toBe(0)
    const first = JSON.parse((await kiln(['--json', 'stack', 'show', 'cli-plan'])).stdout)

    const planned = await kiln(['stack', 'plan', 'cli-plan', '-t', file('p2.yaml', chain('p2', 0).replace('wait_secs: 0 }', 'wait_secs: 0, update_replace: true }'))])
    expect(planned.code, planned.stderr).toBe(0)
    expect(planned.stdout).toContain('  # a will be replaced: update_replace is set\n-/+ a (OS::Heat::TestResource)')
    expect(planned.stdout).toContain('      ~ update_replace: false -> true')
    const id = /kiln stack apply (\S+)/.exec(planned.stdout)![1]!
    expect((await kiln(['stack', 'plans', 'cli-plan'])).stdout).toMatch(new RegExp(`${id}\\s+ready\\s+0\\+ 1~ 1-/\\+ 0-`))
    const applied = await kiln(['stack', 'apply', id, '--wait'])
    expect(applied.code, applied.stderr).toBe(0)
    expect(applied.stdout.trim().split('\n').at(-1)).toMatch(/^UPDATE_COMPLETE/)
    expect(JSON.parse((await kiln(['--json', 'stack', 'show', 'cli-plan'])).stdout).outputs.result.value).toBe('p2')
    const again = await kiln(['stack', 'apply', id])
    expect(again.code).toBe(1)
    expect(again.stderr).toContain('409: plan')

    // Written against the first version: refused, with what changed since.
    const stale = await kiln(['stack', 'update', 'cli-plan', '-t', file('p3.yaml', chain('p3', 0)), '--expect', first.currentTraversalId])
    expect(stale.code).toBe(1)
    expect(stale.stderr).toContain('409: stack cli-plan changed since the version this edit was written against')
    expect(stale.stderr).toContain('What changed meanwhile:')
    expect(stale.stderr).toContain('+    properties: { value: p2, wait_secs: 0, update_replace: true }')
    // By default the CLI sends the version it just read: accepted.
    const same = file('p3.yaml', chain('p3', 0))
    expect((await kiln(['stack', 'update', 'cli-plan', '-t', same, '--wait'])).code).toBe(0)
    const unchanged = await kiln(['stack', 'update', 'cli-plan', '-t', same])
    expect(unchanged.stdout).toContain('cli-plan: no changes; nothing was started')
    expect((await kiln(['stack', 'update', 'cli-plan', '-t', same, '--force', '--wait'])).code).toBe(0)

    const d = await kiln(['stack', 'diff', 'cli-plan', first.currentTraversalId])
    expect(d.code, d.stderr).toBe(0)
    expect(d.stdout).toContain(`--- ${first.currentTraversalId}`)
    expect(d.stdout).toContain('-    properties: { value: p1, wait_secs: 0 }')
    expect(d.stdout).toContain('+    properties: { value: p3, wait_secs: 0 }')
    expect((await kiln(['stack', 'diff', 'cli-plan', 'current'])).stdout).toBe('No differences between current and current.\n')
  }, 300_000) // fifteen CLI processes, each starting TypeScript

  test('a FAILED operation exits 1; cancel --no-rollback; delete --wait', async () => {
    const failed = await kiln(['stack', 'create', 'cli2', '-t', file('bad.yaml', chain('x', 0.1, true)), '--wait'])
    expect(failed.code).toBe(1)
    expect(failed.stdout).toMatch(/CREATE_FAILED/)
    // held at the gate (never signalled): the cancel always finds it running; the delete aborts the wait
    await kiln(['stack', 'update', 'cli2', '-t', file('slow.yaml', gatedChain('y'))])
    const cancel = await kiln(['stack', 'cancel', 'cli2', '--no-rollback', '--wait'])
    expect(cancel.code).toBe(1) // cancelled without rollback: the update ends FAILED
    expect(cancel.stdout).toMatch(/UPDATE_FAILED/)
    const del = await kiln(['stack', 'delete', 'cli2', '--wait'])
    expect(del.code).toBe(0)
    expect(del.stdout.trim().split('\n').at(-1)).toMatch(/^DELETE_COMPLETE/)
  })

  test('names and reasons from the server reach the terminal without escape sequences or control characters', async () => {
    // A resource named with an OSC window-title sequence (ended by BEL), a CSI clear-screen, an 8-bit CSI and a
    // carriage return; TestResource's failure reason repeats the name.
    const evil = 'evil\\e]0;pwned\\a\\e[2J\\x9b31m\\rX'
    const template = `heat_template_version: 2018-08-31\nresources:\n  "${evil}":\n    type: OS::Heat::TestResource\n    properties: { fail: true }\n`
    const t = file('evil.yaml', template)
    const runs = [
      await kiln(['stack', 'create', 'cli-evil', '-t', t, '--wait']),
      await kiln(['stack', 'show', 'cli-evil']),
      await kiln(['stack', 'events', 'cli-evil']),
      await kiln(['stack', 'export-graph', 'cli-evil']),
      await kiln(['--json', 'stack', 'events', 'cli-evil']),
      await kiln(['stack', 'show', `evil\u001b]0;pwned\u0007`]), // an error message repeating what was asked
    ]
    const printed = runs.map((r) => r.stdout + r.stderr).join('\n')
    expect(printed).toMatch(/evilX\s+CREATE_FAILED\s+Resource CREATE failed: Test Resource failed evilX/) // the text is kept, the controls dropped
    expect(printed).toMatch(/evilX#\d+/) // the graph export
    expect(printed).toContain('404: stack evil not found')
    // eslint-disable-next-line no-control-regex -- no control character may reach the terminal
    expect(printed).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/)
    // --json keeps the value, escaped (JSON.parse gives the name back exactly)
    const events = JSON.parse(runs[4]!.stdout) as { resourceName: string | null }[]
    expect(events.map((e) => e.resourceName)).toContain('evil\u001b]0;pwned\u0007\u001b[2J\u009b31m\rX')
  })

  test('errors: template problems with line and column, missing token, unknown stack', async () => {
    const bad = await kiln(['template', 'validate', '-t', file('err.yaml', 'heat_template_version: 2018-08-31\nresources:\n  a:\n    type: OS::Heat::TestResource\n    properties:\n      wait_secs: soon\n')])
    expect(bad.code).toBe(1)
    expect(bad.stderr).toContain('resources.a.properties.wait_secs:6:7')
    const ok = await kiln(['template', 'validate', '-t', file('ok.yaml', chain('a', 0))])
    expect(ok.stdout).toMatch(/^valid/)
    const noStack = await kiln(['stack', 'show', 'nope'])
    expect(noStack.code).toBe(1)
    expect(noStack.stderr).toContain('404: stack nope not found')
    const wrongToken = await kiln(['stack', 'list'], { token: 'kiln_nope' })
    expect(wrongToken.code).toBe(1)
    expect(wrongToken.stderr).toContain('401')
    const other = await kiln(['stack', 'show', 'cli1'], { token: api.b.token })
    expect(other.stderr).toContain('404')
  })
})

/**
 * Kiln::Exec in stacks, with real worker processes: its result flows into
 * other resources, an update runs the update command, drift is what observe
 * prints, a delete and a worker killed mid-command leave no process behind,
 * and the stack converges. Gates, never sleeps: a command that must be
 * caught running writes its pid and blocks until the test lets it go (a file
 * the next run looks for), and the test waits for the pid first.
 */
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { alive, pidsIn } from '../helpers/processes'
import { useKilnEnv } from '../helpers/stack-env'

const { cluster: c, api } = useKilnEnv({ cluster: { workers: 1, leaseMs: 1500, env: { KILN_EXEC_COMMANDS: '/bin/sh' } } })

let gates: string
beforeAll(() => {
  gates = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-exec-gates-'))
})
afterAll(() => fs.rmSync(gates, { recursive: true, force: true }))

const sh = (script: string) => ['/bin/sh', '-c', script]
const waitUntil = (what: string, cond: () => boolean) => c.waitFor(async () => cond(), 30_000, what, 50)

/** A create that, until `<gate>/open` exists, records its pid and blocks; once it does, prints {"ok": true}. */
const gated = (gate: string) => sh(`if [ -e ${gate}/open ]; then echo '{"ok": true}'; exit 0; fi; echo $$ >> ${gate}/pids; exec sleep 1000`)

async function submit(name: string, template: object): Promise<string> {
  const r = await api.call('POST', '/api/stacks', { body: { name, template: JSON.stringify(template) } })
  expect(r.status, r.text).toBe(201)
  return r.body.stack.id as string
}

describe('Kiln::Exec in a stack', () => {
  test('its result flows into other resources; update, drift and delete run their commands', async () => {
    const marks = path.join(gates, 'marks')
    fs.mkdirSync(marks)
    const template = (size: number) => ({
      heat_template_version: '2018-08-31',
      resources: {
        bucket: {
          type: 'Kiln::Exec',
          properties: {
            input: { size },
            environment: { MARKS: marks, SIZE: size },
            create: sh('read -r doc; echo "$doc" > "$MARKS/state.json"; echo "$SIZE" > "$MARKS/size"; echo \'{"url": "mem://bucket", "made": "create"}\''),
            update: sh('read -r doc; echo "$doc" > "$MARKS/state.json"; echo "$SIZE" > "$MARKS/size"; echo \'{"url": "mem://bucket", "made": "update"}\''),
            observe: sh('if [ -e "$MARKS/size" ]; then printf \'{"exists": true, "input": {"size": %s}}\' "$(cat "$MARKS/size")"; else echo \'{"exists": false}\'; fi'),
            delete: sh('rm -f "$MARKS/state.json" "$MARKS/size"'),
          },
        },
        config: { type: 'OS::Heat::Value', properties: { value: { get_attr: ['bucket', 'result', 'url'] } } },
      },
      outputs: { made: { value: { get_attr: ['bucket', 'result', 'made'] } }, url: { value: { get_attr: ['config', 'value'] } } },
    })
    const id = await submit('exec-flow', template(1))
    expect(await c.settle(id)).toBe('CREATE_COMPLETE')
    const outputs = async () => Object.fromEntries(Object.entries((await api.call('GET', `/api/stacks/${id}/outputs`)).body.outputs as Record<string, { value: unknown }>).map(([k, o]) => [k, o.value]))
    expect(await outputs()).toEqual({ made: 'create', url: 'mem://bucket' })

    const u = await api.call('PUT', `/api/stacks/${id}`, { body: { template: JSON.stringify(template(2)) } })
    expect(u.status, u.text).toBe(202)
    expect(await c.settle(id)).toBe('UPDATE_COMPLETE')
    expect(await outputs()).toEqual({ made: 'update', url: 'mem://bucket' })
    expect(JSON.parse(fs.readFileSync(path.join(marks, 'state.json'), 'utf8'))).toMatchObject({ action: 'update', input: { size: 2 }, previous: { input: { size: 1 } } })

    // Drift: what observe prints is compared with what was stored.
    fs.writeFileSync(path.join(marks, 'size'), '7\n')
    expect((await api.call('POST', `/api/stacks/${id}/drift`, { body: {} })).status).toBe(202)
    expect(await c.settle(id)).toBe('DRIFT_COMPLETE')
    const drift = (await api.call('GET', `/api/stacks/${id}/drift`)).body.drift
    expect(drift.resources.find((r: { name: string }) => r.name === 'bucket')).toMatchObject({ state: 'MODIFIED', changes: [{ property: 'input', stored: { size: 2 }, seen: { size: 7 } }] })

    expect((await api.call('DELETE', `/api/stacks/${id}`)).status).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(fs.readdirSync(marks)).toEqual([])
    expect(fs.existsSync(path.join(c.projectWorkspace(), '.kiln-exec')), 'the working directories are removed').toBe(false)
  })

  test('a program the server does not allow is a 400 naming the property, and no stack is made', async () => {
    const r = await api.call('POST', '/api/stacks', {
      body: { name: 'exec-refused', template: JSON.stringify({ heat_template_version: '2018-08-31', resources: { job: { type: 'Kiln::Exec', properties: { create: ['/usr/bin/env', 'true'] } } } }) },
    })
    expect(r.status).toBe(400)
    expect(r.text).toContain('resources.job.properties.create')
    expect(r.text).toContain('KILN_EXEC_COMMANDS')
    expect((await api.call('GET', '/api/stacks/exec-refused')).status).toBe(404)
  })

  test('a delete while the command runs stops it and its processes, and the stack is deleted', async () => {
    const gate = path.join(gates, 'delete')
    fs.mkdirSync(gate)
    const id = await submit('exec-delete', { heat_template_version: '2018-08-31', resources: { job: { type: 'Kiln::Exec', properties: { create: gated(gate) } } } })
    await waitUntil('the command to start', () => pidsIn(path.join(gate, 'pids')).length === 1)
    const r = await api.call('DELETE', `/api/stacks/${id}`)
    expect(r.status, r.text).toBeLessThan(300)
    expect(await c.settle(id)).toBe('DELETE_COMPLETE')
    expect(alive(pidsIn(path.join(gate, 'pids'))[0]!)).toBe(false)
    expect(fs.existsSync(path.join(c.projectWorkspace(), '.kiln-exec')), 'the working directory is removed').toBe(false)
  })

  test('a worker killed mid-command leaves no process behind, and the stack converges on the next worker', async () => {
    const gate = path.join(gates, 'kill')
    fs.mkdirSync(gate)
    const id = await submit('exec-kill', {
      heat_template_version: '2018-08-31',
      resources: { job: { type: 'Kiln::Exec', properties: { create: gated(gate) } }, after: { type: 'OS::Heat::Value', properties: { value: { get_attr: ['job', 'result', 'ok'] } } } },
    })
    await waitUntil('the command to start', () => pidsIn(path.join(gate, 'pids')).length === 1)
    const [pid] = pidsIn(path.join(gate, 'pids'))
    const victim = c.workers.find((w) => w.proc.exitCode === null && w.proc.signalCode === null)!
    victim.proc.kill('SIGKILL')
    await waitUntil('the orphaned command to be stopped by its guard', () => !alive(pid!))
    fs.writeFileSync(path.join(gate, 'open'), '')
    c.spawnWorker()
    expect(await c.settle(id, 60_000)).toBe('CREATE_COMPLETE')
    expect(pidsIn(path.join(gate, 'pids'))).toEqual([pid])
    const rows = await c.rows(id)
    expect(rows.filter((r) => r.name === 'after').map((r) => r.status)).toEqual(['COMPLETE'])
  })
})

/**
 * Kiln::Exec called directly, as the engine calls it, with real processes:
 * JSON in and out, a clean environment, failures that say why, and no
 * process left behind by a timeout, an abort or the death of the process that
 * started it. Gates, never sleeps: a command writes its pid when it has
 * started, and the test waits for that file before it stops anything.
 */
import { spawn } from 'node:child_process'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { execResource, execWorkdir } from '../../lib/resources/builtin/exec'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'
import type { ResourceContext, ResourceType } from '../../lib/resources/types'
import { silentLogger } from '../../lib/logger'
import { outsideRun } from '../../lib/resources/outside-run'
import { alive, pidsIn } from '../helpers/processes'
import { PROJECT_A, STACK_1 } from '../helpers/resource-context'

const SH = '/bin/sh'
let dir: string
let exec: ResourceType

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-exec-'))
  exec = execResource({ commands: [SH], killGraceMs: 300 })
})
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }))

function context(signal = new AbortController().signal, resourceUuid = '00000000-0000-4000-8000-0000000000e1'): ResourceContext {
  return {
    ...outsideRun('this test'),
    projectId: PROJECT_A,
    stackId: STACK_1,
    stackName: 'st',
    resourceName: 'job',
    resourceUuid,
    replacesUuid: null,
    physicalName: 'st-job-0000000000e1',
    signal,
    log: silentLogger,
    config: { workspaceDir: path.join(dir, 'ws') },
    objects: null as never, // Kiln::Exec records nothing outside Kiln
  }
}

const sh = (script: string) => [SH, '-c', script]
const props = (over: Record<string, unknown>) => ({ input: {}, environment: {}, timeout: 30, ...over })

/** Wait for `cond`, checking every 20 ms for at most 20 s: what the test waits for is an effect it caused. */
async function until(what: string, cond: () => boolean): Promise<void> {
  const deadline = Date.now() + 20_000
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}

describe('Kiln::Exec', () => {
  test('create gets the input as JSON on stdin in its own working directory and a clean environment; stdout is the result', async () => {
    const ctx = context()
    const out = await exec.create(ctx, props({ create: sh('cat > stdin.json; env > env.txt; printf \'{"cwd": "%s", "key": "%s", "greeting": "%s"}\' "$PWD" "$KILN_IDEMPOTENCY_KEY" "$GREETING"'), input: { size: 3 }, environment: { GREETING: 'hi' } }))
    const workdir = path.join(dir, 'ws', PROJECT_A, execWorkdir(ctx.resourceUuid))
    expect(out.attributes?.result).toEqual({ cwd: workdir, key: `outside-a-traversal:${ctx.resourceUuid}:create`, greeting: 'hi' })
    const stdin = JSON.parse(fs.readFileSync(path.join(workdir, 'stdin.json'), 'utf8'))
    expect(stdin).toMatchObject({ action: 'create', input: { size: 3 }, resource: { name: 'job', stack: 'st', uuid: ctx.resourceUuid }, idempotency_key: `outside-a-traversal:${ctx.resourceUuid}:create` })
    expect(out.physicalId).toBe(ctx.physicalName)
    // Nothing of the worker's environment (this test process's: VITEST, NODE_ENV, …) but PATH; the shell adds PWD, SHLVL and _.
    const names = fs.readFileSync(path.join(workdir, 'env.txt'), 'utf8').split('\n').filter(Boolean).map((l) => l.split('=')[0]!)
    const shells = ['OLDPWD', 'PWD', 'SHLVL', '_']
    expect(names.filter((n) => !n.startsWith('KILN_') && !shells.includes(n)).sort()).toEqual(['GREETING', 'HOME', 'LANG', 'PATH'])
  })

  test('update sees the previous input and result; delete runs its command and removes the working directory', async () => {
    const ctx = context(undefined, '00000000-0000-4000-8000-0000000000e2')
    const p1 = props({ create: sh('echo \'{"n": 1}\''), update: sh('cat > update.json; echo \'{"n": 2}\''), delete: sh('cat > "$KILN_TEST_DIR/deleted.json"'), input: { v: 1 }, environment: { KILN_TEST_DIR: 'x' } })
    await expect(exec.create(ctx, p1)).rejects.toThrow(/environment\.KILN_TEST_DIR: .*KILN_\* names are Kiln's/)
    const p2 = { ...p1, environment: { OUT: dir }, delete: sh('cat > "$OUT/deleted.json"') }
    const created = await exec.create(ctx, p2)
    const state = { physicalId: created.physicalId ?? null, properties: p2, attributes: created.attributes ?? {}, data: {} }
    const p3 = { ...p2, input: { v: 2 } }
    expect(exec.replaceOnUpdate?.(p3, state, ['input'])).toBeNull()
    const updated = await exec.update(ctx, p3, state, ['input'])
    expect(updated.attributes?.result).toEqual({ n: 2 })
    const workdir = path.join(dir, 'ws', PROJECT_A, execWorkdir(ctx.resourceUuid))
    expect(JSON.parse(fs.readFileSync(path.join(workdir, 'update.json'), 'utf8'))).toMatchObject({ action: 'update', input: { v: 2 }, previous: { input: { v: 1 }, result: { n: 1 } } })

    await exec.delete(ctx, { ...state, properties: p3, attributes: updated.attributes ?? {} })
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'deleted.json'), 'utf8'))).toMatchObject({ action: 'delete', input: { v: 2 }, previous: { result: { n: 2 } } })
    expect(fs.existsSync(workdir)).toBe(false)
  })

  test('without an update command a change of input replaces; a change of only the delete command or timeout runs nothing', async () => {
    const p = props({ create: sh('echo {}') })
    const state = { physicalId: 'x', properties: p, attributes: { result: { a: 1 } }, data: {} }
    expect(exec.replaceOnUpdate?.({ ...p, input: { b: 1 } }, state, ['input'])).toMatch(/no update command/)
    expect(exec.replaceOnUpdate?.({ ...p, timeout: 9 }, state, ['timeout'])).toBeNull()
    // A command that would fail, were it run: nothing runs.
    const kept = await exec.update(context(), { ...p, timeout: 9, delete: sh('exit 1') }, state, ['delete', 'timeout'])
    expect(kept.attributes).toEqual({ result: { a: 1 } })
  })

  test('observe reports gone, or the input as seen', async () => {
    const p = props({ create: sh('echo {}'), observe: sh('cat > /dev/null; echo \'{"exists": true, "input": {"v": 9}, "result": {"r": 1}}\''), input: { v: 1 } })
    const state = { physicalId: 'x', properties: p, attributes: { result: {} }, data: {} }
    expect(await exec.observe!(context(), state)).toEqual({ state: 'exists', properties: { input: { v: 9 } }, attributes: { result: { r: 1 } } })
    expect(await exec.observe!(context(), { ...state, properties: { ...p, observe: sh('echo \'{"exists": false}\'') } })).toEqual({ state: 'gone' })
    // No observe command: taken as stored.
    const stored = { ...state, properties: props({ create: sh('echo {}') }) }
    expect(await exec.observe!(context(), stored)).toEqual({ state: 'exists', properties: stored.properties, attributes: stored.attributes })
  })

  test('failures say why: the exit status with the end of stderr, stdout that is not a JSON object, a program that does not exist', async () => {
    await expect(exec.create(context(), props({ create: sh('echo first >&2; echo "it broke" >&2; exit 3') }))).rejects.toThrow(/^the create command exited with status 3: first\nit broke$/)
    await expect(exec.create(context(), props({ create: sh('echo not json') }))).rejects.toThrow(/stdout is not JSON .*: not json/)
    await expect(exec.create(context(), props({ create: sh('echo [1]') }))).rejects.toThrow(/printed a list; it must print one JSON object/)
    const missing = execResource({ commands: ['/nonexistent/tool'] })
    await expect(missing.create(context(), props({ create: ['/nonexistent/tool'] }))).rejects.toThrow(/could not be started: no such program/)
    await expect(exec.create(context(), props({ create: ['/bin/echo', '{}'] }))).rejects.toThrow(/the program \/bin\/echo is not one this server allows \(KILN_EXEC_COMMANDS\)/)
    await expect(execResource({ commands: [] }).create(context(), props({ create: sh('echo {}') }))).rejects.toThrow(/Kiln::Exec is off on this server/)
  })

  test('a timeout stops the whole process group, including what the command left in the background and a process that ignores SIGTERM', async () => {
    const pids = path.join(dir, 'timeout.pids')
    const script = `sleep 1000 & echo $! >> ${pids}; sh -c 'trap "" TERM; echo $$ >> ${pids}; while :; do sleep 1; done' & wait`
    await expect(exec.create(context(), props({ create: sh(script), timeout: 1 }))).rejects.toThrow(/ran longer than its timeout of 1 s and was stopped/)
    expect(pidsIn(pids)).toHaveLength(2)
    for (const pid of pidsIn(pids)) expect(alive(pid), `process ${pid}`).toBe(false)
  })

  test('an abort (cancel, preempt, shutdown) stops the command and rejects with the abort reason', async () => {
    const pids = path.join(dir, 'abort.pids')
    const ac = new AbortController()
    const running = exec.create(context(ac.signal), props({ create: sh(`echo $$ >> ${pids}; exec sleep 1000`) }))
    await until('the command to start', () => pidsIn(pids).length === 1)
    ac.abort(new Error('the stack was cancelled'))
    await expect(running).rejects.toThrow('the stack was cancelled')
    expect(alive(pidsIn(pids)[0]!)).toBe(false)
  })

  test('a command whose worker dies (SIGKILL) is stopped by its guard: no orphan survives', async () => {
    const pids = path.join(dir, 'orphan.pids')
    const code = `
      const { runCommand } = await import(${JSON.stringify(path.resolve('lib/resources/builtin/exec-process.ts'))})
      await runCommand({ argv: ['/bin/sh', '-c', 'sleep 1000 & echo $! >> ${pids}; echo $$ >> ${pids}; wait'], cwd: ${JSON.stringify(dir)}, env: { PATH: process.env.PATH }, stdin: '', timeoutMs: 600000, signal: new AbortController().signal, graceMs: 300 })`
    const worker = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: 'ignore' })
    await until('the command to start', () => pidsIn(pids).length === 2)
    worker.kill('SIGKILL')
    for (const pid of pidsIn(pids)) await until(`process ${pid} to be stopped`, () => !alive(pid))
  })

  test('a program the server does not allow is refused when the template is checked, naming the property', () => {
    const on = typeCatalog(createRegistry(builtinTypes({ exec: { commands: [SH] } })))
    expect(on.validateProperties('Kiln::Exec', { create: ['/usr/bin/python3', 'x.py'], delete: [SH, '-c', 'true'] })).toEqual([
      { path: 'create', message: `the program (the first item) must be one this server allows: ${SH} (KILN_EXEC_COMMANDS)` },
    ])
    expect(on.validateProperties('Kiln::Exec', { create: [] })[0]).toMatchObject({ path: 'create', message: expect.stringMatching(/at least the program/) })
    const off = typeCatalog(createRegistry(builtinTypes()))
    expect(off.validateProperties('Kiln::Exec', { create: [SH, '-c', 'true'] })).toEqual([
      { path: 'create', message: 'Kiln::Exec is off on this server: the admin turns it on by naming the programs it may run in KILN_EXEC_COMMANDS' },
    ])
  })
})

/**
 * Kiln::Exec: commands that create, update, delete and observe something,
 * in the manner of Terraform's `external` data source and `local-exec`.
 *
 * Each action runs its command (argv, no shell unless the command is one)
 * in the row's own working directory in its project's workspace
 * (`.kiln-exec/<row uuid>`), with a JSON document on stdin: the action, the
 * `input` property, the previous input and result, the resource and an
 * idempotency key (traversal, row and action). Create and update print a JSON object
 * on stdout: the `result` attribute (get_attr [r, result, key]). A non-zero
 * exit fails the action with the end of stderr as its reason.
 *
 * It runs code on the worker's machine, as the worker's user: it is off
 * unless the admin names the programs it may run (KILN_EXEC_COMMANDS), and a
 * command whose program is not one of them is refused when the template is
 * checked, and again before it runs. See ./exec-process.ts for how a
 * command is stopped and why none of its processes outlives it.
 *
 * A worker that dies mid-command leaves the row FAILED and its command
 * killed; the action then runs again (a create in place, or an update when
 * observe finds the object): commands must be idempotent under their key,
 * as every action is.
 */
import path from 'node:path'
import { commandSearchPath } from '../../env'
import { defineResourceType, ReplaceRequired, ResourceActionError, type ActionResult, type Observation, type PropertySchema, type ResourceContext, type ResourceState, type ResourceType } from '../../sdk'
import { EXEC_MANAGEMENT_PROPERTIES, execReplaceReason } from '../replace-rules'
import { runCommand, type CommandOutcome } from './exec-process'
import { observeStored } from './util'
import { dirAt, projectWorkspace, removeDirAt, WorkspaceError } from './workspace'

export type ExecAction = 'create' | 'update' | 'delete' | 'observe'

/** The longest time limit a command may have: an hour (a longer job belongs in a provider that answers 202). */
const MAX_TIMEOUT_SECS = 3600
const WORKDIR_ROOT = '.kiln-exec'

export interface ExecSettings {
  /** The programs commands may run (argv[0], exactly as written); empty: Kiln::Exec is off. */
  commands: readonly string[]
  /** Between SIGTERM and SIGKILL of a stopped command's processes (default KILL_GRACE_MS). */
  killGraceMs?: number
}

const command = (action: ExecAction, allowed: readonly string[], required: boolean): PropertySchema => ({
  type: 'list',
  required,
  updateAllowed: action !== 'create',
  items: { type: 'string' },
  constraints: [
    { length: { min: 1 }, description: 'a command is a program and its arguments: at least the program' },
    {
      program: allowed,
      description: allowed.length
        ? `the program (the first item) must be one this server allows: ${allowed.join(', ')} (KILN_EXEC_COMMANDS)`
        : 'Kiln::Exec is off on this server: the admin turns it on by naming the programs it may run in KILN_EXEC_COMMANDS',
    },
  ],
  description:
    action === 'create'
      ? 'The command that creates the object: the program, then its arguments (no shell unless the program is one). Changing it replaces the resource.'
      : action === 'update'
        ? 'The command that updates the object in place when `input` or `environment` changes. Without it, such a change replaces the resource.'
        : action === 'delete'
          ? 'The command that deletes the object; it must succeed when the object is gone already. Without it, delete removes only the working directory.'
          : 'The command that reports the object as it is: it prints {"exists": false}, or {"exists": true, "input": {...}, "result": {...}} (either may be left out). Without it, the resource is taken as stored (never drifted).',
})

function properties(allowed: readonly string[]): Record<string, PropertySchema> {
  return {
    create: command('create', allowed, true),
    update: command('update', allowed, false),
    delete: command('delete', allowed, false),
    observe: command('observe', allowed, false),
    input: { type: 'map', default: {}, updateAllowed: true, description: 'What the commands are given, as `input` of the JSON document on their stdin.' },
    environment: {
      type: 'map',
      default: {},
      updateAllowed: true,
      description: 'Variables added to the commands\' environment (names of letters, digits and _; KILN_* names are Kiln\'s). The worker\'s own environment is never passed on.',
    },
    timeout: { type: 'integer', default: 300, updateAllowed: true, constraints: [{ range: { min: 1, max: MAX_TIMEOUT_SECS } }], description: 'Seconds a command may run before it is stopped (SIGTERM, then SIGKILL) and the action fails.' },
  }
}

/** The same for every attempt at this action of this row in this traversal, and for no other action. */
const idempotencyKey = (ctx: ResourceContext, action: ExecAction) => `${ctx.traversalId ?? 'outside-a-traversal'}:${ctx.resourceUuid}:${action}`

/** Stdin of every command: what the action is, and everything Kiln knows of the object. */
function stdinFor(ctx: ResourceContext, action: ExecAction, props: Record<string, unknown>, prev: ResourceState | null): string {
  return JSON.stringify({
    action,
    input: props.input ?? {},
    ...(prev ? { previous: { input: prev.properties.input ?? {}, result: prev.attributes.result ?? {} } } : {}),
    resource: { stack: ctx.stackName, stack_id: ctx.stackId, name: ctx.resourceName, uuid: ctx.resourceUuid, physical_name: ctx.physicalName },
    idempotency_key: idempotencyKey(ctx, action),
  })
}

const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/

function environmentFor(ctx: ResourceContext, action: ExecAction, props: Record<string, unknown>, cwd: string): Record<string, string> {
  const own = (props.environment ?? {}) as Record<string, unknown>
  const bad = Object.keys(own).find((k) => !ENV_NAME.test(k) || k.startsWith('KILN_'))
  if (bad !== undefined) throw new ResourceActionError(`environment.${bad}: a variable's name is letters, digits and _ (not starting with a digit), and KILN_* names are Kiln's`)
  return {
    PATH: commandSearchPath(),
    LANG: 'C.UTF-8',
    ...Object.fromEntries(Object.entries(own).map(([k, v]) => [k, typeof v === 'string' ? v : JSON.stringify(v)])),
    HOME: cwd,
    KILN_ACTION: action,
    KILN_STACK_ID: ctx.stackId,
    KILN_STACK_NAME: ctx.stackName,
    KILN_RESOURCE_NAME: ctx.resourceName,
    KILN_RESOURCE_UUID: ctx.resourceUuid,
    KILN_PHYSICAL_NAME: ctx.physicalName,
    KILN_IDEMPOTENCY_KEY: idempotencyKey(ctx, action),
  }
}

/** The row's working directory, relative to the project's workspace: its own, so a replacement's cleanup never removes its successor's. */
export const execWorkdir = (resourceUuid: string) => path.posix.join(WORKDIR_ROOT, resourceUuid)
const workdirOf = (ctx: ResourceContext) => execWorkdir(ctx.resourceUuid)

async function workdir(ctx: ResourceContext): Promise<string> {
  try {
    return await dirAt(projectWorkspace(ctx.config.workspaceDir, ctx.projectId), workdirOf(ctx))
  } catch (err) {
    throw err instanceof WorkspaceError ? new ResourceActionError(`the working directory ${err.message}`) : err
  }
}

/** Run the action's command; its stdout when it exits 0, else a ResourceActionError saying why. */
async function run(ctx: ResourceContext, settings: ExecSettings, action: ExecAction, argv: string[], props: Record<string, unknown>, prev: ResourceState | null): Promise<{ stdout: string; stderr: string }> {
  const allowed = settings.commands
  if (!allowed.includes(argv[0]!)) {
    throw new ResourceActionError(allowed.length ? `${action}: the program ${argv[0]} is not one this server allows (KILN_EXEC_COMMANDS)` : `${action}: Kiln::Exec is off on this server (KILN_EXEC_COMMANDS names no program)`)
  }
  const cwd = await workdir(ctx)
  ctx.signal.throwIfAborted()
  const timeoutSecs = Number(props.timeout ?? 300)
  ctx.progress(`running the ${action} command`)
  const out = await runCommand({ argv, cwd, env: environmentFor(ctx, action, props, cwd), stdin: stdinFor(ctx, action, props, prev), timeoutMs: timeoutSecs * 1000, signal: ctx.signal, graceMs: settings.killGraceMs })
  return settled(out, action, timeoutSecs)
}

function settled(out: CommandOutcome, action: ExecAction, timeoutSecs: number): { stdout: string; stderr: string } {
  const said = (stderr: string) => (stderr.trim() ? `: ${stderr.trim()}` : ' (nothing on stderr)')
  switch (out.kind) {
    case 'exited':
      if (out.code === 0) return out
      throw new ResourceActionError(`the ${action} command exited with status ${out.code}${said(out.stderr)}`)
    case 'killed':
      throw new ResourceActionError(`the ${action} command was killed by ${out.signal}${said(out.stderr)}`)
    case 'not-started':
      throw new ResourceActionError(`the ${action} command could not be started: ${out.code === 'ENOENT' ? 'no such program' : out.code === 'EACCES' ? 'permission denied' : out.code}`)
    case 'timed-out':
      throw new ResourceActionError(`the ${action} command ran longer than its timeout of ${timeoutSecs} s and was stopped${said(out.stderr)}`)
    case 'too-much-output':
      throw new ResourceActionError(`the ${action} command printed more than 1 MiB on stdout and was stopped; print a JSON object of the results only`)
    case 'aborted':
      throw out.reason instanceof Error ? out.reason : new Error(String(out.reason ?? 'aborted'))
  }
}

/** Stdout of create or update: empty, or one JSON object (the result). */
function resultOf(action: ExecAction, stdout: string): Record<string, unknown> {
  const text = stdout.trim()
  if (!text) return {}
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw new ResourceActionError(`the ${action} command's stdout is not JSON (it must print one JSON object, or nothing): ${text.slice(0, 200)}`)
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new ResourceActionError(`the ${action} command printed ${Array.isArray(value) ? 'a list' : JSON.stringify(value)}; it must print one JSON object, or nothing`)
  return value as Record<string, unknown>
}

async function act(ctx: ResourceContext, settings: ExecSettings, action: 'create' | 'update', props: Record<string, unknown>, prev: ResourceState | null): Promise<ActionResult> {
  const argv = props[action] as string[]
  const { stdout, stderr } = await run(ctx, settings, action, argv, props, prev)
  return { physicalId: prev?.physicalId ?? ctx.physicalName, attributes: { result: resultOf(action, stdout), stderr } }
}

/** What observe's command printed: gone, or the object with its input as seen. */
function observation(stdout: string, state: ResourceState): Observation {
  const seen = resultOf('observe', stdout)
  if (seen.exists === false) return { state: 'gone' }
  if (seen.exists !== true) throw new ResourceActionError('the observe command must print {"exists": true, ...} or {"exists": false}')
  return {
    state: 'exists',
    properties: seen.input === undefined ? {} : { input: seen.input },
    attributes: seen.result === undefined ? state.attributes : { ...state.attributes, result: seen.result },
  }
}

export function execResource(settings: ExecSettings): ResourceType {
  const allowed = settings.commands
  return defineResourceType({
    name: 'Kiln::Exec',
    description:
      "Commands that create, update, delete and observe something, run on the worker's machine with JSON on stdin and a JSON result on stdout. Off unless the admin names the programs it may run (KILN_EXEC_COMMANDS).",
    properties: properties(allowed),
    attributes: {
      result: { description: 'The JSON object the last create or update command printed on stdout.', type: 'map' },
      stderr: { description: "The end of the last create or update command's stderr (at most 4 KiB).", type: 'string' },
    },
    create: (ctx, props) => act(ctx, settings, 'create', props, null),
    replaceOnUpdate: execReplaceReason,
    async update(ctx, props, prev, changed) {
      // Only how the object is managed changed (the delete command, the timeout): nothing to run.
      if (changed.length > 0 && changed.every((k) => EXEC_MANAGEMENT_PROPERTIES.includes(k))) return { attributes: prev.attributes }
      if (!props.update) throw new ReplaceRequired('Kiln::Exec has no update command: a change of input or environment replaces it')
      return act(ctx, settings, 'update', props, prev)
    },
    async delete(ctx, state) {
      const argv = state.properties.delete as string[] | undefined
      if (argv) await run(ctx, settings, 'delete', argv, state.properties, state)
      await removeDirAt(projectWorkspace(ctx.config.workspaceDir, ctx.projectId), workdirOf(ctx)).catch((err: unknown) => {
        if (!(err instanceof WorkspaceError)) throw err
        ctx.log.warn(`Kiln::Exec ${ctx.resourceName}: its working directory was not removed: ${err.message}`)
      })
    },
    async observe(ctx, state) {
      const argv = state.properties.observe as string[] | undefined
      if (!argv) return observeStored(ctx, state)
      const { stdout } = await run(ctx, settings, 'observe', argv, state.properties, state)
      return observation(stdout, state)
    },
    // Seen to exist after a failure: an update command can repair it; without one it is replaced.
    needsReplaceFailed: (_seen, state) => (state.properties.update ? null : 'Kiln::Exec has no update command to repair it with'),
  })
}

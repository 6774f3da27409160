/**
 * `kiln`: the command-line client of Kiln's REST API.
 *
 *   kiln stack create|update|preview|plan|apply|plans|discard-plan|diff|import|cancel|delete|list|show|output|drift|hook|events|watch|export-graph
 *   kiln snapshot list|delete
 *   kiln provider add|list|refresh|remove
 *   kiln template validate
 *
 * URL and token come from --url/--token or KILN_URL/KILN_TOKEN. `--wait` and
 * `watch` follow the live stream with a progress bar and exit non-zero when
 * the operation ends FAILED. Tables by default, `--json` for scripts.
 */
import fs from 'node:fs'
import { Command, Option } from 'commander'
import { parseEnv } from '../env'
import { ApiError, KilnClient } from './client'
import type { PlanView } from '../services/plans'
import type { VersionDiff } from '../services/versions'
import { renderPreview, renderVersionDiff } from './plan-render'
import { renderDrift, type DriftReport } from './drift'
import type { ImportItem, ImportPreview } from '../services/imports'

import { table } from './render'
import { jsonSafe, terminalSafe } from './terminal-safe'
import { eventHead, watchStack } from './watch'

/** The command definitions; `run` parses. Exported so `npm run docs` can describe them without running. */
export const program = new Command('kiln').description("Kiln's command-line client").showHelpAfterError()
program
  .addOption(new Option('--url <url>', 'Kiln server URL (default $KILN_URL or http://127.0.0.1:3000)'))
  .addOption(new Option('--token <token>', 'API token (default $KILN_TOKEN)'))
  .option('--json', 'machine-readable output', false)

function client(): KilnClient {
  const g = program.opts<{ url?: string; token?: string }>()
  let e
  try {
    e = parseEnv()
  } catch (err) {
    fail((err as Error).message)
  }
  const token = g.token ?? e.KILN_TOKEN
  if (!token) fail('no API token: pass --token or set KILN_TOKEN (npm start prints one on first start)')
  return new KilnClient(g.url ?? e.KILN_URL ?? 'http://127.0.0.1:3000', token)
}
const json = () => program.opts<{ json: boolean }>().json

function fail(message: string, code = 2): never {
  process.stderr.write(`kiln: ${terminalSafe(message)}\n`)
  process.exit(code)
}

function readFile(path: string, what: string): string {
  try {
    return fs.readFileSync(path, 'utf8')
  } catch (err) {
    fail(`cannot read ${what} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
}

function parameters(list: string[] | undefined): Record<string, string> | undefined {
  if (!list?.length) return undefined
  const out: Record<string, string> = {}
  for (const kv of list) {
    const i = kv.indexOf('=')
    if (i <= 0) fail(`--parameter takes name=value (got "${kv}")`)
    out[kv.slice(0, i)] = kv.slice(i + 1)
  }
  return out
}

const collect = (v: string, prev: string[] = []) => [...prev, v]

function submission(o: { template?: string; environment?: string; parameter?: string[] }) {
  return {
    ...(o.template ? { template: readFile(o.template, 'template') } : {}),
    ...(o.environment ? { environment: readFile(o.environment, 'environment') } : {}),
    ...(parameters(o.parameter) ? { parameters: parameters(o.parameter) } : {}),
  }
}

/** Everything printed came (at least in part) from the server: never raw on the terminal. */
function print(value: unknown, human: () => string) {
  process.stdout.write((json() ? jsonSafe(JSON.stringify(value, null, 2)) : terminalSafe(human())) + '\n')
}

/** Follow an operation to its end; exit 1 when it ends FAILED. */
async function follow(c: KilnClient, stackId: string, after: number) {
  const end = await watchStack(c, stackId, { after, json: json(), out: process.stdout, err: process.stderr })
  if (json()) process.stdout.write(jsonSafe(JSON.stringify({ result: end })) + '\n')
  else process.stdout.write(terminalSafe(`${end.action}_${end.status}: ${end.reason}`) + '\n')
  if (end.status === 'FAILED') process.exit(1)
}

const stack = program.command('stack').description('stacks')

stack
  .command('list')
  .description("list the project's stacks")
  .option('--status <status>', 'only stacks with this status (e.g. UPDATE_FAILED or FAILED)')
  .option('--name <text>', 'name contains')
  .option('--limit <n>', 'at most n stacks', '100')
  .action(async (o) => {
    const q = new URLSearchParams({ limit: o.limit, ...(o.status ? { status: o.status } : {}), ...(o.name ? { name: o.name } : {}) })
    const res = await client().get(`/api/stacks?${q}`)
    print(res.stacks, () =>
      table(
        res.stacks.map((s: { action: string; status: string; progress?: { done: number; total: number } | null }) => ({ ...s, status: `${s.action}_${s.status}`, progress: s.progress ? `${s.progress.done}/${s.progress.total}` : '' })),
        ['name', 'id', 'status', 'progress', 'createdAt'],
      ),
    )
  })

stack
  .command('show <stack>')
  .description('show a stack: status, parameters (hidden ones masked) and outputs')
  .action(async (ref) => {
    const { stack: s } = await client().get(`/api/stacks/${encodeURIComponent(ref)}`)
    print(s, () =>
      [
        table([{ ...s, status: `${s.action}_${s.status}` }], ['name', 'id', 'status', 'statusReason']),
        '',
        'parameters: ' + JSON.stringify(s.parameters),
        'outputs:',
        ...Object.entries(s.outputs as Record<string, Output>).map(([k, v]) => `  ${outputLine(k, v)}`),
      ].join('\n'),
    )
  })

type Output = { value: unknown; error?: string; sensitive?: boolean }
const outputLine = (k: string, v: Output) => `${k} = ${v.error ? `(error: ${v.error})` : JSON.stringify(v.value)}${v.sensitive ? ' (sensitive)' : ''}`

stack
  .command('output <stack> [key]')
  .description("show a stack's outputs, or one; a sensitive output (evaluated from a secret) is masked unless named with --reveal")
  .option('--reveal', "show the named sensitive output's value", false)
  .action(async (ref, key: string | undefined, o) => {
    if (o.reveal && !key) fail('--reveal shows one output: name it (kiln stack output <stack> <key> --reveal)')
    const c = client()
    const base = `/api/stacks/${encodeURIComponent(ref)}/outputs`
    if (!key) {
      const res = await c.get(base)
      return print(res.outputs, () => Object.entries(res.outputs as Record<string, Output>).map(([k, v]) => outputLine(k, v)).join('\n') || 'no outputs')
    }
    const res = await c.get(`${base}/${encodeURIComponent(key)}${o.reveal ? '?reveal=true' : ''}`)
    // A revealed value alone, as `terraform output NAME` prints it: a script can use it as it is.
    print(res.output, () => (o.reveal && !res.output.error ? (typeof res.output.value === 'string' ? res.output.value : JSON.stringify(res.output.value)) : outputLine(key, res.output)))
  })

stack
  .command('create <name>')
  .description('create a stack')
  .requiredOption('-t, --template <file>', 'template file (YAML or JSON)')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .option('--timeout <minutes>', 'stack timeout in minutes')
  .option('--enable-rollback', 'roll back automatically on failure', false)
  .option('--wait', 'follow the operation with a progress bar until it ends', false)
  .action(async (name, o) => {
    const c = client()
    const res = await c.post('/api/stacks', { name, ...submission(o), ...(o.timeout ? { timeoutMins: Number(o.timeout) } : {}), disableRollback: !o.enableRollback })
    if (!o.wait) return print(res, () => `${res.stack.name} ${res.stack.id}: CREATE started`)
    await follow(c, res.stack.id, 0)
  })

stack
  .command('update <stack>')
  .description('update a stack (also while an operation runs: the new update supersedes it); refused if the stack moved to another template since it was read')
  .option('-t, --template <file>', 'new template (omit with --existing)')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .option('--existing', 'reuse the current template; only change parameters', false)
  .option('--expect <version>', 'the traversal or template id this update was written against (default: the template the stack has when read here)')
  .option('--force', 'start the update even if nothing changed', false)
  .option('--converge', 'observe every resource and bring back whatever changed outside Kiln, even where the template did not change', false)
  .option('--preempt', 'abort the running operation’s actions on the resources whose targets this update changes, instead of waiting for them', false)

  .option('--wait', 'follow the operation until it ends', false)
  .action(async (ref, o) => {
    if (!o.template && !o.existing) fail('give --template <file>, or --existing to reuse the current template')
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    const after = await eventHead(c, s.id)
    // Always written against a version: the one given, or the one just read (a running update is superseded knowingly).
    const body = {
      ...submission(o),
      ...(o.expect ?? s.templateId ? { expect: o.expect ?? s.templateId } : {}),
      ...(o.force ? { force: true } : {}),
      ...(o.converge ? { converge: true } : {}),
      ...(o.preempt ? { preempt: true } : {}),
    }
    const res = o.existing ? await c.patch(`/api/stacks/${s.id}`, body) : await c.put(`/api/stacks/${s.id}`, body)
    if (res.noChanges) return print(res, () => `${s.name}: no changes; nothing was started (--force starts an update anyway)`)
    if (!o.wait) return print(res, () => `${s.name}: UPDATE started${res.superseded ? ` (superseded the running traversal ${res.superseded.slice(0, 8)})` : ''}`)
    await follow(c, s.id, after)
  })

stack
  .command('import <stack>')
  .description('adopt existing objects (resources with external_id) into a new stack, or into the stack of that name')
  .requiredOption('-t, --template <file>', 'template whose resources carry external_id')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .option('--preview', 'show what would be adopted, as it is now, and change nothing', false)
  .option('--wait', 'follow the operation until it ends', false)
  .action(async (name, o) => {
    const c = client()
    if (o.preview) {
      const res = await c.post<ImportPreview>('/api/import/preview', { name, ...submission(o) })
      const differences = (i: ImportItem) => (i.differences ?? []).map((d) => `${d.property}: ${JSON.stringify(d.template)} in the template, ${JSON.stringify(d.seen)} seen`).join('; ')
      return print(res, () =>
        [
          table(res.items.map((i) => ({ ...i, note: i.reason ?? differences(i) })), ['name', 'type', 'externalId', 'outcome', 'note']),
          '',
          `${res.summary.adopt} to adopt, ${res.summary.adopted} already adopted, ${res.summary.refused} refused, ${res.summary.error} not looked at` + (res.stack.exists ? `  (into the existing stack ${res.stack.name})` : `  (a new stack ${res.stack.name})`),
        ].join('\n'),
      )
    }
    const head = await c.get(`/api/stacks?name=${encodeURIComponent(name)}&limit=500`)
    const before = (head.stacks as { id: string; name: string }[]).find((s) => s.name === name)
    const after = before ? await eventHead(c, before.id) : 0
    const res = await c.post('/api/import', { name, ...submission(o) })
    if (!o.wait) return print(res, () => `${res.stack.name} ${res.stack.id}: ${res.action} started (importing)`)
    await follow(c, res.stack.id, after)
  })

stack
  .command('preview <stack>')
  .description('show what an update would create, update, replace and delete, with each property before -> after, without changing anything')
  .option('-t, --template <file>', 'new template (default: the current one)')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .action(async (ref, o) => {
    const res = await client().post(`/api/stacks/${encodeURIComponent(ref)}/preview`, submission(o))
    print(res, () => renderPreview(res))
  })

stack
  .command('plan <stack>')
  .description('compute what an update would do, print it (+ create, ~ update, -/+ replace, - delete) and save it as a plan to apply exactly')
  .option('-t, --template <file>', 'new template (default: the current one)')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .action(async (ref, o) => {
    const { plan } = await client().post(`/api/stacks/${encodeURIComponent(ref)}/plans`, submission(o))
    print(plan, () => `${renderPreview(plan.preview)}\n\nSaved as plan ${plan.id} (until ${plan.expiresAt}). Apply exactly this with:\n  kiln stack apply ${plan.id}`)
  })

stack
  .command('apply <plan>')
  .description('apply a saved plan: exactly its template, environment and parameters; refused if the stack changed since it was computed')
  .option('--wait', 'follow the operation until it ends', false)
  .action(async (planId, o) => {
    const c = client()
    const { plan } = await c.get(`/api/plans/${encodeURIComponent(planId)}`)
    const after = await eventHead(c, plan.stack.id)
    const res = await c.post(`/api/stacks/${plan.stack.id}/plans/${plan.id}/apply`, {})
    if (!o.wait) return print(res, () => `${plan.stack.name}: plan ${plan.id.slice(0, 8)} applied; UPDATE started`)
    await follow(c, plan.stack.id, after)
  })

stack
  .command('plans <stack>')
  .description("list a stack's saved plans")
  .action(async (ref) => {
    const { plans } = await client().get<{ plans: PlanView[] }>(`/api/stacks/${encodeURIComponent(ref)}/plans`)
    print(plans, () =>
      table(
        plans.map((p) => ({ ...p, state: p.appliedAt ? 'applied' : p.expired ? 'expired' : 'ready', changes: `${p.preview.summary.create}+ ${p.preview.summary.update}~ ${p.preview.summary.replace}-/+ ${p.preview.summary.delete}-` })),
        ['id', 'state', 'changes', 'createdBy', 'createdAt', 'expiresAt'],
      ),
    )
  })

stack
  .command('discard-plan <stack> <plan>')
  .description('discard a saved plan')
  .action(async (ref, planId) => {
    await client().del(`/api/stacks/${encodeURIComponent(ref)}/plans/${encodeURIComponent(planId)}`)
    print({ discarded: planId }, () => `plan ${planId} discarded`)
  })

stack
  .command('diff <stack> <from> [to]')
  .description("the differences between two versions of a stack's template and parameters (traversal or template ids, or current; to defaults to current)")
  .action(async (ref, from, to) => {
    const q = new URLSearchParams({ from, to: to ?? 'current' })
    const d = await client().get(`/api/stacks/${encodeURIComponent(ref)}/diff?${q}`)
    print(d, () => renderVersionDiff(d))
  })

stack
  .command('cancel <stack>')
  .description('cancel the running operation, rolling back unless --no-rollback')
  .option('--no-rollback', 'stop without rolling back')
  .option('--wait', 'follow until it ends', false)
  .action(async (ref, o) => {
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    const after = await eventHead(c, s.id)
    const res = await c.post(`/api/stacks/${s.id}/cancel`, { rollback: o.rollback })
    if (!o.wait) return print(res, () => `${s.name}: ${o.rollback ? 'cancelled; rolling back' : 'cancelled without rollback'}`)
    await follow(c, s.id, after)
  })

stack
  .command('delete <stack>')
  .description('delete a stack and its resources (also while an operation runs)')
  .option('--wait', 'follow until it ends', false)
  .action(async (ref, o) => {
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    const after = await eventHead(c, s.id)
    const res = await c.del(`/api/stacks/${s.id}`)
    if (!o.wait) return print(res, () => `${s.name}: DELETE started`)
    await follow(c, s.id, after)
  })

stack
  .command('drift <stack>')
  .description('check every resource against its real object and print what changed outside Kiln, Terraform-style')
  .option('--last', 'print the latest drift check without running a new one', false)
  .option('--exit-code', 'exit 2 when drift is found (0 when none)', false)
  .action(async (ref, o) => {
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    if (!o.last) {
      const after = await eventHead(c, s.id)
      await c.post(`/api/stacks/${s.id}/drift`, {})
      const end = await watchStack(c, s.id, { after, json: json(), out: process.stdout, err: process.stderr })
      if (end.status === 'FAILED') fail(`${end.action}_${end.status}: ${end.reason}`, 1)
    }
    const { drift } = await c.get(`/api/stacks/${s.id}/drift`)
    print(drift, () => renderDrift(drift as DriftReport))
    if (o.exitCode && drift.summary.modified + drift.summary.deleted > 0) process.exit(2)
  })

stack
  .command('hook <stack> [resources...]')
  .description('list the hooks (pre-create, pre-update, pre-delete) the running operation waits at; given resources, clear theirs so the operation goes on')
  .option('--type <hook>', 'the hook to clear (default: the one each resource waits at)')
  .action(async (ref, names: string[], o) => {
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    const waiting = await pendingHooks(c, s.id, s.currentTraversalId)
    if (!names.length) return print(waiting, () => (waiting.length ? table(waiting, ['resource', 'hook', 'reason', 'at']) : `${s.name}: no resource waits at a hook`))
    const cleared: { resource: string; hook: string }[] = []
    for (const name of names) {
      const hook = o.type ?? waiting.find((w) => w.resource === name)?.hook
      if (!hook) fail(`${name} waits at no hook of ${s.name}'s running operation`, 1)
      await c.post(`/api/stacks/${s.id}/resources/${encodeURIComponent(name)}/signal`, { unset_hook: hook })
      cleared.push({ resource: name, hook })
    }
    print(cleared, () => cleared.map((h) => `${s.name}: ${h.hook} hook of ${h.resource} cleared`).join('\n'))
  })

stack
  .command('events <stack>')
  .description("list a stack's events in sequence order")
  .option('--after <seq>', 'only events after this sequence number', '0')
  .option('--limit <n>', 'at most n events', '200')
  .action(async (ref, o) => {
    const res = await client().get(`/api/stacks/${encodeURIComponent(ref)}/events?after=${o.after}&limit=${o.limit}`)
    print(res.events, () => table(res.events.map((e: { action: string | null; status: string | null; data?: { state?: string } | null }) => ({ ...e, state: e.action ? `${e.action}_${e.status}` : (e.data?.state ?? '') })), ['seq', 'at', 'kind', 'resourceName', 'state', 'reason']))
  })

stack
  .command('watch <stack>')
  .description('follow the running operation (progress bar, events) until it ends')
  .action(async (ref) => {
    const c = client()
    const { stack: s } = await c.get(`/api/stacks/${encodeURIComponent(ref)}`)
    await follow(c, s.id, await eventHead(c, s.id))
  })

stack
  .command('export-graph <stack>')
  .description('write a traversal graph as DOT, GraphML or Cytoscape JSON')
  .option('--traversal <id>', 'traversal id (default: the current one)', 'current')
  .addOption(new Option('--format <format>', 'output format').choices(['dot', 'graphml', 'json']).default('dot'))
  .option('-o, --output <file>', 'write to a file instead of stdout')
  .action(async (ref, o) => {
    const body = await client().request<string>('GET', `/api/stacks/${encodeURIComponent(ref)}/traversals/${o.traversal}/graph?format=${o.format}`, undefined, true)
    if (o.output) fs.writeFileSync(o.output, body)
    else process.stdout.write(terminalSafe(body.endsWith('\n') ? body : body + '\n'))
  })

const snapshot = program.command('snapshot').description('snapshots of databases (deletion_policy: Snapshot)')

snapshot
  .command('list [stack]')
  .description("list the snapshots the project keeps, or those a stack's resources kept (a deleted stack by its id)")
  .action(async (ref: string | undefined) => {
    const res = await client().get(ref ? `/api/stacks/${encodeURIComponent(ref)}/snapshots` : '/api/snapshots')
    print(res.snapshots, () => table(res.snapshots, ref ? ['name', 'of', 'resource', 'state', 'takenAt'] : ['name', 'of', 'stackName', 'stackId', 'resource', 'state', 'takenAt']))
  })

snapshot
  .command('delete <stack> <snapshot>')
  .description('delete a snapshot a stack kept (a deleted stack by its id): it no longer counts against the project\'s quotas')
  .action(async (ref, name) => {
    await client().del(`/api/stacks/${encodeURIComponent(ref)}/snapshots/${encodeURIComponent(name)}`)
    print({ deleted: name }, () => `snapshot ${name} deleted`)
  })

const provider = program.command('provider').description('HTTP resource providers (docs/reference/provider-protocol.md)')

provider
  .command('add <name> <url>')
  .description("register a provider: Kiln reads its types (GET <url>/types) and names them <prefix>::<type>; registering a name again replaces it")
  .requiredOption('--prefix <prefix>', 'the prefix of its types, e.g. Acme or Acme::Storage')
  .option('--secret <secret>', 'the secret its requests are signed with (default: one is generated and printed once)')
  .option('--global', 'for every project (an admin token)')
  .action(async (name: string, url: string, o: { prefix: string; secret?: string; global?: boolean }) => {
    const res = await client().post('/api/providers', { name, url, prefix: o.prefix, ...(o.secret ? { secret: o.secret } : {}), ...(o.global ? { scope: 'global' } : {}) })
    const types = res.provider.types.map((t: { name: string }) => `${o.prefix}::${t.name}`).join(', ')
    print(res, () => `provider ${name} registered: ${types}${res.secret ? `\nsecret (shown once; configure the provider with it): ${res.secret}` : ''}`)
  })

provider
  .command('list')
  .description("the providers this project may use: its own and the admin's")
  .action(async () => {
    const res = await client().get('/api/providers')
    const rows = res.providers.map((p: { name: string; prefix: string; url: string; projectId: string | null; types: { name: string }[] }) => ({ name: p.name, prefix: p.prefix, url: p.url, scope: p.projectId ? 'project' : 'global', types: p.types.map((t) => t.name).join(', ') }))
    print(res.providers, () => (rows.length ? table(rows, ['name', 'prefix', 'url', 'scope', 'types']) : 'no providers'))
  })

provider
  .command('refresh <name>')
  .description('read the provider\'s types again')
  .option('--global', 'the admin\'s provider of that name')
  .action(async (name: string, o: { global?: boolean }) => {
    const res = await client().post(`/api/providers/${encodeURIComponent(name)}/refresh${o.global ? '?scope=global' : ''}`, {})
    print(res, () => `provider ${name}: ${res.provider.types.map((t: { name: string }) => t.name).join(', ')}`)
  })

provider
  .command('remove <name>')
  .description('remove a provider (refused while resources of its types exist)')
  .option('--global', 'the admin\'s provider of that name')
  .action(async (name: string, o: { global?: boolean }) => {
    await client().del(`/api/providers/${encodeURIComponent(name)}${o.global ? '?scope=global' : ''}`)
    print({ removed: name }, () => `provider ${name} removed`)
  })

program
  .command('template')
  .description('templates')
  .command('validate')
  .description('validate a template; problems are printed as path:line:column')
  .requiredOption('-t, --template <file>', 'template file')
  .option('-e, --environment <file>', 'environment file')
  .option('-P, --parameter <name=value>', 'parameter value (repeatable)', collect)
  .action(async (o) => {
    const res = await client().post('/api/templates/validate', submission(o))
    print(res, () => `valid (${res.version}): ${res.resources.length} resources, ${res.parameters.length} parameters, ${res.outputs.length} outputs`)
  })

/** Run the CLI (bin/kiln.mjs). */
export function run(argv: string[] = process.argv): Promise<unknown> {
  return program.parseAsync(argv).catch((err) => {
    if (err instanceof ApiError) {
      const where = err.issues.map((i) => `  ${i.path}${i.line ? `:${i.line}:${i.column}` : ''}  ${i.message}`).join('\n')
      // A stale edit or plan: what changed meanwhile, as a diff.
      const diff = err.details.diff ? `\n\nWhat changed meanwhile:\n${renderVersionDiff(err.details.diff as VersionDiff)}` : ''
      fail(`${err.status ? `${err.status}: ` : ''}${err.issues.length ? 'the template has problems:\n' + where : err.message}${diff}`, 1)
    }
    fail(err instanceof Error ? err.message : String(err), 1)
  })
}

/** The hooks nodes of the traversal wait at: each resource's latest hook event there is a pause, not a clear. */
async function pendingHooks(c: KilnClient, stackId: string, traversalId: string | null) {
  type Ev = { seq: number; at: string; resourceName: string | null; reason: string; traversalId: string | null; data?: { hook?: string; hook_state?: string } | null }
  const latest = new Map<string, Ev>()
  for (let after = 0; ; ) {
    const { events } = (await c.get(`/api/stacks/${stackId}/events?after=${after}&limit=5000`)) as { events: Ev[] }
    for (const e of events) if (e.data?.hook && e.resourceName && e.traversalId === traversalId) latest.set(`${e.resourceName} ${e.data.hook}`, e)
    if (events.length < 5000) break
    after = events.at(-1)!.seq
  }
  return [...latest.values()].filter((e) => e.data!.hook_state === 'paused').map((e) => ({ resource: e.resourceName!, hook: e.data!.hook!, reason: e.reason, at: e.at }))
}

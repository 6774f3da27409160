/**
 * Heat's convergence scenario harness (heat/tests/convergence/framework),
 * ported: one engine and one worker stepped in lock-step over the real
 * PostgreSQL store. Each tick the engine runs one scripted operation (create,
 * update, delete, rollback, a check) and then the worker processes one queued
 * message (the oldest job). `noop(n)` lets the worker process n messages.
 *
 * The worker runs the production code path (worker/dispatch.ts) with inline
 * continuation off, so each graph node is one message, as in Heat.
 */
import crypto from 'node:crypto'
import { expect } from 'vitest'
import { createDb, type Db } from '../../lib/db/client'
import { claimJobs } from '../../lib/db/queries/queue'
import { registerWorker } from '../../lib/db/queries/workers'
import { createStore } from '../../lib/db/store'
import { TraversalCache } from '../../lib/engine/traversal-context'
import { boundedEvaluator } from '../../lib/evaluation/bounded'
import { createLogger } from '../../lib/logger'
import { builtinTypes, createRegistry, typeCatalog } from '../../lib/resources/registry'
import { createStackService, type Actor, type StackService } from '../../lib/services/stacks'
import { RollbackSystem } from '../../lib/services/stacks/rollback'
import { dispatchJob, type DispatchDeps } from '../../worker/dispatch'
import { ActionAborts } from '../../worker/signals'
import { SCENARIO_TYPE, scenarioType } from '../helpers/scenario-type'

export type Val = string | { getRes: string } | { getAtt: [string, string] }
export interface RsrcDef {
  props?: Record<string, Val>
  deps?: string[]
}
export type Tmpl = Record<string, RsrcDef>

export const getRes = (r: string): Val => ({ getRes: r })
export const getAtt = (r: string, a: string): Val => ({ getAtt: [r, a] })

export function toHot(t: Tmpl): string {
  const conv = (v: Val) => (typeof v === 'string' ? v : 'getRes' in v ? { get_resource: v.getRes } : { get_attr: v.getAtt })
  const resources: Record<string, unknown> = {}
  for (const [name, def] of Object.entries(t)) {
    const r: Record<string, unknown> = { type: SCENARIO_TYPE }
    if (def.props && Object.keys(def.props).length) r.properties = Object.fromEntries(Object.entries(def.props).map(([k, v]) => [k, conv(v)]))
    if (def.deps?.length) r.depends_on = def.deps
    resources[name] = r
  }
  return JSON.stringify({ heat_template_version: '2013-05-23', resources }, null, 1)
}

export interface VisibleRow {
  id: number
  uuid: string
  name: string
  physicalId: string | null
  properties: Record<string, unknown>
}

type Op = { kind: 'create' | 'update'; tmpl: Tmpl } | { kind: 'delete' | 'rollback' } | { kind: 'noop'; n: number } | { kind: 'call'; fn: () => Promise<void> | void; label: string }

export class Scenario {
  private ops: Op[] = []
  readonly trace: string[] = []
  stackId: string | null = null
  private tick = 0
  readonly stored: Record<string, string> = {}

  private constructor(
    readonly db: Db,
    private readonly services: StackService,
    private readonly deps: DispatchDeps,
    private readonly actor: Actor,
  ) {}

  static async open(url: string): Promise<Scenario> {
    const db = createDb(url, { max: 4 })
    const registry = createRegistry([...builtinTypes(), scenarioType()])
    const services = createStackService({ db, catalog: typeCatalog(registry), types: registry, limits: { maxTemplateBytes: 1 << 20, maxResourcesPerStack: 1000 }, defaultTimeoutMins: 60 })
    const { rows } = await db.pool.query(`INSERT INTO project (name) VALUES ($1) RETURNING id`, [`scenario-${crypto.randomBytes(4).toString('hex')}`])
    const workerId = crypto.randomUUID()
    await registerWorker(db.pool, workerId, 1, 'scenario')
    const store = createStore(db.pool, { workerId, leaseMs: 60_000 })
    const deps: DispatchDeps = {
      pool: db.pool,
      workerId,
      rollback: new RollbackSystem({ db }),
      node: {
        store,
        traversals: new TraversalCache(store, boundedEvaluator),
        evaluator: boundedEvaluator,
        types: registry,
        typeConfig: { workspaceDir: '/nonexistent' },
        signals: new ActionAborts(),
        log: createLogger({ level: 'silent' }),
        inline: false,
      },
    }
    return new Scenario(db, services, deps, { projectId: rows[0].id, name: 'scenario' })
  }

  async close() {
    await this.db.close()
  }

  // ---- the script (enqueued; nothing runs until run()) ----
  createStack(tmpl: Tmpl) {
    this.ops.push({ kind: 'create', tmpl })
  }
  updateStack(tmpl: Tmpl) {
    this.ops.push({ kind: 'update', tmpl })
  }
  deleteStack() {
    this.ops.push({ kind: 'delete' })
  }
  rollback() {
    this.ops.push({ kind: 'rollback' })
  }
  noop(n: number) {
    this.ops.push({ kind: 'noop', n })
  }
  call(label: string, fn: () => Promise<void> | void) {
    this.ops.push({ kind: 'call', fn, label })
  }
  verify(tmpl: Tmpl) {
    this.call(`verify ${Object.keys(tmpl).join(',') || '{}'}`, () => this.assertVerify(tmpl))
  }

  /** The event loop: one engine operation, then one worker message, per tick; stops when both are idle. */
  async run(maxTicks = 500) {
    for (;;) {
      this.tick++
      if (this.tick > maxTicks) throw new Error(`scenario did not settle in ${maxTicks} ticks\n${this.trace.join('\n')}`)
      const engine = await this.engineStep()
      const worker = await this.workerStep()
      if (!engine && !worker) return
    }
  }

  private log(line: string) {
    this.trace.push(`t${String(this.tick).padEnd(3)} ${line}`)
  }

  private async engineStep(): Promise<boolean> {
    const op = this.ops.shift()
    if (!op) return false
    switch (op.kind) {
      case 'create': {
        const res = await this.services.create(this.actor, { name: 'foo', template: toHot(op.tmpl) })
        this.stackId = res.stack.id
        this.log(`E create ${Object.keys(op.tmpl).join(',')}`)
        break
      }
      case 'update':
        await this.services.update(this.actor, this.stackId!, { template: toHot(op.tmpl) })
        this.log(`E update ${Object.keys(op.tmpl).join(',')}`)
        break
      case 'delete':
        await this.services.delete(this.actor, this.stackId!)
        this.log('E delete')
        break
      case 'rollback':
        await this.services.rollback(this.actor, this.stackId!)
        this.log('E rollback')
        break
      case 'noop':
        if (op.n > 1) this.ops.unshift({ kind: 'noop', n: op.n - 1 })
        break
      case 'call':
        this.log(`E ${op.label}`)
        try {
          await op.fn()
        } catch (err) {
          throw new Error(`${(err as Error).message}\n--- trace ---\n${this.trace.join('\n')}\n--- rows ---\n${await this.dumpRows()}`, { cause: err })
        }
        break
    }
    return true
  }

  private async workerStep(): Promise<boolean> {
    const claimed = await claimJobs(this.db.pool, this.deps.workerId, 1)
    if (claimed.length > 1) throw new Error(`asked for one job, claimed ${claimed.length}`)
    const [job] = claimed
    if (!job) return false
    const res = await dispatchJob(this.deps, job)
    this.log(`W ${job.kind} #${job.resourceId}${job.isUpdate ? '' : '(c)'}${job.graphKeyId ? ` as #${job.graphKeyId}` : ''} -> ${res.outcome}`)
    return true
  }

  async dumpRows(): Promise<string> {
    const { rows } = await this.db.pool.query(
      `SELECT id, name, action, status, current_template_id, requires, replaces, replaced_by, engine_id FROM resource WHERE stack_id = $1 ORDER BY id`,
      [this.stackId],
    )
    const stack = await this.db.pool.query('SELECT action, status, status_reason FROM stack WHERE id = $1', [this.stackId])
    const s = stack.rows[0]
    const jobs = await this.db.pool.query(
      `SELECT id, kind, resource_id, is_update, locked_by IS NOT NULL AS claimed, run_at > clock_timestamp() AS later FROM job WHERE stack_id = $1 ORDER BY id`,
      [this.stackId],
    )
    return [
      `stack ${s?.action}_${s?.status} ${s?.status_reason}`,
      ...rows.map((r) => `  ${r.name}#${r.id} ${r.action}_${r.status} tmpl=${String(r.current_template_id).slice(0, 8)} requires=[${r.requires}] replaces=${r.replaces} replaced_by=${r.replaced_by}${r.engine_id ? ' LOCKED' : ''}`),
      ...jobs.rows.map((j) => `  job ${j.id} ${j.kind} #${j.resource_id}${j.is_update === false ? '(c)' : ''}${j.claimed ? ' claimed' : ''}${j.later ? ' not yet due' : ''}`),
    ].join('\n')
  }

  /** Heat's "reality": rows whose action is CREATE or UPDATE and status COMPLETE. */
  async visible(name?: string): Promise<VisibleRow[]> {
    const { rows } = await this.db.pool.query(
      `SELECT id, uuid, name, physical_id, properties FROM resource
        WHERE stack_id = $1 AND action IN ('CREATE', 'UPDATE') AND status = 'COMPLETE' ${name ? 'AND name = $2' : ''} ORDER BY id`,
      name ? [this.stackId, name] : [this.stackId],
    )
    return rows.map((r) => ({ id: r.id, uuid: r.uuid, name: r.name, physicalId: r.physical_id, properties: r.properties ?? {} }))
  }

  /** Heat's testutils.verify. */
  async assertVerify(tmpl: Tmpl) {
    const all = await this.visible()
    const byName = new Map<string, VisibleRow[]>()
    for (const r of all) byName.set(r.name, [...(byName.get(r.name) ?? []), r])
    for (const [name, def] of Object.entries(tmpl)) {
      const rows = byName.get(name) ?? []
      expect(rows.length, `exactly one visible ${name}`).toBe(1)
      const row = rows[0]!
      const props = def.props ?? {}
      for (const [p, v] of Object.entries(props)) {
        let want: unknown = v
        if (typeof v !== 'string') {
          if ('getRes' in v) want = byName.get(v.getRes)?.[0]?.physicalId
          else want = byName.get(v.getAtt[0])?.[0]?.properties[v.getAtt[1]]
        }
        expect(row.properties[p], `${name}.${p}`).toEqual(want)
      }
      expect(Object.keys(row.properties).length, `${name}: number of stored properties`).toBe(Object.keys(props).length)
    }
    expect([...byName.keys()].sort(), 'visible resources').toEqual(Object.keys(tmpl).sort())
  }

  async assertResourceCount(n: number) {
    expect((await this.visible()).length, 'visible resources').toBe(n)
  }

  async assertCounts(counts: Record<string, number>) {
    for (const [name, n] of Object.entries(counts)) expect((await this.visible(name)).length, `visible ${name}`).toBe(n)
  }

  async uuidOf(name: string): Promise<string> {
    const rows = await this.visible(name)
    expect(rows.length, `one visible ${name}`).toBe(1)
    return rows[0]!.uuid
  }

  async stackState(): Promise<string> {
    const { rows } = await this.db.pool.query('SELECT action, status FROM stack WHERE id = $1', [this.stackId])
    return `${rows[0].action}_${rows[0].status}`
  }
}

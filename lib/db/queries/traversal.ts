/**
 * Starting a traversal (Heat's converge_stack + _converge_create_or_update),
 * in ONE transaction under the stack row lock, so a stack is never half
 * written and no node can begin or finish in between:
 *
 *   1. lock the stack row; optional compare-and-swap on the current traversal
 *   2. read the live rows, choose the best row per resource name, insert INIT rows
 *   3. build the whole graph (update + cleanup nodes) once
 *   4. kiln_open_traversal, one round trip: supersede the previous traversal
 *      (outcome, superseded_by; its sync points go), store the new one with its
 *      graph, point the stack at it, create one sync point per node, queue
 *      every leaf (cleanup leaves first), NOTIFY the workers
 *
 * With no nodes at all the traversal completes at once.
 */
import crypto from 'node:crypto'
import type pg from 'pg'
import { buildGraph, chooseRows, findCycle, indexGraph } from '../../engine/graph'
import type { StoredTraversal } from '../../engine/ports'
import type { ExistingRow, StackAction, TraversalGraph, TraversalPlan } from '../../engine/types'
import { parseNodeId } from '../../engine/types'
import { withTransaction } from '../client'

export interface StartTraversalInput {
  stackId: string
  action: StackAction
  /** Template this traversal converges to (already inserted). */
  rawTemplateId: string
  plan: TraversalPlan
  startedBy: string
  /** Stack settings changed by this request. */
  timeoutMins?: number
  disableRollback?: boolean
  /** Start only if the stack's current traversal is this one (null: none). */
  expectTraversalId?: string | null
  /** Tell workers to abort in-flight actions of older traversals (delete). */
  abortInFlight?: boolean
  /** An update with `converge`: its nodes observe each object before deciding (StoredTraversal.converge). */
  converge?: boolean
  /**
   * An update with `preempt`: the resources whose targets it changes. The superseded traversal's
   * in-flight actions on their rows are aborted (NOTIFY kiln_abort, mode `rows`).
   */
  preempt?: string[]
  /** Statement run inside the transaction before anything else (e.g. inserting the raw template). */
  before?: (client: pg.PoolClient) => Promise<void>
  /**
   * Checked inside the transaction once the stack row is locked and `expectTraversalId`
   * holds (a saved plan's row versions): throwing refuses the start, and nothing is written.
   */
  guard?: (client: pg.PoolClient) => Promise<void>
}

export type StartTraversalResult =
  | { started: true; traversalId: string; nodeCount: number; leaves: number; superseded: string | null }
  | { started: false; reason: 'not_found' | 'conflict' | 'cycle'; detail?: string }

export class GraphCycleError extends Error {
  override name = 'GraphCycleError'
}

interface StackRow {
  id: string
  name: string
  current_traversal_id: string | null
  raw_template_id: string | null
  timeout_mins: number
  deleted_at: Date | null
}

function toExisting(r: Record<string, unknown>): ExistingRow {
  return {
    id: Number(r.id),
    name: String(r.name),
    action: r.action as ExistingRow['action'],
    status: r.status as ExistingRow['status'],
    currentTemplateId: (r.current_template_id as string | null) ?? null,
    requires: ((r.requires as number[]) ?? []).map(Number),
    replaces: r.replaces === null ? null : Number(r.replaces),
    replacedBy: r.replaced_by === null ? null : Number(r.replaced_by),
    updatedAt: new Date(r.updated_at as string).getTime(),
  }
}

export async function startTraversal(pool: pg.Pool, input: StartTraversalInput): Promise<StartTraversalResult> {
  try {
    return await withTransaction(pool, (client) => startInTransaction(client, input))
  } catch (err) {
    if (err instanceof GraphCycleError) return { started: false, reason: 'cycle', detail: err.message }
    throw err
  }
}

async function startInTransaction(client: pg.PoolClient, input: StartTraversalInput): Promise<StartTraversalResult> {
  await input.before?.(client)
  const { rows: stacks } = await client.query<StackRow>('SELECT * FROM stack WHERE id = $1 FOR NO KEY UPDATE', [input.stackId])
  const stack = stacks[0]
  if (!stack || stack.deleted_at) return { started: false, reason: 'not_found' }
  if (input.expectTraversalId !== undefined && stack.current_traversal_id !== input.expectTraversalId) {
    return { started: false, reason: 'conflict', detail: 'the stack has moved on to another operation' }
  }
  await input.guard?.(client)

  const { rows: live } = await client.query(
    `SELECT id, name, action, status, current_template_id, requires, replaces, replaced_by, updated_at
       FROM resource WHERE stack_id = $1 AND NOT (action = 'DELETE' AND status = 'COMPLETE') ORDER BY id`,
    [input.stackId],
  )
  const existing = live.map(toExisting)
  const prevTemplateId = stack.raw_template_id
  // A check and a drift check look at the rows of the stack's template: no new rows, no cleanup.
  const isCheck = input.action === 'CHECK' || input.action === 'DRIFT'
  const choice = chooseRows(input.plan.names, existing, prevTemplateId, input.rawTemplateId)
  if (isCheck && choice.missing.length) {
    return { started: false, reason: 'conflict', detail: `resources never created: ${choice.missing.join(', ')}` }
  }

  const traversalId = crypto.randomUUID()
  const rows = new Map(choice.bound)
  if (choice.missing.length) {
    const { rows: inserted } = await client.query(
      `INSERT INTO resource (stack_id, name, type, current_template_id, last_traversal_id)
       SELECT $1, n, t, $2, $3 FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS x(n, t, ord) ORDER BY ord
       RETURNING id, name`,
      [input.stackId, input.rawTemplateId, traversalId, choice.missing, choice.missing.map((n) => input.plan.types[n] ?? 'OS::Heat::None')],
    )
    for (const r of inserted) rows.set(String(r.name), Number(r.id))
  }
  // Only update nodes for the names of the template; a CHECK has no cleanup part.
  const ordered = new Map(input.plan.names.map((n) => [n, rows.get(n)!]))
  const graph: TraversalGraph = buildGraph(ordered, input.plan.dependsOn, isCheck ? [] : existing)
  const index = indexGraph(graph)
  const cycle = findCycle(index)
  if (cycle) throw new GraphCycleError(`the traversal graph has a cycle: ${cycle.join(' -> ')}`)

  const superseded = stack.current_traversal_id
  const rids: number[] = []
  const upd: boolean[] = []
  const required: number[] = []
  // A cleanup node's successors, for the step that makes it ready (kiln_finish_node completes one with nothing to do).
  const successors: (string | null)[] = []
  for (const n of graph.nodes) {
    rids.push(n.rid)
    upd.push(n.update)
    required.push(index.requires.get(n.id)!.length)
    successors.push(n.update ? null : JSON.stringify((index.requiredBy.get(n.id) ?? []).map(parseNodeId).map((k) => [k.rid, k.update])))
  }
  const leafKeys = index.leaves.map(parseNodeId)
  // Not only a superseded traversal's actions: a cancel without rollback leaves the stack with no
  // current traversal while its in-flight actions go on, and a delete stops those too.
  const abort = input.abortInFlight
    ? JSON.stringify({ stack_id: input.stackId, traversal_id: traversalId, mode: 'others', reason: `stack ${input.action.toLowerCase()} requested` })
    : superseded && input.preempt?.length ? await preemptNotice(client, input.stackId, traversalId, superseded, input.preempt) : null
  // Everything else in one round trip (lib/db/functions/15_open_traversal.sql).
  await client.query(
    `SELECT kiln_open_traversal($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)`,
    [
      input.stackId, traversalId, superseded, input.action,
      input.rawTemplateId, isCheck ? stack.raw_template_id : input.rawTemplateId, input.startedBy, input.timeoutMins ?? stack.timeout_mins, input.disableRollback ?? null,
      JSON.stringify(graph), index.roots.size,
      rids, upd, required, successors,
      leafKeys.map((k) => k.rid), leafKeys.map((k) => k.update),
      abort,
    ],
  )
  // Rare, so a statement of its own rather than another argument of the one above; in the same
  // transaction, so no worker can load the traversal without it (NOTIFY is delivered at commit).
  if (input.converge) await client.query('UPDATE traversal SET converge = true WHERE id = $1', [traversalId])
  return { started: true, traversalId, nodeCount: graph.nodes.length, leaves: index.leaves.length, superseded }
}

/** NOTIFY payloads are limited to 8000 bytes; a longer list of rows aborts every action of the older traversals instead. */
const MAX_ABORT_PAYLOAD = 7500

/**
 * The kiln_abort notice of a preempting update: every row of the resources
 * whose targets changed (a replacement of one acts on a row of its own), read
 * under the stack row's lock, so that no node step of the superseded
 * traversal can make another meanwhile.
 */
async function preemptNotice(client: pg.PoolClient, stackId: string, traversalId: string, superseded: string, names: string[]): Promise<string> {
  const { rows } = await client.query(`SELECT id FROM resource WHERE stack_id = $1 AND name = ANY($2) ORDER BY id`, [stackId, names])
  const reason = `preempted by update ${traversalId}`
  const notice = JSON.stringify({ stack_id: stackId, traversal_id: traversalId, mode: 'rows', rows: rows.map((r) => Number(r.id)), reason })
  if (Buffer.byteLength(notice) <= MAX_ABORT_PAYLOAD) return notice
  return JSON.stringify({ stack_id: stackId, traversal_id: traversalId, mode: 'others', reason: `${reason} (of ${names.length} resources: every action of ${superseded} is aborted)` })
}

function ev(kind: string, traversalId: string, status: string, reason: string, data: Record<string, unknown>, action?: string) {
  return { kind, traversal_id: traversalId, action: action ?? null, status, reason, data }
}

/** Stop the current traversal without starting another (cancel without rollback). */
export async function stopTraversal(pool: pg.Pool, stackId: string, reason: string): Promise<{ stopped: boolean; traversalId: string | null }> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query('SELECT * FROM stack WHERE id = $1 AND deleted_at IS NULL FOR NO KEY UPDATE', [stackId])
    const s = rows[0] as { current_traversal_id: string | null; status: string; action: string } | undefined
    if (!s || s.status !== 'IN_PROGRESS' || !s.current_traversal_id) return { stopped: false, traversalId: null }
    const t = s.current_traversal_id
    await client.query(`UPDATE traversal SET outcome = 'CANCELLED', outcome_reason = $2, ended_at = now() WHERE id = $1 AND outcome IS NULL`, [t, reason])
    // A parked node is in flight: it stays, and finishes as a running action does (25_park.sql).
    await client.query(`DELETE FROM job WHERE traversal_id = $1 AND locked_by IS NULL AND park IS NULL`, [t])
    await client.query('DELETE FROM sync_input WHERE traversal_id = $1', [t])
    await client.query('DELETE FROM sync_point WHERE traversal_id = $1', [t])
    // No traversal is current any more: in-flight workers finish their resource and stop.
    await client.query(`UPDATE stack SET current_traversal_id = NULL, status = 'FAILED', status_reason = $2 WHERE id = $1`, [stackId, reason])
    await client.query('SELECT kiln_emit($1, $2)', [stackId, JSON.stringify([ev('stack', t, 'FAILED', reason, { cancelled: true }, s.action)])])
    await client.query(`SELECT kiln_notify_settled($1, $2, $3, 'FAILED')`, [stackId, t, s.action])
    return { stopped: true, traversalId: t }
  })
}

/**
 * A traversal as a worker needs it. The template's text comes only when no
 * parsed copy was stored (a delete, a rollback to nothing): every worker loads
 * every traversal, and otherwise reads only the parsed copy.
 */
export async function loadTraversal(pool: pg.Pool, traversalId: string): Promise<StoredTraversal | null> {
  const { rows } = await pool.query(
    `SELECT t.id, t.stack_id, t.action, t.raw_template_id, t.deadline, t.converge, g.graph, s.name AS stack_name, s.project_id,
            CASE WHEN rt.template IS NULL OR rt.template = '{}'::jsonb THEN rt.source END AS source,
            rt.template, rt.environment, rt.parameters
       FROM traversal t JOIN traversal_graph g ON g.traversal_id = t.id
       JOIN stack s ON s.id = t.stack_id JOIN raw_template rt ON rt.id = t.raw_template_id
      WHERE t.id = $1`,
    [traversalId],
  )
  const r = rows[0]
  if (!r) return null
  return {
    id: r.id,
    stackId: r.stack_id,
    stackName: r.stack_name,
    projectId: r.project_id,
    action: r.action,
    rawTemplateId: r.raw_template_id,
    deadline: r.deadline,
    converge: r.converge === true,
    graph: r.graph as TraversalGraph,
    template: { source: r.source, parsed: r.template ?? null, environment: r.environment ?? {}, parameters: r.parameters ?? {} },
  }
}


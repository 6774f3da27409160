/** A stack's traversals as the read side shows them: the history, one traversal, its graph and sync points. */
import type pg from 'pg'
import type { TraversalGraph } from '../../engine/types'

/** A traversal row as shown. */
export type TraversalRow = {
  id: string
  action: string
  raw_template_id: string
  started_by: string
  started_at: Date
  deadline: Date
  ended_at: Date | null
  outcome: string | null
  outcome_reason: string
  superseded_by_id: string | null
  failure_reason: string | null
  node_count: number
}

const COLUMNS = 'id, action, raw_template_id, started_by, started_at, deadline, ended_at, outcome, outcome_reason, superseded_by_id, failure_reason, node_count'

/** The stack's traversals, newest first. */
export async function listTraversals(pool: pg.Pool, stackId: string): Promise<TraversalRow[]> {
  const { rows } = await pool.query<TraversalRow>(
    `SELECT ${COLUMNS}
           FROM traversal WHERE stack_id = $1 ORDER BY started_at DESC, id`,
    [stackId],
  )
  return rows
}

/** One traversal of the stack; `current`: the one given (the stack's current one), else the stack's latest. */
export async function traversalForRead(pool: pg.Pool, stackId: string, ref: { current: string | null } | { id: string }): Promise<TraversalRow | null> {
  const current = 'current' in ref
  const { rows } = await pool.query<TraversalRow>(
    `SELECT ${COLUMNS}
           FROM traversal WHERE stack_id = $1 AND ${current ? 'id = coalesce($2::uuid, (SELECT id FROM traversal WHERE stack_id = $1 ORDER BY started_at DESC, id LIMIT 1))' : 'id = $2'}`,
    [stackId, current ? ref.current : ref.id],
  )
  return rows[0] ?? null
}

/** A traversal of the stack with its stored graph. */
export async function traversalGraph(pool: pg.Pool, stackId: string, traversalId: string): Promise<{ id: string; graph: TraversalGraph; action: string; outcome: string | null } | null> {
  const { rows } = await pool.query('SELECT t.id, g.graph, t.action, t.outcome FROM traversal t JOIN traversal_graph g ON g.traversal_id = t.id WHERE t.id = $1 AND t.stack_id = $2', [traversalId, stackId])
  return rows[0] ?? null
}

/** The traversal's sync points: each node's state and how many of its inputs arrived. */
export async function syncPointStates(pool: pg.Pool, traversalId: string): Promise<{ resource_id: number; is_update: boolean; state: string; satisfied: number; required: number }[]> {
  const { rows } = await pool.query('SELECT resource_id, is_update, state, satisfied, required FROM sync_point WHERE traversal_id = $1', [traversalId])
  return rows
}

/** The template a traversal of the stack ran with (null: not a traversal of the stack). */
export async function traversalTemplateId(pool: pg.Pool, stackId: string, traversalId: string): Promise<string | null> {
  const { rows } = await pool.query('SELECT raw_template_id FROM traversal WHERE id = $1 AND stack_id = $2', [traversalId, stackId])
  return rows[0] ? String(rows[0].raw_template_id) : null
}

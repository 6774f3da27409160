/**
 * The engine's node operations: thin wrappers around the PL/pgSQL functions
 * in lib/db/functions (one round trip each). Read those files for the locking
 * and compare-and-swap rules; this file only maps arguments and results.
 * The hot calls are named prepared statements: parsed once per connection.
 */
import type pg from 'pg'
import type { BeginResult, ClaimedJob, FinishRequest, FinishResult, ParkRequest, ParkResult, ReplaceRequest, ReplaceResult, ResumedNode, RowUpdate } from '../../engine/ports'
import type { NodePayload, ResourceAction } from '../../engine/types'
import { withRetry } from '../retry'
import { toClaimedJob, toResourceRow } from './rows'

type Json = Record<string, unknown>

function scopeOf(out: Json) {
  const st = out.stack as Json
  const tr = out.traversal as Json
  return {
    stack: { id: String(st.id), name: String(st.name), action: st.action as never },
    traversal: { id: String(tr.id), action: tr.action as never, rawTemplateId: String(tr.raw_template_id), deadline: new Date(String(tr.deadline)) },
  }
}

/**
 * A node step reported that its traversal may have ended (last root done, or a
 * failure): decide the stack's status in a transaction of its own, after the
 * step committed. Node steps share the stack row; only this takes it alone. If
 * it cannot run (the database went away), the sweeper settles the stack instead.
 */
export async function settleTraversal(pool: pg.Pool, stackId: string, traversalId: string): Promise<void> {
  await withRetry(() => pool.query('SELECT kiln_settle($1, $2)', [stackId, traversalId]), { maxMs: 10_000 }).catch(() => {})
}

async function settleIfAsked(pool: pg.Pool, stackId: string, out: Json): Promise<void> {
  if (typeof out.settle === 'string') await settleTraversal(pool, stackId, out.settle)
}

export async function beginNode(pool: pg.Pool, workerId: string, leaseMs: number, job: ClaimedJob): Promise<BeginResult> {
  const { rows } = await pool.query({ name: 'kiln_begin_node', text: 'SELECT kiln_begin_node($1, $2, $3) AS out', values: [job.id, workerId, leaseMs] })
  const out = rows[0].out as Json
  await settleIfAsked(pool, job.stackId, out)
  return toBeginResult(out)
}

/**
 * A job claimed inside another step's transaction, with the begin done there
 * too; a begin that answered 'later' (or none) leaves `begun` unset: the worker
 * begins it separately.
 */
export function claimedWithBegin(job: Json, begun: unknown): ClaimedJob {
  const claimed = toClaimedJob(job)
  if (begun && typeof begun === 'object' && (begun as Json).outcome !== 'later') claimed.begun = toBeginResult(begun as Json)
  return claimed
}

function toBeginResult(out: Json): BeginResult {
  const outcome = out.outcome as BeginResult['outcome']
  if (outcome !== 'locked') return { outcome } as BeginResult
  return {
    outcome,
    resource: toResourceRow(out.resource as Json),
    inputs: (out.inputs as NodePayload[]) ?? [],
    replacesUuid: (out.replaces_uuid as string | null) ?? null,
    ...(out.resumed ? { resumed: toResumed(out.resumed as Json) } : {}),
    ...scopeOf(out),
  }
}

function toResumed(r: Json): ResumedNode {
  return {
    since: new Date(String(r.since)),
    until: new Date(String(r.until)),
    due: r.due === true,
    abort: typeof r.abort === 'string' ? r.abort : null,
  }
}

/** Park a node (kiln_park_node, lib/db/functions/25_park.sql). */
export async function parkNode(pool: pg.Pool, workerId: string, job: ClaimedJob, req: ParkRequest): Promise<ParkResult> {
  const park = {
    action: req.action,
    reason: req.reason,
    until: req.until.toISOString(),
    wake_key: req.wakeKey,
    seen: req.seen,
    before: { action: req.before.action, status: req.before.status, status_reason: req.before.statusReason },
    inputs: req.inputs,
    ...(req.inProgressEvent ? { in_progress_event: req.inProgressEvent } : {}),
  }
  const { rows } = await pool.query('SELECT kiln_park_node($1, $2, $3) AS out', [job.id, workerId, JSON.stringify(park)])
  const out = rows[0].out as Json
  if (out.outcome === 'aborted') return { outcome: 'aborted', reason: String(out.reason) }
  return { outcome: out.outcome as 'parked' | 'again' | 'gone' | 'lock_lost' }
}

function rowUpdateToJson(u: RowUpdate): Json {
  const map: Record<keyof RowUpdate, string> = {
    action: 'action',
    status: 'status',
    statusReason: 'status_reason',
    type: 'type',
    physicalId: 'physical_id',
    properties: 'properties',
    attributes: 'attributes',
    data: 'data',
    secretForms: 'secret_forms',
    requires: 'requires',
    currentTemplateId: 'current_template_id',
    deletionPolicy: 'deletion_policy',
    clearReplacedBy: 'clear_replaced_by',
  }
  const out: Json = {}
  for (const [k, v] of Object.entries(u)) if (v !== undefined) out[map[k as keyof RowUpdate]] = v
  return out
}

/**
 * Finish a node. With `req.claim`, up to `req.claimMax` successors this finish made ready are
 * claimed for us and, given `beginLeaseMs`, also begun (locked) in the same transaction: a
 * chain costs one round trip per node instead of two, and a fan-out no queue hop.
 */
export async function finishNode(pool: pg.Pool, workerId: string, job: ClaimedJob, req: FinishRequest, beginLeaseMs?: number, lazyTypes: readonly string[] = []): Promise<FinishResult> {
  const body = finishBody(req, beginLeaseMs, lazyTypes)
  const { rows } = await pool.query({ name: 'kiln_finish_node', text: 'SELECT kiln_finish_node($1, $2, $3) AS out', values: [job.id, workerId, JSON.stringify(body)] })
  return finishResult(pool, job, rows[0].out as Json)
}

/**
 * Finish several nodes of one stack in one transaction (kiln_finish_nodes): one commit and
 * one turn at the stack's event lock for finishes that are ready at the same moment.
 * Results come back in the order of `items`.
 */
export async function finishNodes(
  pool: pg.Pool, workerId: string, items: { job: ClaimedJob; req: FinishRequest }[], beginLeaseMs?: number, lazyTypes: readonly string[] = [],
): Promise<FinishResult[]> {
  const body = items.map(({ job, req }) => ({ job: job.id, result: finishBody(req, beginLeaseMs, lazyTypes) }))
  return batchCall(pool, 'kiln_finish_nodes', workerId, items, body, finishResult)
}

/** One call of a batch function (`name(worker, items)`); its per-item answers, in the order of `items`, read by `toResult`. */
async function batchCall<R>(
  pool: pg.Pool, name: string, workerId: string, items: { job: ClaimedJob }[], body: Json[], toResult: (pool: pg.Pool, job: ClaimedJob, out: Json) => Promise<R>,
): Promise<R[]> {
  const { rows } = await pool.query({ name, text: `SELECT ${name}($1, $2) AS out`, values: [workerId, JSON.stringify(body)] })
  const outs = rows[0].out as Json[]
  const results: R[] = []
  for (const [i, { job }] of items.entries()) results.push(await toResult(pool, job, outs[i]!))
  return results
}

/**
 * `lazyTypes`: the worker's state-only resource types; a finish whose rows are
 * all of them commits without waiting for the disk (kiln_commit_lazily).
 */
function finishBody(req: FinishRequest, beginLeaseMs: number | undefined, lazyTypes: readonly string[]): Json {
  return {
    ok: req.ok,
    reason: req.reason,
    set: rowUpdateToJson(req.set ?? {}),
    resource_event: req.resourceEvent ?? false,
    payload: req.payload ?? null,
    successors: req.successors.map((s) => [s.rid, s.update]),
    is_root: req.isRoot,
    claim: req.claim,
    claim_max: req.claimMax ?? 1,
    deleted: req.deleted ?? false,
    event_data: req.eventData ?? {},
    ...(req.inProgressEvent ? { in_progress_event: req.inProgressEvent } : {}),
    ...(req.claim && beginLeaseMs ? { begin_lease_ms: beginLeaseMs } : {}),
    ...(lazyTypes.length ? { lazy_types: lazyTypes } : {}),
  }
}

async function finishResult(pool: pg.Pool, job: ClaimedJob, out: Json): Promise<FinishResult> {
  if (out.outcome !== 'ok') return { outcome: out.outcome as 'gone' | 'lock_lost' }
  await settleIfAsked(pool, job.stackId, out)
  const claimed = (out.claimed as { job: Json; begun: unknown }[]).map(({ job: j, begun }) => claimedWithBegin(j, begun))
  return { outcome: 'ok', claimed }
}

/**
 * Replace a node's row; with `req.claim` (and `beginLeaseMs`) the new row's node is claimed and begun in the same transaction.
 * `lazyTypes` as for a finish: a replacement of a state-only row by one commits without waiting for the disk.
 */
export async function replaceNode(pool: pg.Pool, workerId: string, job: ClaimedJob, req: ReplaceRequest, beginLeaseMs?: number, lazyTypes: readonly string[] = []): Promise<ReplaceResult> {
  const spec = replaceSpec(req, beginLeaseMs, lazyTypes)
  const { rows } = await pool.query({ name: 'kiln_replace_node', text: 'SELECT kiln_replace_node($1, $2, $3) AS out', values: [job.id, workerId, JSON.stringify(spec)] })
  return replaceResult(pool, job, rows[0].out as Json)
}

/**
 * Several replace calls of one worker in one transaction (kiln_replace_nodes): one commit
 * and one turn at the stack's event lock for calls that are ready at the same moment.
 * Results come back in the order of `items`.
 */
export async function replaceNodes(
  pool: pg.Pool, workerId: string, items: { job: ClaimedJob; req: ReplaceRequest }[], beginLeaseMs?: number, lazyTypes: readonly string[] = [],
): Promise<ReplaceResult[]> {
  const body = items.map(({ job, req }) => ({ job: job.id, spec: replaceSpec(req, beginLeaseMs, lazyTypes) }))
  return batchCall(pool, 'kiln_replace_nodes', workerId, items, body, replaceResult)
}

function replaceSpec(req: ReplaceRequest, beginLeaseMs: number | undefined, lazyTypes: readonly string[]): Json {
  return {
    type: req.type,
    requires: req.requires,
    reason: req.reason,
    claim: req.claim,
    ...(req.uuid ? { uuid: req.uuid } : {}),
    ...(req.claim && beginLeaseMs ? { begin_lease_ms: beginLeaseMs } : {}),
    ...(lazyTypes.length ? { lazy_types: lazyTypes } : {}),
  }
}

async function replaceResult(pool: pg.Pool, job: ClaimedJob, out: Json): Promise<ReplaceResult> {
  if (out.outcome !== 'ok') return { outcome: out.outcome as 'gone' | 'lock_lost' | 'stale' }
  await settleIfAsked(pool, job.stackId, out)
  return { outcome: 'ok', replacement: toResourceRow(out.replacement as Json), claimed: out.claimed ? claimedWithBegin(out.claimed as Json, out.begun) : null }
}

/** `lazyTypes` as for a finish: the mark of a state-only row commits without waiting for the disk. */
export async function markInProgress(pool: pg.Pool, workerId: string, job: ClaimedJob, action: ResourceAction, lazyTypes: readonly string[] = []): Promise<boolean> {
  const { rows } = await pool.query({
    name: 'kiln_mark_in_progress',
    text: 'SELECT kiln_mark_in_progress($1, $2, $3, $4) AS ok',
    values: [job.id, workerId, action, JSON.stringify(lazyTypes)],
  })
  return rows[0].ok === true
}

export async function recordIntent(pool: pg.Pool, workerId: string, job: ClaimedJob, properties: Record<string, unknown>, requires: number[]): Promise<boolean> {
  const { rows } = await pool.query({ name: 'kiln_record_intent', text: 'SELECT kiln_record_intent($1, $2, $3, $4::int[]) AS ok', values: [job.id, workerId, JSON.stringify(properties), requires] })
  return rows[0].ok === true
}

/** ConvergenceStore.markAdopting: one guarded statement (the job must be ours, and the row still locked by us). */
export async function markAdopting(pool: pg.Pool, workerId: string, job: ClaimedJob, externalId: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE resource SET deletion_policy = 'Retain', data = coalesce(data, '{}'::jsonb) || jsonb_build_object('externalId', $3::text), updated_at = now()
      WHERE id = (SELECT resource_id FROM job WHERE id = $1 AND locked_by = $2) AND engine_id = $2`,
    [job.id, workerId, externalId],
  )
  return rowCount === 1
}

/** The node reached a hook and parks at it next (kiln_node_hook). */
export async function recordHook(pool: pg.Pool, workerId: string, job: ClaimedJob, hook: string, reason: string): Promise<void> {
  await pool.query('SELECT kiln_node_hook($1, $2, $3, $4)', [job.id, workerId, hook, reason])
}

export async function reportProgress(pool: pg.Pool, workerId: string, job: ClaimedJob, message: string, fraction: number | null): Promise<void> {
  await pool.query('SELECT kiln_node_progress($1, $2, $3, $4)', [job.id, workerId, message.slice(0, 500), fraction])
}

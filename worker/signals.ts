/**
 * AbortSignals for in-flight resource actions. An action is aborted when:
 *   - its traversal's deadline passes (a timer per action);
 *   - the stack is deleted while it runs (NOTIFY kiln_abort, mode 'others');
 *   - its traversal timed out elsewhere (NOTIFY kiln_abort, mode 'this');
 *   - an update preempts it: its row's target changed (NOTIFY kiln_abort, mode 'rows');
 *   - the worker shuts down and the drain period is over, or it lost its lease.
 */
import type { ActionSignals } from '../lib/engine/check-resource'
import type { ClaimedJob } from '../lib/engine/ports'

interface Entry {
  stackId: string
  traversalId: string | null
  /** The row the action is on. */
  resourceId: number | null
  controller: AbortController
}

export interface AbortNotice {
  stack_id: string
  traversal_id: string
  /**
   * 'others': abort every action of the stack not of this traversal; 'this': abort this traversal's actions;
   * 'rows': abort the actions on these rows not of this traversal (a preempting update).
   */
  mode: 'others' | 'this' | 'rows'
  rows?: number[]
  reason: string
}

/** How long a notice is remembered for actions that open after it arrived. */
const NOTICE_MEMORY_MS = 120_000

export class ActionAborts implements ActionSignals {
  private readonly active = new Map<number, Entry>()
  /**
   * The last notice per stack. A node locks its row (begin) a moment before its
   * action opens a signal; a notice that lands in between would otherwise be
   * missed, and the action would run to its end under a superseded traversal.
   */
  private readonly recent = new Map<string, { notice: AbortNotice; at: number }>()
  private seq = 0

  open(job: ClaimedJob, deadline: Date) {
    const controller = new AbortController()
    const key = ++this.seq
    const timer = setTimeout(() => controller.abort(new Error('timed out')), Math.max(0, deadline.getTime() - Date.now()))
    timer.unref()
    this.active.set(key, { stackId: job.stackId, traversalId: job.traversalId, resourceId: job.resourceId, controller })
    const last = this.recent.get(job.stackId)
    if (last && Date.now() - last.at < NOTICE_MEMORY_MS && hits(last.notice, job.traversalId, job.resourceId)) controller.abort(new Error(last.notice.reason))
    return {
      signal: controller.signal,
      close: () => {
        clearTimeout(timer)
        this.active.delete(key)
      },
    }
  }

  /** Apply a kiln_abort notification; returns how many actions were aborted. */
  notice(n: AbortNotice): number {
    const now = Date.now()
    this.recent.set(n.stack_id, { notice: n, at: now })
    for (const [stack, r] of this.recent) if (now - r.at > NOTICE_MEMORY_MS) this.recent.delete(stack)
    let count = 0
    for (const e of this.active.values()) {
      if (e.stackId !== n.stack_id || e.controller.signal.aborted) continue
      if (!hits(n, e.traversalId, e.resourceId)) continue
      e.controller.abort(new Error(n.reason))
      count++
    }
    return count
  }

  abortAll(reason: string): number {
    let count = 0
    for (const e of this.active.values()) {
      if (e.controller.signal.aborted) continue
      e.controller.abort(new Error(reason))
      count++
    }
    return count
  }

  get size() {
    return this.active.size
  }
}

function hits(n: AbortNotice, traversalId: string | null, resourceId: number | null): boolean {
  if (n.mode === 'this') return traversalId === n.traversal_id
  if (n.mode === 'rows') return traversalId !== n.traversal_id && resourceId !== null && (n.rows ?? []).includes(resourceId)
  return traversalId !== n.traversal_id
}

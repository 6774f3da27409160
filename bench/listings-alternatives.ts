/**
 * The listings of bench/listings.ts written the other way: Prisma Client's
 * typed queries (a second query for what a join or a lateral aggregate gave).
 */
import type { Db } from '../lib/db/client'
import type { StackListQuery } from '../lib/db/queries/stacks'

export function alternatives(db: Db) {
  return {
    async listStacks(projectId: string, q: StackListQuery) {
      // Actions have no `_`: the first one splits CREATE_IN_PROGRESS into action and status.
      const cut = q.status?.indexOf('_') ?? -1
      const stacks = await db.prisma.stack.findMany({
        where: {
          projectId,
          deletedAt: null,
          ...(q.status ? { OR: [{ status: q.status }, ...(cut > 0 ? [{ action: q.status.slice(0, cut), status: q.status.slice(cut + 1) }] : [])] } : {}),
          ...(q.name ? { name: { contains: q.name.replace(/[\\%_]/g, (c) => `\\${c}`), mode: 'insensitive' as const } } : {}),
          ...(q.after ? { AND: [{ OR: [{ createdAt: { lt: new Date(q.after.at) } }, { createdAt: new Date(q.after.at), id: { lt: q.after.id } }] }] } : {}),
        },
        orderBy: [{ createdAt: 'desc' }, { id: 'desc' }],
        take: q.limit,
      })
      const running = stacks.flatMap((s) => (s.status === 'IN_PROGRESS' && s.currentTraversalId ? [s.currentTraversalId] : []))
      const counts = running.length
        ? await db.prisma.syncPoint.groupBy({ by: ['traversalId', 'state'], where: { traversalId: { in: running } }, _count: { _all: true } })
        : []
      return stacks.map((s) => {
        const mine = s.status === 'IN_PROGRESS' ? counts.filter((c) => c.traversalId === s.currentTraversalId) : null
        const n = (...states: string[]) => mine!.filter((c) => states.includes(c.state)).reduce((a, c) => a + c._count._all, 0)
        return { ...s, progress: mine ? { total: n('WAITING', 'READY', 'RUNNING', 'BLOCKED', 'DONE', 'FAILED', 'SKIPPED'), done: n('DONE', 'SKIPPED'), running: n('RUNNING'), blocked: n('BLOCKED'), failed: n('FAILED') } : null }
      })
    },

    async listResources(stackId: string, opts: { all?: boolean; id?: number } = {}) {
      const rows = await db.prisma.resource.findMany({
        where: { stackId, ...(opts.id !== undefined ? { id: opts.id } : opts.all ? {} : { NOT: { action: 'DELETE', status: 'COMPLETE' } }) },
        orderBy: [{ name: 'asc' }, { id: 'asc' }],
      })
      const holders = [...new Set(rows.flatMap((r) => (r.engineId ? [r.engineId] : [])))]
      const workers = holders.length ? await db.prisma.worker.findMany({ where: { id: { in: holders } }, select: { id: true, hostname: true, pid: true } }) : []
      const names = new Map(workers.map((w) => [w.id, `${w.hostname}:${w.pid}`]))
      return rows.map((r) => ({ ...r, workerName: r.engineId ? (names.get(r.engineId) ?? null) : null }))
    },

    async eventsPage(stackId: string, q: { after: number; limit: number; resource?: string; traversal?: string }) {
      return db.prisma.event.findMany({
        where: { stackId, seq: { gt: q.after }, ...(q.resource ? { resourceName: q.resource } : {}), ...(q.traversal ? { traversalId: q.traversal } : {}) },
        orderBy: { seq: 'asc' },
        take: q.limit,
      })
    },
  }
}

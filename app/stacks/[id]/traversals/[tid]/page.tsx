import { Shell } from '../../../../../components/Shell'
import { StackPage } from '../../../../../components/StackPage'
import { requireSessionCookie } from '../../../../session-gate'

/** One traversal of a stack, opened from the history or a deep link: `?node=<resource name>&t=<seconds from its start>`. */
export default async function Page({ params, searchParams }: { params: Promise<{ id: string; tid: string }>; searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { id, tid } = await params
  await requireSessionCookie(`/stacks/${id}/traversals/${tid}`)
  const q = await searchParams
  const node = typeof q.node === 'string' ? q.node : null
  const t = typeof q.t === 'string' && /^\d+(\.\d+)?$/.test(q.t) ? Number(q.t) : null
  return (
    <Shell>
      <StackPage key={tid} stackId={id} traversalId={tid} initialNode={node} initialT={t} />
    </Shell>
  )
}

import { Shell } from '../../../components/Shell'
import { StackPage } from '../../../components/StackPage'
import { requireSessionCookie } from '../../session-gate'

export default async function Page({ params, searchParams }: { params: Promise<{ id: string }>; searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { id } = await params
  await requireSessionCookie(`/stacks/${id}`)
  const q = await searchParams
  return (
    <Shell>
      <StackPage key={id} stackId={id} initialNode={typeof q.node === 'string' ? q.node : null} />
    </Shell>
  )
}

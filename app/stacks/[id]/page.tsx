import { EarlyReads } from '../../../components/EarlyReads'
import { Shell } from '../../../components/Shell'
import { StackPage } from '../../../components/StackPage'
import { firstLoadPaths } from '../../../components/stack-api'
import { UUID } from '../../../lib/ids'
import { requireSessionCookie } from '../../session-gate'

export default async function Page({ params, searchParams }: { params: Promise<{ id: string }>; searchParams: Promise<Record<string, string | string[] | undefined>> }) {
  const { id } = await params
  await requireSessionCookie(`/stacks/${id}`)
  const q = await searchParams
  return (
    <>
      {/* anything but a stack id is not read early: the page reports what the API says of it */}
      {UUID.test(id) && <EarlyReads paths={firstLoadPaths(id)} />}
      <Shell>
        <StackPage key={id} stackId={id} initialNode={typeof q.node === 'string' ? q.node : null} />
      </Shell>
    </>
  )
}

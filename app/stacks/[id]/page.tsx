import { Shell } from '../../../components/Shell'
import { StackPage } from '../../../components/StackPage'

export default async function Page({ params }: { params: Promise<{ id: string }> }) {
  const { id } = await params
  return (
    <Shell>
      <StackPage stackId={id} />
    </Shell>
  )
}

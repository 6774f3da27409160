import { NewStack } from '../../../components/NewStack'
import { Shell } from '../../../components/Shell'
import { requireSessionCookie } from '../../session-gate'

export default async function Page() {
  await requireSessionCookie('/stacks/new')
  return (
    <Shell>
      <NewStack />
    </Shell>
  )
}

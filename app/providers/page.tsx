import { Providers } from '../../components/Providers'
import { Shell } from '../../components/Shell'
import { requireSessionCookie } from '../session-gate'

export default async function Page() {
  await requireSessionCookie('/providers')
  return (
    <Shell>
      <Providers />
    </Shell>
  )
}

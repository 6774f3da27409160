import { Shell } from '../components/Shell'
import { StacksList } from '../components/StacksList'
import { requireSessionCookie } from './session-gate'

export default async function Home() {
  await requireSessionCookie('/')
  return (
    <Shell>
      <StacksList />
    </Shell>
  )
}

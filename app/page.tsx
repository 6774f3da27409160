import { Shell } from '../components/Shell'
import { StacksList } from '../components/StacksList'

export default function Home() {
  return (
    <Shell>
      <StacksList />
    </Shell>
  )
}

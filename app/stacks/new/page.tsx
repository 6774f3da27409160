import { NewStack } from '../../../components/NewStack'
import { Shell } from '../../../components/Shell'

export default function Page() {
  return (
    <Shell>
      <NewStack />
    </Shell>
  )
}

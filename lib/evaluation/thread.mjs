// An evaluation thread's entry (lib/evaluation/pool.ts). Worker threads do not inherit the
// process's TypeScript loader, so the thread registers tsx itself before loading thread.ts.
import { register } from 'tsx/esm/api'

register()
const { runOnThread } = await import('./thread.ts')
export default runOnThread

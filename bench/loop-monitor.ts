/**
 * Preloaded into a process the bombs bench starts (`node --import tsx
 * --import ./bench/loop-monitor.ts …`): samples the event loop's delay
 * (perf_hooks.monitorEventLoopDelay) and answers the bench over IPC with the
 * longest stall since its last reset.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks'

const delay = monitorEventLoopDelay({ resolution: 5 })
delay.enable()

process.on('message', (m: { kind?: string }) => {
  if (m?.kind === 'loop:reset') {
    delay.reset()
    process.send?.({ kind: 'loop:reset' })
  } else if (m?.kind === 'loop:report') {
    process.send?.({ kind: 'loop', maxMs: delay.max / 1e6 })
  }
})

/** Small helpers the built-in types share. */
import type { Observation, ResourceContext, ResourceState } from '../types'

/** Wait `seconds` (0 returns at once), rejecting as soon as `signal` fires. */
export function sleep(seconds: number, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted()
  if (!(seconds > 0)) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason instanceof Error ? signal.reason : new Error(String(signal.reason ?? 'aborted')))
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, seconds * 1000)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}

/** Wait with progress reports (about ten per wait, never more than one a second). */
export async function waitWithProgress(seconds: number, signal: AbortSignal, progress: (message: string, fraction?: number) => void, what: string): Promise<void> {
  if (!(seconds > 0)) return
  const steps = Math.max(1, Math.min(10, Math.floor(seconds)))
  for (let i = 1; i <= steps; i++) {
    await sleep(seconds / steps, signal)
    if (i < steps) progress(`${what}: ${Math.round((i / steps) * seconds * 10) / 10}s of ${seconds}s`, i / steps)
  }
}

/**
 * `observe` of a state-only type: nothing of it is outside Kiln, so what the
 * engine stored is what there is. It is never gone and never drifted.
 */
export async function observeStored(ctx: ResourceContext, state: ResourceState): Promise<Observation> {
  ctx.signal.throwIfAborted()
  return { state: 'exists', properties: state.properties, attributes: state.attributes }
}

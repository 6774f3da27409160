/** Small helpers the built-in types share. */

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

/** `observe` of a state-only type: the SDK's. */
export { observeStored } from '../../sdk'

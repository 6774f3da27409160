/**
 * Waiting without a worker (lib/db/functions/25_park.sql has the rules).
 *
 * An action that must wait for something outside its control (a wait
 * condition's signals; later a hook, a nested stack, a provider's long
 * operation) calls ResourceContext.park: the node parks, its worker slot is
 * free for other work, and the action runs again from its start when what it
 * waits for happens, its time is up, or it is told to stop.
 */
import { ParkAction, type ParkWait, type ResourceSignal, type SignalWaitOptions, type SignalWaitOutcome } from '../resources/types'
import type { ResumedNode, SignalStore } from './ports'

/** The outcome `signals` already decide: a FAILURE, or `count` SUCCESSes; null while still waiting. */
export function judgeSignals(signals: ResourceSignal[], count: number): SignalWaitOutcome | null {
  if (signals.some((s) => s.status === 'FAILURE')) return { kind: 'failed', signals }
  if (signals.filter((s) => s.status === 'SUCCESS').length >= count) return { kind: 'done', signals }
  return null
}

export function park(wait: ParkWait): never {
  throw new ParkAction(wait)
}

/**
 * ResourceSignals.waitFor for an action of `stackId`: look at the handle's
 * signals; if they do not decide yet, park until a signal to the handle or the
 * wait's end (counted from the action's first run: `resumed.until`).
 * `opts.reason` is what the parked node shows; `opts.beforePark` runs after
 * the look and before the park (a wake in between is not slept through: the
 * park compares the wake count read with the look).
 */
export function signalWaiter(store: SignalStore, stackId: string, signal: AbortSignal, resumed: ResumedNode | null) {
  return async (handle: string, count: number, timeoutMs: number, opts: SignalWaitOptions = {}): Promise<SignalWaitOutcome> => {
    signal.throwIfAborted()
    const { wakeKey, seen, signals } = await store.read(stackId, handle)
    const out = judgeSignals(signals, count)
    if (out) return out
    if (resumed?.due || timeoutMs <= 0) return { kind: 'timeout', signals }
    await opts.beforePark?.()
    return park({ reason: opts.reason ?? `waiting for ${count} signal(s) on ${handle}`, until: resumed?.until ?? new Date(Date.now() + timeoutMs), wakeKey, seen })
  }
}

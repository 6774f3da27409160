/**
 * Waiting for resource signals in a worker (ResourceContext.signals.waitFor):
 * one LISTEN kiln_signal connection per worker, opened while anything waits
 * and closed when nothing does. A waiter reads the handle's signals when it
 * starts, at each notification for its handle, and after the connection comes
 * back from an outage (notifications sent meanwhile were lost); a timer ends
 * it at its timeout. No connection is held between reads, and no polling.
 */
import type pg from 'pg'
import type { SignalStore } from '../engine/ports'
import type { Logger } from '../logger'
import type { ResourceSignal, SignalWaitOutcome } from '../resources/types'
import { PgListener } from './listener'
import { clearSignals, listSignals, SIGNAL_CHANNEL } from './queries/signals'

interface Waiter {
  key: string
  check(): void
}

export function signalStore(pool: pg.Pool, opts: { url: string; log: Logger }): SignalStore {
  const waiters = new Set<Waiter>()
  let listener: Promise<PgListener> | null = null

  const listen = () =>
    (listener ??= PgListener.open({
      url: opts.url,
      channels: [SIGNAL_CHANNEL],
      application: 'kiln-worker-signals',
      label: 'signal waits',
      log: opts.log,
      onNotification: (msg) => {
        for (const w of waiters) if (w.key === msg.payload) w.check()
      },
      // Signals sent while the connection was down woke nobody: every waiter reads again.
      onReconnect: () => {
        for (const w of waiters) w.check()
      },
    }).catch((err: unknown) => {
      listener = null
      throw err
    }))

  async function release() {
    if (waiters.size || !listener) return
    const l = listener
    listener = null
    await (await l.catch(() => null))?.close()
  }

  return {
    async waitFor(stackId, handle, count, timeoutMs, signal) {
      signal.throwIfAborted()
      await listen()
      // An abort while the connection was being opened fired no event this wait could hear.
      if (signal.aborted) {
        void release()
        signal.throwIfAborted()
      }
      return new Promise<SignalWaitOutcome>((resolve, reject) => {
        let reading = false
        let again = false
        let settled = false
        const finish = (fn: () => void) => {
          if (settled) return
          settled = true
          clearTimeout(timer)
          signal.removeEventListener('abort', onAbort)
          waiters.delete(waiter)
          void release()
          fn()
        }
        const judge = (signals: ResourceSignal[]): SignalWaitOutcome | null => {
          if (signals.some((s) => s.status === 'FAILURE')) return { kind: 'failed', signals }
          if (signals.filter((s) => s.status === 'SUCCESS').length >= count) return { kind: 'done', signals }
          return null
        }
        // One read at a time; a notification during a read asks for one more after it.
        const check = () => {
          if (settled) return
          if (reading) {
            again = true
            return
          }
          reading = true
          listSignals(pool, stackId, handle).then(
            (signals) => {
              reading = false
              const out = judge(signals)
              if (out) finish(() => resolve(out))
              else if (again) {
                again = false
                check()
              }
            },
            (err: unknown) => {
              reading = false
              finish(() => reject(err))
            },
          )
        }
        const waiter: Waiter = { key: `${stackId} ${handle}`, check }
        const onAbort = () => finish(() => reject(signal.reason ?? new Error('aborted')))
        // Timer reason: the wait condition's own timeout.
        const timer = setTimeout(() => {
          listSignals(pool, stackId, handle).then(
            (signals) => finish(() => resolve(judge(signals) ?? { kind: 'timeout', signals })),
            (err: unknown) => finish(() => reject(err)),
          )
        }, timeoutMs)
        signal.addEventListener('abort', onAbort, { once: true })
        waiters.add(waiter)
        check()
      })
    },
    list: (stackId, handle) => listSignals(pool, stackId, handle),
    clear: (stackId, handle) => clearSignals(pool, stackId, handle),
  }
}

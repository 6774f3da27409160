/**
 * The event bridge (lib/realtime/bridge.ts) with every room watched and every
 * message recorded, and its log lines kept:
 *
 *   const b = recordingBridge({ url: db.url, pool: c.db.pool })
 *   await b.until((m) => m.event === 'stack:resync', 'a resync')
 *   await b.untilLog(/LISTEN connection lost/, 'the loss')
 */
import type pg from 'pg'
import { createLogger } from '../../lib/logger'
import { startBridge, type Bridge } from '../../lib/realtime/bridge'

export interface Sent {
  room: string
  event: string
  payload: { stackId: string; lastSeq?: number; events?: { seq: number; reason: string }[] }
}

export interface RecordingBridge {
  bridge: Bridge
  sent: Sent[]
  logs: string[]
  /** Resolves with the first message that matches (rejects after 30 s, so a test fails rather than hangs). */
  until(match: (m: Sent) => boolean, what: string): Promise<Sent>
  /** Resolves once a log line matches. */
  untilLog(match: RegExp, what: string): Promise<string>
}

/** `seq:reason` of every event sent to a stack's room, in the order sent. */
export const seqsOf = (sent: Sent[], stackId: string) =>
  sent.filter((m) => m.event === 'stack:events' && m.payload.stackId === stackId).flatMap((m) => m.payload.events!.map((e) => `${e.seq}:${e.reason}`))

export function recordingBridge(opts: { url: string; pool: pg.Pool }): RecordingBridge {
  const sent: Sent[] = []
  const logs: string[] = []
  const waiters = new Set<() => void>()
  const wakeAll = () => {
    for (const w of [...waiters]) w()
  }
  const bridge = startBridge({
    url: opts.url,
    pool: opts.pool,
    log: createLogger({
      level: 'debug',
      sink: (line) => {
        logs.push(line)
        wakeAll()
      },
    }),
    rooms: {
      watched: () => true,
      emit: (room, event, payload) => {
        sent.push({ room, event, payload: payload as Sent['payload'] })
        wakeAll()
      },
    },
  })
  const waitFor = <T>(find: () => T | undefined, what: string, state: () => string) =>
    new Promise<T>((resolve, reject) => {
      const check = () => {
        const hit = find()
        if (hit === undefined) return
        waiters.delete(check)
        clearTimeout(timer)
        resolve(hit)
      }
      // Timer reason: a test must fail rather than hang when the message never comes.
      const timer = setTimeout(() => {
        waiters.delete(check)
        reject(new Error(`timed out waiting for ${what}; ${state()}`))
      }, 30_000)
      waiters.add(check)
      check()
    })
  return {
    bridge,
    sent,
    logs,
    until: (match, what) => waitFor(() => sent.find(match), what, () => `sent: ${JSON.stringify(sent)}`),
    untilLog: (match, what) => waitFor(() => logs.find((l) => match.test(l)), what, () => `log:\n${logs.join('\n')}`),
  }
}

/**
 * Following a stack until its operation ends: woken by the live Socket.IO
 * stream (each event batch triggers one REST refetch of the stack, so the
 * numbers always come from the database), with a one-second timer that only
 * redraws the elapsed time. Without a live stream (proxy, old server) it
 * refetches every two seconds instead, and says so.
 */
import { io, type Socket } from 'socket.io-client'
import type { StackEventMessage } from '../realtime/contracts'
import type { KilnClient } from './client'
import { progressLine, type Progress } from './render'
import { jsonSafe, terminalSafe } from './terminal-safe'

export interface WatchOptions {
  /** Show events after this sequence number (default: from now on). */
  after?: number
  json: boolean
  out: NodeJS.WriteStream
  err: NodeJS.WriteStream
}

export async function watchStack(client: KilnClient, stackId: string, opts: WatchOptions): Promise<{ action: string; status: string; reason: string }> {
  const started = Date.now()
  const tty = opts.err.isTTY === true && !opts.json
  let last: { action: string; status: string; statusReason: string; progress: Progress | null; name: string } | null = null
  let lastSeq = 0
  let drawn = false

  const draw = () => {
    if (!tty || !last) return
    const p = last.progress ?? { total: 0, done: 0, running: 0, blocked: 0, failed: 0 }
    // Kiln's own escapes (return, clear the line) around text from the server, which may carry none.
    opts.err.write(`\r\x1b[2K${progressLine(terminalSafe(`${last.name} ${last.action}`), p, Date.now() - started)}`)
    drawn = true
  }
  const print = (line: string) => {
    if (opts.json) return
    if (drawn) opts.err.write('\r\x1b[2K')
    drawn = false
    opts.out.write(terminalSafe(line) + '\n')
    draw()
  }

  const printEvents = async () => {
    const res = await client.get<{ events: { seq: number; kind: string; resourceName: string | null; action: string | null; status: string | null; reason: string; at: string; data: Record<string, unknown> | null }[] }>(
      `/api/stacks/${stackId}/events?after=${lastSeq}&limit=1000`,
    )
    for (const e of res.events) {
      lastSeq = e.seq
      if (opts.json) {
        opts.out.write(jsonSafe(JSON.stringify(e)) + '\n')
        continue
      }
      const time = e.at.slice(11, 19)
      const name = terminalSafe(e.resourceName ?? '') // before padding, so the columns stay aligned
      if (e.kind === 'resource') print(`${time}  ${name.padEnd(20)} ${`${e.action}_${e.status}`.padEnd(20)} ${e.reason}`)
      else if (e.kind === 'stack') print(`${time}  ${'[stack]'.padEnd(20)} ${`${e.action}_${e.status}`.padEnd(20)} ${e.reason}`)
      else if (e.kind === 'node' && (e.data?.state === 'BLOCKED' || e.data?.retriggered)) print(`${time}  ${name.padEnd(20)} ${e.data?.state === 'BLOCKED' ? 'BLOCKED'.padEnd(20) : 'RETRIGGERED'.padEnd(20)} ${e.reason}`)
    }
  }

  const refresh = async () => {
    const { stack } = await client.get(`/api/stacks/${stackId}`)
    last = stack
    await printEvents()
    draw()
    return stack as { action: string; status: string; statusReason: string }
  }

  lastSeq = opts.after ?? (await eventHead(client, stackId))

  return new Promise((resolve, reject) => {
    let socket: Socket | null = null
    let busy = false
    let again = false
    const timers: NodeJS.Timeout[] = []
    const finish = (s: { action: string; status: string; statusReason: string }) => {
      for (const t of timers) clearInterval(t)
      socket?.close()
      if (drawn) opts.err.write('\n')
      resolve({ action: s.action, status: s.status, reason: s.statusReason })
    }
    const check = async () => {
      if (busy) {
        again = true
        return
      }
      busy = true
      try {
        do {
          again = false
          const s = await refresh()
          if (s.status !== 'IN_PROGRESS') return finish(s)
        } while (again)
      } catch (err) {
        for (const t of timers) clearInterval(t)
        socket?.close()
        reject(err)
      } finally {
        busy = false
      }
    }
    // Redraw the elapsed time once a second (display only; no request).
    if (tty) timers.push(setInterval(draw, 1000))
    socket = io(client.url, { auth: { token: client.token }, transports: ['websocket'], reconnectionDelayMax: 5000 })
    socket.on('connect', () => {
      socket!.emit('stack:subscribe', stackId, (ack: { ok: boolean; error?: string }) => {
        if (!ack.ok) print(`live stream refused (${ack.error}); refreshing every 2 s`)
        void check() // catch up on anything that happened before the subscription
      })
    })
    socket.on('stack:events', (_msg: { events: StackEventMessage[] }) => void check())
    // Steps lost in a database crash: their numbers are used again, so read on from there.
    socket.on('stack:resync', (msg: { lastSeq: number }) => {
      lastSeq = Math.min(lastSeq, msg.lastSeq)
      void check()
    })
    socket.on('connect_error', () => {
      if (timers.length < 2) {
        print('no live stream; refreshing every 2 s')
        timers.push(setInterval(() => void check(), 2000))
      }
    })
    void check()
  })
}

/** The stack's latest event sequence number (a watch started now shows what happens next). */
export async function eventHead(client: KilnClient, stackId: string): Promise<number> {
  const res = await client.get<{ lastSeq: number }>(`/api/stacks/${stackId}/events?limit=1&after=${Number.MAX_SAFE_INTEGER - 1}`)
  return res.lastSeq
}

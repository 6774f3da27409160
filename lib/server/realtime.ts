/**
 * Socket.IO on the web server: authenticated connections (an API token in
 * `auth.token`, or the browser's session cookie; failed token attempts are
 * limited per address), closed when their credential is revoked or expires,
 * rooms per stack joined only by members of the stack's project, and the
 * bridge that turns PostgreSQL NOTIFY kiln_events into room messages. Used by
 * server.ts and by tests.
 */
import type { Server as HttpServer } from 'node:http'
import type { Db } from '../db/client'
import { subscribeCheck } from '../db/queries/accounts'
import { Server } from 'socket.io'
import type { Logger } from '../logger'
import { startBridge } from '../realtime/bridge'
import type { ClientToServerEvents, ServerToClientEvents } from '../realtime/contracts'
import type { FailedAttemptLimit } from '../auth/failed-attempts'
import { API_SECURITY_HEADERS } from './security-headers'
import { authenticateSocket, type SocketPrincipal } from './socket-auth'
import { socketLifetime } from './socket-lifetime'

export function attachRealtime(httpServer: HttpServer, opts: { url: string; db: Db; log: Logger; failedAttempts: FailedAttemptLimit }): { close(): Promise<void>; io: Server } {
  const io = new Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, { principal: SocketPrincipal }>(httpServer, {
    serveClient: false,
    maxHttpBufferSize: 64 * 1024,
  })
  // Socket.IO answers its own HTTP requests (handshake, polling): the same headers as every other response.
  const secure = (headers: Record<string, string>) => void Object.assign(headers, API_SECURITY_HEADERS)
  io.engine.on('initial_headers', secure)
  io.engine.on('headers', secure)
  const lifetime = socketLifetime({ url: opts.url, pool: opts.db.pool, log: opts.log, sockets: () => io.sockets.sockets.values() })
  const bridge = startBridge({
    url: opts.url,
    pool: opts.db.pool,
    log: opts.log,
    rooms: {
      watched: (room) => (io.sockets.adapter.rooms.get(room)?.size ?? 0) > 0,
      emit: (room, event, payload) => io.to(room).emit(event as 'stack:events', payload as never),
    },
  })

  io.use(async (socket, next) => {
    try {
      // A token in the handshake is a credential attempt like any other (lib/auth/failed-attempts.ts).
      const token = socket.handshake.auth?.token
      const triesToken = typeof token === 'string' && token !== ''
      const address = socket.handshake.address
      if (triesToken) {
        const wait = await opts.failedAttempts.retryAfter(address)
        if (wait) return next(Object.assign(new Error('too many failed authentication attempts'), { data: { retryAfter: wait } }))
      }
      const principal = await authenticateSocket(opts.db, socket.handshake)
      if (!principal) {
        if (triesToken) await opts.failedAttempts.failed(address)
        return next(new Error('unauthorized'))
      }
      socket.data.principal = principal
      next()
    } catch {
      next(new Error('unauthorized'))
    }
  })

  io.on('connection', (socket) => {
    const p = socket.data.principal
    lifetime.track(socket)
    void socket.join(`project:${p.projectId}`)
    socket.on('stack:subscribe', async (stackId, ack) => {
      const reply = typeof ack === 'function' ? ack : () => {}
      try {
        if (typeof stackId !== 'string' || !/^[0-9a-f-]{36}$/i.test(stackId)) return reply({ ok: false, error: 'not found' })
        // The credential is checked again on every subscribe: a token revoked (or expired) since the
        // handshake opens no more rooms, and its socket is closed.
        const check = await subscribeCheck(opts.db, p.tokenId, p.projectId, stackId)
        if (!check.live) {
          reply({ ok: false, error: 'unauthorized' })
          setTimeout(() => socket.disconnect(true), 0)
          return
        }
        // Another project's stack looks exactly like a missing one.
        if (!check.found) return reply({ ok: false, error: 'not found' })
        await socket.join(`stack:${stackId}`)
        reply({ ok: true, lastSeq: await bridge.track(stackId) })
      } catch {
        reply({ ok: false, error: 'unavailable' })
      }
    })
    socket.on('stack:unsubscribe', (stackId) => {
      if (typeof stackId === 'string') void socket.leave(`stack:${stackId}`)
    })
  })

  return {
    io: io as unknown as Server,
    async close() {
      io.close()
      await Promise.all([bridge.close(), lifetime.close()])
    },
  }
}

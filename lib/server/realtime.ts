/**
 * Socket.IO on the web server: authenticated connections (an API token in
 * `auth.token`, or the browser's session cookie; failed token attempts are
 * limited per address), closed when their credential is revoked or expires,
 * messages limited per socket (./socket-limits.ts), rooms per stack joined
 * only by members of the stack's project (./socket-rooms.ts), and the bridge
 * that turns PostgreSQL NOTIFY kiln_events into room messages. Used by
 * server.ts and by tests.
 */
import type { Server as HttpServer } from 'node:http'
import type { Db } from '../db/client'
import { Server } from 'socket.io'
import type { Logger } from '../logger'
import { startBridge } from '../realtime/bridge'
import type { ClientToServerEvents, ServerToClientEvents } from '../realtime/contracts'
import type { FailedAttemptLimit } from '../auth/failed-attempts'
import { API_SECURITY_HEADERS } from './security-headers'
import { authenticateSocket, type SocketPrincipal } from './socket-auth'
import { socketLifetime } from './socket-lifetime'
import { socketMessageLimit, type MessageLimit } from './socket-limits'
import { stackRooms } from './socket-rooms'

export interface RealtimeOptions {
  url: string
  db: Db
  log: Logger
  failedAttempts: FailedAttemptLimit
  /** Messages one socket may send per window (KILN_SOCKET_MESSAGES_PER_MINUTE a minute; ./socket-limits.ts). */
  messageLimit: MessageLimit
}

export function attachRealtime(httpServer: HttpServer, opts: RealtimeOptions): { close(): Promise<void>; io: Server } {
  const io = new Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, { principal: SocketPrincipal }>(httpServer, {
    serveClient: false,
    maxHttpBufferSize: 64 * 1024,
  })
  // Socket.IO answers its own HTTP requests (handshake, polling): the same headers as every other response.
  const secure = (headers: Record<string, string>) => void Object.assign(headers, API_SECURITY_HEADERS)
  io.engine.on('initial_headers', secure)
  io.engine.on('headers', secure)
  const messages = socketMessageLimit({ ...opts.messageLimit, log: opts.log })
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
    messages.attach(socket)
    void socket.join(`project:${p.projectId}`)
    const rooms = stackRooms(socket, { db: opts.db, bridge })
    socket.once('disconnect', () => rooms.clear())
    socket.on('stack:subscribe', (stackId, ack) => {
      const reply = typeof ack === 'function' ? ack : () => {}
      void rooms.subscribe(stackId).then(reply)
    })
    socket.on('stack:unsubscribe', (stackId) => rooms.unsubscribe(stackId))
  })

  return {
    io: io as unknown as Server,
    async close() {
      io.close()
      await Promise.all([bridge.close(), lifetime.close()])
    },
  }
}

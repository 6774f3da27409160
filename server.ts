/**
 * The web process: Next.js (UI + API) and Socket.IO on one port.
 *
 * Started by `npm start` (scripts/start.ts), which sets DATABASE_URL and
 * NODE_ENV=production. Socket.IO connections must authenticate (an API token
 * in `auth.token`, or the browser's session cookie) and may only join rooms of
 * their own project's stacks.
 */
import { createServer } from 'node:http'
import next from 'next'
import { Server } from 'socket.io'
import { appContext } from './lib/server/context'
import { toNodeHandler } from './lib/api/node-adapter'
import { startBridge } from './lib/realtime/bridge'
import type { ClientToServerEvents, ServerToClientEvents } from './lib/realtime/contracts'
import { authenticateSocket, type SocketPrincipal } from './lib/server/socket-auth'

async function main() {
  const ctx = appContext()
  const { env: e, log } = ctx
  const dev = e.NODE_ENV !== 'production'
  const app = next({ dev, hostname: e.HOST, port: e.PORT })
  const handle = app.getRequestHandler()
  await app.prepare()

  // The API is served by plain Request -> Response handlers (lib/api), the same in tests;
  // Next renders the UI.
  const api = toNodeHandler(ctx.api)
  const httpServer = createServer((req, res) => {
    const path = req.url ?? '/'
    if (path.startsWith('/api/') || path.startsWith('/v1/') || path === '/v1') void api(req, res)
    else void handle(req, res)
  })
  const io = new Server<ClientToServerEvents, ServerToClientEvents, Record<string, never>, { principal: SocketPrincipal }>(httpServer, {
    serveClient: false,
    maxHttpBufferSize: 64 * 1024,
  })

  const bridge = startBridge({
    url: ctx.db.url,
    pool: ctx.db.pool,
    log,
    rooms: {
      watched: (room) => (io.sockets.adapter.rooms.get(room)?.size ?? 0) > 0,
      emit: (room, event, payload) => io.to(room).emit(event as 'stack:events', payload as never),
    },
  })

  io.use(async (socket, nextFn) => {
    try {
      const principal = await authenticateSocket(ctx.db.pool, socket.handshake)
      if (!principal) return nextFn(new Error('unauthorized'))
      socket.data.principal = principal
      nextFn()
    } catch {
      nextFn(new Error('unauthorized'))
    }
  })

  io.on('connection', (socket) => {
    const p = socket.data.principal
    void socket.join(`project:${p.projectId}`)
    socket.on('stack:subscribe', async (stackId, ack) => {
      const reply = typeof ack === 'function' ? ack : () => {}
      try {
        if (typeof stackId !== 'string' || !/^[0-9a-f-]{36}$/i.test(stackId)) return reply({ ok: false, error: 'not found' })
        const { rows } = await ctx.db.pool.query('SELECT 1 FROM stack WHERE id = $1 AND project_id = $2', [stackId, p.projectId])
        // Another project's stack looks exactly like a missing one.
        if (!rows.length) return reply({ ok: false, error: 'not found' })
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

  await new Promise<void>((resolve) => httpServer.listen(e.PORT, e.HOST, resolve))
  const url = `http://${e.HOST === '0.0.0.0' ? '127.0.0.1' : e.HOST}:${e.PORT}`
  log.info(`web server listening on ${url} (${dev ? 'development' : 'production'})`)
  process.send?.({ kind: 'ready', url })

  let stopping = false
  const stop = async (why: string) => {
    if (stopping) process.exit(1)
    stopping = true
    log.info(`${why}: stopping the web server`)
    io.close()
    await bridge.close()
    await new Promise((r) => httpServer.close(() => r(null)))
    await ctx.db.close()
    process.exit(0)
  }
  process.on('SIGTERM', () => void stop('SIGTERM'))
  process.on('SIGINT', () => void stop('SIGINT'))
  process.on('disconnect', () => void stop('launcher went away'))
}

main().catch((err) => {
  console.error(`web server failed to start: ${err instanceof Error ? err.stack : err}`)
  process.exit(1)
})

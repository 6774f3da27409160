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
import { appContext } from './lib/server/context'
import { toNodeHandler } from './lib/api/node-adapter'
import { attachRealtime } from './lib/server/realtime'
import { configureEvaluation } from './lib/evaluation/pool'
import { evaluationSettingsFrom } from './lib/evaluation/settings'

async function main() {
  const ctx = appContext()
  const { env: e, log } = ctx
  // Submitted templates are checked on evaluation threads: start them now, not on the first submission.
  configureEvaluation(evaluationSettingsFrom(e)).warm()
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
  const realtime = attachRealtime(httpServer, { url: ctx.db.url, pool: ctx.db.pool, log })

  await new Promise<void>((resolve) => httpServer.listen(e.PORT, e.HOST, resolve))
  // PORT=0 (tests) picks a free port: report the one actually bound.
  const bound = (httpServer.address() as import('node:net').AddressInfo | null)?.port ?? e.PORT
  const url = `http://${e.HOST === '0.0.0.0' ? '127.0.0.1' : e.HOST}:${bound}`
  log.info(`web server listening on ${url} (${dev ? 'development' : 'production'})`)
  process.send?.({ kind: 'ready', url })

  let stopping = false
  const stop = async (why: string) => {
    if (stopping) process.exit(1)
    stopping = true
    log.info(`${why}: stopping the web server`)
    await realtime.close()
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

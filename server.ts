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
import { env } from './lib/env'
import { loadTypePackages } from './lib/resources/packages'
import { toNodeHandler } from './lib/api/node-adapter'
import { attachRealtime } from './lib/server/realtime'
import { newNonce, pagePolicy, pageSecurityHeaders } from './lib/server/security-headers'
import { publicUrlFrom } from './lib/config'
import { NIL_UUID } from './lib/ids'
import { configureEvaluation } from './lib/evaluation/pool'
import { evaluationSettingsFrom } from './lib/evaluation/settings'

async function main() {
  const ctx = appContext({ packages: await loadTypePackages(env().KILN_TYPE_PACKAGES) })
  const { env: e, log } = ctx
  await ctx.providerTypes.reload()
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
    if (path.startsWith('/api/') || path.startsWith('/v1/') || path === '/v1' || path === '/metrics' || path.startsWith('/metrics?')) return void api(req, res)
    // A page's scripts run by this request's nonce: Next reads it from the request's policy header
    // and puts it on every script it renders (lib/server/security-headers.ts). A client's own header is replaced.
    const policy = pagePolicy(newNonce(), dev)
    req.headers['content-security-policy'] = policy
    for (const [k, v] of Object.entries(pageSecurityHeaders(policy))) res.setHeader(k, v)
    void handle(req, res)
  })
  const realtime = attachRealtime(httpServer, { url: ctx.db.url, db: ctx.db, log, failedAttempts: ctx.failedAttempts, messageLimit: { messages: e.KILN_SOCKET_MESSAGES_PER_MINUTE, windowSeconds: 60 } })

  await new Promise<void>((resolve) => httpServer.listen(e.PORT, e.HOST, resolve))
  // PORT=0 (tests) picks a free port: report the one actually bound.
  const bound = (httpServer.address() as import('node:net').AddressInfo | null)?.port ?? e.PORT
  const url = publicUrlFrom({ ...e, KILN_PUBLIC_URL: undefined }, bound)
  const publicUrl = ctx.listening(bound)
  log.info(`web server listening on ${url}${publicUrl !== url ? `, reached at ${publicUrl}` : ''} (${dev ? 'development' : 'production'})`)
  process.send?.({ kind: 'ready', url })
  // In development Next compiles a page when it is first asked for: warming would compile every page at start.
  if (!dev) void warmPages(url)

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

/**
 * Next loads a page's server modules when the page is first asked for: the first visitor after a
 * start would wait for that (half a second on a busy machine). Each page is asked for once now,
 * without a session, which loads its modules and answers with the redirect to the login form.
 */
async function warmPages(base: string) {
  for (const page of ['/login', '/', '/stacks/new', `/stacks/${NIL_UUID}`, `/stacks/${NIL_UUID}/traversals/${NIL_UUID}`]) {
    await fetch(new URL(page, base), { redirect: 'manual' }).then((r) => r.arrayBuffer(), () => null)
  }
}
main().catch((err) => {
  console.error(`web server failed to start: ${err instanceof Error ? err.stack : err}`)
  process.exit(1)
})

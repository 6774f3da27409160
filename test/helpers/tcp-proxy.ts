/**
 * A TCP proxy in front of PostgreSQL, for the network failures a restart does
 * not produce:
 *
 *   const proxy = await tcpProxy(db.url)
 *   ... connect to proxy.url ...
 *   proxy.freeze('kiln-worker-listen')  // that session's bytes stop, its socket stays open (half-open)
 *   proxy.refuse()                       // every session cut, new ones refused, until proxy.accept()
 *
 * Sessions are told apart by the application_name in their startup message.
 */
import net from 'node:net'

export interface TcpProxy {
  /** The target's URL with the proxy's host and port. */
  url: string
  /** Stop forwarding the sessions of this application, both ways, without closing anything. Returns how many. */
  freeze(application: string): number
  /** Cut every session and refuse new connections (as an unreachable server would). */
  refuse(): void
  /** Accept connections again. */
  accept(): void
  close(): Promise<void>
}

interface Session {
  client: net.Socket
  server: net.Socket
  /** The application_name of its startup message, once seen. */
  application: string | null
}

/** The application_name of a startup message: key/value strings, each ended by a NUL. */
function applicationOf(startup: Buffer): string | null {
  const parts = startup.subarray(8).toString('utf8').split('\0')
  const i = parts.indexOf('application_name')
  return i >= 0 && i + 1 < parts.length ? parts[i + 1]! : null
}

export async function tcpProxy(targetUrl: string): Promise<TcpProxy> {
  const target = new URL(targetUrl)
  const sessions = new Set<Session>()
  let refusing = false

  const server = net.createServer((client) => {
    if (refusing) return void client.destroy()
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    const s: Session = { client, server: upstream, application: null }
    sessions.add(s)
    const end = () => {
      sessions.delete(s)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', end).on('close', end)
    upstream.on('error', end).on('close', end)
    // The first bytes are the startup message (no SSL is asked for): read the name, then pipe.
    client.once('data', (first: Buffer) => {
      s.application = applicationOf(first)
      upstream.write(first)
      client.pipe(upstream)
      upstream.pipe(client)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as net.AddressInfo
  const url = new URL(targetUrl)
  url.hostname = '127.0.0.1'
  url.port = String(port)

  return {
    url: url.toString(),
    freeze(application) {
      let n = 0
      for (const s of sessions) {
        if (s.application !== application) continue
        s.client.unpipe(s.server)
        s.server.unpipe(s.client)
        s.client.pause()
        s.server.pause()
        n++
      }
      return n
    },
    refuse() {
      refusing = true
      for (const s of sessions) {
        s.client.destroy()
        s.server.destroy()
      }
      sessions.clear()
    },
    accept() {
      refusing = false
    },
    async close() {
      refusing = true
      for (const s of sessions) {
        s.client.destroy()
        s.server.destroy()
      }
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

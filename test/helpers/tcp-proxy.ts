/**
 * A TCP proxy in front of PostgreSQL, for the network failures a restart does
 * not produce:
 *
 *   const proxy = await tcpProxy(db.url)
 *   ... connect to proxy.url ...
 *   proxy.freeze('kiln-worker-listen')  // that session's bytes stop, its socket stays open (half-open)
 *   proxy.refuse()                       // every session cut, new ones refused, until proxy.accept()
 *   proxy.opened('kiln-pg-observe')      // how many sessions of that application have been opened
 *
 * Sessions are told apart by the application_name in their startup message.
 */
import net from 'node:net'

export interface TcpProxy {
  /** The target's URL with the proxy's host and port. */
  url: string
  /** Drop the bytes of this application's sessions, both ways, without closing anything. Returns how many. */
  freeze(application: string): number
  /** Cut every session and refuse new connections (as an unreachable server would). */
  refuse(): void
  /** Accept connections again. */
  accept(): void
  /** Sessions opened so far whose startup message named this application_name. */
  opened(application: string): number
  close(): Promise<void>
}

interface Session {
  client: net.Socket
  server: net.Socket
  /** The application_name of its startup message, once seen. */
  application: string | null
  frozen: boolean
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
  const opened = new Map<string, number>()

  // Half-open allowed: a frozen session must not answer its client's goodbye (see freeze).
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    if (refusing) return void client.destroy()
    const upstream = net.connect(Number(target.port || 5432), target.hostname)
    const s: Session = { client, server: upstream, application: null, frozen: false }
    sessions.add(s)
    const end = () => {
      sessions.delete(s)
      client.destroy()
      upstream.destroy()
    }
    client.on('error', end).on('close', end)
    upstream.on('error', () => upstream.destroy()).on('close', () => s.frozen || end())
    // The first bytes are the startup message (no SSL is asked for): read the name, then pipe.
    client.once('data', (first: Buffer) => {
      s.application = applicationOf(first)
      if (s.application !== null) opened.set(s.application, (opened.get(s.application) ?? 0) + 1)
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
        if (s.application !== application || s.frozen) continue
        s.frozen = true
        s.client.unpipe(s.server)
        s.server.unpipe(s.client)
        // Read and dropped, like packets lost on the way (unpipe paused them: a 'data' listener
        // alone does not resume a stream paused on purpose).
        s.client.on('data', () => {}).resume()
        s.server.on('data', () => {}).resume()
        // The client's goodbye reaches the server (its session ends) but is never answered, as
        // across a partition: a client that waits for the answer waits forever.
        s.client.on('end', () => s.server.destroy())
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
    opened(application) {
      return opened.get(application) ?? 0
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

/**
 * A LISTEN connection that comes back. PostgreSQL forgets a session's LISTENs
 * when the session ends, and a NOTIFY sent while nobody listens is gone; so
 * whoever depends on notifications (the workers' kiln_jobs, the web server's
 * kiln_events) needs a connection that reconnects after an outage of any
 * length, issues LISTEN again, and then says so (`onReconnect`), for the
 * owner to catch up on what it missed.
 *
 * Reconnects are attempted with jittered exponential back-off (from
 * `minDelayMs`, capped at `maxDelayMs`, reset once a connection LISTENs); an
 * outage is logged twice, when it begins and when it ends, never per attempt.
 * `close()` stops everything: no timer or connection outlives it.
 *
 * A connection can also die silently (a half-open TCP connection: no error,
 * no end, no notification). `check()` asks it for an answer within a time
 * limit, and treats silence as a loss.
 *
 * Hand-written over `pg` rather than taken from pg-listen, which by default
 * stops retrying after 3 s and has had no release since 2020.
 */
import pg from 'pg'
import type { Logger } from '../logger'
import { delayFor } from './retry'

export interface ListenerOptions {
  url: string
  channels: readonly string[]
  /** application_name of the session (how tests and operators find it in pg_stat_activity). */
  application: string
  /** Names the connection in log lines ("event bridge", "worker"). */
  label: string
  log: Logger
  onNotification(msg: pg.Notification): void
  /** The connection was lost (notifications from now on are lost until `onReconnect`). */
  onLost?(): void
  /** After LISTEN was issued again following a loss: notifications sent meanwhile were lost. */
  onReconnect?(): void
  /** The first reconnect delay (default 100 ms) and the cap (default 2 s: an attempt costs a refused connection, a late one a stall). */
  minDelayMs?: number
  maxDelayMs?: number
}

/** A connection attempt that neither succeeds nor fails (an unreachable host) gives up after this long. */
const CONNECT_TIMEOUT_MS = 10_000
/** `close()` waits this long for a polite goodbye before it drops the socket. */
const CLOSE_GRACE_MS = 1000

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms).unref())

export class PgListener {
  private client: pg.Client | null = null
  private closed = false
  private retryTimer: NodeJS.Timeout | null = null
  /** Set while no connection LISTENs after one did (or the first one failed). */
  private outage: { since: number; attempts: number; lastError: string } | null = null

  private constructor(private readonly opts: ListenerOptions) {}

  /** Connect and LISTEN now; rejects if this first attempt fails (the caller decides how to retry). */
  static async open(opts: ListenerOptions): Promise<PgListener> {
    const l = new PgListener(opts)
    l.client = await l.connect()
    return l
  }

  /** Connect and LISTEN in the background, retrying with back-off until it works or `close()`. */
  static openInBackground(opts: ListenerOptions): PgListener {
    const l = new PgListener(opts)
    l.connect().then(
      (c) => {
        if (l.closed) return l.drop(c)
        l.client = c
      },
      (err: Error) => {
        opts.log.warn(`${opts.label}: cannot LISTEN yet (${err.message}); retrying with back-off`)
        l.outage = { since: Date.now(), attempts: 1, lastError: err.message }
        l.scheduleRetry()
      },
    )
    return l
  }

  /** Is a connection LISTENing (as far as this process knows)? */
  get listening(): boolean {
    return this.client !== null
  }

  /**
   * Ask the connection for an answer within `timeoutMs`. Silence or an error
   * counts as a loss (reconnect, then `onReconnect`). Resolves true if it answered.
   */
  async check(timeoutMs: number): Promise<boolean> {
    const c = this.client
    if (!c) return false
    let timer: NodeJS.Timeout | undefined
    const ping = c.query('SELECT 1')
    ping.catch(() => {}) // answered by the race below, or dropped with the connection
    try {
      await Promise.race([
        ping,
        new Promise((_, reject) => {
          // Timer reason: a half-open connection never answers, and never fails either.
          timer = setTimeout(() => reject(new Error(`no answer to a ping within ${timeoutMs} ms`)), timeoutMs)
        }),
      ])
      return true
    } catch (err) {
      this.lost(c, (err as Error).message)
      return false
    } finally {
      clearTimeout(timer)
    }
  }

  async close(): Promise<void> {
    this.closed = true
    if (this.retryTimer) clearTimeout(this.retryTimer)
    this.retryTimer = null
    const c = this.client
    this.client = null
    if (!c) return
    c.removeAllListeners('end')
    // A polite goodbye; a connection that went silent never answers it, so it is bounded.
    await Promise.race([c.end().catch(() => {}), sleep(CLOSE_GRACE_MS)])
    c.connection.stream.destroy()
  }

  private async connect(): Promise<pg.Client> {
    const c = new pg.Client({ connectionString: this.opts.url, application_name: this.opts.application, connectionTimeoutMillis: CONNECT_TIMEOUT_MS, keepAlive: true })
    c.on('notification', (msg) => {
      if (this.client === c) this.opts.onNotification(msg)
    })
    // Always listened to: an unheard 'error' event ends the process.
    c.on('error', (err) => this.lost(c, err.message))
    c.on('end', () => this.lost(c, 'the connection ended'))
    try {
      await c.connect()
      await c.query(this.opts.channels.map((ch) => `LISTEN ${ch}`).join('; '))
    } catch (err) {
      this.drop(c)
      throw err
    }
    return c
  }

  /** Forget a connection: no more events from it, and its socket closed without ceremony. */
  private drop(c: pg.Client) {
    c.removeAllListeners('notification')
    c.removeAllListeners('end')
    c.removeAllListeners('error')
    c.on('error', () => {})
    c.connection.stream.destroy()
  }

  private lost(c: pg.Client, cause: string) {
    if (this.client !== c) return // a connection already replaced, or one that never LISTENed
    this.client = null
    this.drop(c)
    if (this.closed) return
    this.outage = { since: Date.now(), attempts: 0, lastError: cause }
    this.opts.log.warn(`${this.opts.label}: LISTEN connection lost (${cause}); reconnecting with back-off`)
    this.opts.onLost?.()
    this.scheduleRetry()
  }

  private scheduleRetry() {
    const o = this.outage!
    const delay = delayFor(o.attempts, this.opts.minDelayMs ?? 100, this.opts.maxDelayMs ?? 2000)
    // Timer reason: the next reconnect attempt of this outage.
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null
      void this.retry()
    }, delay)
    this.retryTimer.unref()
  }

  private async retry() {
    if (this.closed) return
    const o = this.outage!
    o.attempts++
    let c: pg.Client
    try {
      c = await this.connect()
    } catch (err) {
      o.lastError = (err as Error).message
      this.opts.log.debug(`${this.opts.label}: reconnect attempt ${o.attempts} failed: ${o.lastError}`)
      if (!this.closed) this.scheduleRetry()
      return
    }
    if (this.closed) return this.drop(c)
    this.client = c
    this.outage = null
    this.opts.log.warn(`${this.opts.label}: LISTEN connection back after ${Date.now() - o.since} ms (${o.attempts} attempt(s); last error: ${o.lastError})`)
    this.opts.onReconnect?.()
  }
}

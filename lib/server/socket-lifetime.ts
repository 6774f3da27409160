/**
 * A socket lives as long as the credential that opened it. It is closed when
 *
 * - its token is revoked, or its session ended (logout), through any web
 *   process: the revoking transaction sends NOTIFY kiln_revoked, which every
 *   web process receives (lib/db/queries/revocations.ts);
 * - its token or session expires (a timer set for that moment);
 * - the revocation listener (re)connects: revocations made while it was not
 *   listening were not announced, so every socket's credential is re-checked.
 *
 * A handshake can read a credential just before its revocation commits and
 * register the socket just after the announcement was handled; revocations of
 * the last minute are therefore remembered and checked when a socket is added.
 */
import type { Logger } from '../logger'
import type { Db } from '../db/client'
import { liveCredentials, listenRevocations, type Revocation } from '../db/queries/revocations'
import type { SocketPrincipal } from './socket-auth'

export interface TrackedSocket {
  data: { principal: SocketPrincipal }
  disconnect(close: boolean): unknown
  once(event: 'disconnect', fn: () => void): unknown
}

/** Longer than any handshake takes between reading the credential and registering the socket. */
const REMEMBER_MS = 60_000
/** setTimeout's longest delay; a later expiry re-arms the timer. */
const MAX_TIMER_MS = 2 ** 31 - 1

const keyOf = (r: Revocation) => ('tokenId' in r ? `token:${r.tokenId}` : `session:${r.sessionHash}`)
const keysOf = (p: SocketPrincipal) => [`token:${p.tokenId}`, ...(p.sessionHash ? [`session:${p.sessionHash}`] : [])]

export function socketLifetime(opts: { url: string; pool: Db['pool']; log: Logger; sockets: () => Iterable<TrackedSocket> }) {
  const recent = new Map<string, number>()
  /** The sockets open under each credential: a revocation closes its own without looking at everyone's. */
  const byKey = new Map<string, Set<TrackedSocket>>()

  const forgetOld = () => {
    const horizon = Date.now() - REMEMBER_MS
    for (const [k, at] of recent) if (at < horizon) recent.delete(k)
  }
  const close = (s: TrackedSocket, why: string) => {
    opts.log.debug(`socket of token ${s.data.principal.tokenId} closed: ${why}`)
    s.disconnect(true)
  }

  async function recheck(): Promise<void> {
    const sockets = [...opts.sockets()]
    if (!sockets.length) return
    const principals = sockets.map((s) => s.data.principal)
    const live = await liveCredentials(
      opts.pool,
      [...new Set(principals.map((p) => p.tokenId))],
      [...new Set(principals.flatMap((p) => (p.sessionHash ? [p.sessionHash] : [])))],
    )
    for (const s of sockets) {
      const p = s.data.principal
      if (!(p.sessionHash ? live.sessions.has(p.sessionHash) : live.tokens.has(p.tokenId))) close(s, 'credential no longer valid')
    }
  }

  const listener = listenRevocations({
    url: opts.url,
    log: opts.log,
    onRevoked(r) {
      forgetOld()
      const key = keyOf(r)
      recent.set(key, Date.now())
      for (const s of [...(byKey.get(key) ?? [])]) close(s, 'revoked')
    },
    onListening() {
      recheck().catch((err) => opts.log.warn(`re-checking socket credentials: ${(err as Error).message}`))
    },
  })

  return {
    /** Start following a newly connected socket's credential (closes it at once if it was just revoked). */
    track(s: TrackedSocket): void {
      forgetOld()
      const p = s.data.principal
      if (keysOf(p).some((k) => recent.has(k))) return void close(s, 'revoked during the handshake')
      for (const k of keysOf(p)) {
        let set = byKey.get(k)
        if (!set) byKey.set(k, (set = new Set()))
        set.add(s)
      }
      s.once('disconnect', () => {
        for (const k of keysOf(p)) {
          const set = byKey.get(k)
          set?.delete(s)
          if (set?.size === 0) byKey.delete(k)
        }
      })
      if (!p.expiresAt) return
      let timer: NodeJS.Timeout
      const arm = () => {
        const left = p.expiresAt!.getTime() - Date.now()
        // Timer reason: the credential expires at that moment.
        timer = left <= 0 ? setTimeout(() => close(s, 'expired'), 0) : setTimeout(arm, Math.min(left, MAX_TIMER_MS))
        timer.unref()
      }
      arm()
      s.once('disconnect', () => clearTimeout(timer))
    },
    close: () => listener.close(),
  }
}

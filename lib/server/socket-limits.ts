/**
 * What one Socket.IO connection may send. A socket is a pipe with no
 * back-pressure: a client can write thousands of messages into it at once,
 * and each handler would start its work before the first had ended, so one
 * tenant's socket could fill the database pool every other tenant's requests
 * wait for. Every inbound message (any event name, known or not) is counted
 * per socket:
 *
 * - up to `messages` in a window of `windowSeconds` (a minute in
 *   production: KILN_SOCKET_MESSAGES_PER_MINUTE) are handled;
 * - beyond that each is refused unhandled: its ack (when it asked for one)
 *   says `rate limited`, with the seconds until the window ends;
 * - a socket that goes on sending, past twice `messages` within the window,
 *   is told why (`socket:closing`) and disconnected. The disconnect is the
 *   server's, so a Socket.IO client does not reconnect by itself.
 *
 * A reconnecting client gets a new socket and a new count: a browser that
 * joins its stack's room again after a network blip is never counted against
 * the socket it lost. The counts live in this process's memory, like the
 * failed-attempt counts (lib/auth/failed-attempts.ts).
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'
import type { Logger } from '../logger'

/** Why a flooding socket was closed (sent to the client as `socket:closing` before the disconnect). */
export const FLOOD_REASON = 'too many messages: the connection is closed'

export interface LimitedSocket {
  id: string
  data: { principal: { projectId: string; tokenId: string } }
  use(fn: (event: unknown[], next: (err?: Error) => void) => void): unknown
  emit(event: 'socket:closing', msg: { reason: string; retryAfter: number }): unknown
  disconnect(close: boolean): unknown
  once(event: 'disconnect', fn: () => void): unknown
}

export interface MessageLimit {
  messages: number
  windowSeconds: number
}

export function socketMessageLimit(opts: MessageLimit & { log: Logger }) {
  const limiter = new RateLimiterMemory({ points: opts.messages, duration: opts.windowSeconds })
  const retryAfterOf = (res: RateLimiterRes) => Math.max(1, Math.ceil(res.msBeforeNext / 1000))

  return {
    /** Count every message `socket` sends, refuse those over the limit, and close the socket when it floods. */
    attach(socket: LimitedSocket): void {
      let closing = false
      socket.once('disconnect', () => void limiter.delete(socket.id))
      socket.use((event, next) => {
        if (closing) return // already disconnecting: nothing more of it is handled
        limiter.consume(socket.id).then(
          () => next(),
          (res: unknown) => {
            if (!(res instanceof RateLimiterRes)) return // the memory store does not fail; an unexpected error drops the message
            const retryAfter = retryAfterOf(res)
            if (res.consumedPoints > 2 * opts.messages) {
              if (closing) return
              closing = true
              const p = socket.data.principal
              opts.log.warn(`socket of token ${p.tokenId} (project ${p.projectId}) sent more than ${2 * opts.messages} messages within ${opts.windowSeconds} s; closed`)
              socket.emit('socket:closing', { reason: FLOOD_REASON, retryAfter })
              socket.disconnect(true)
              return
            }
            // Refused, not handled: answered when the client asked for an answer.
            const ack = event.at(-1)
            if (typeof ack === 'function') ack({ ok: false, error: 'rate limited', retryAfter })
          },
        )
      })
    },
  }
}

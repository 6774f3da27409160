/**
 * The stack rooms one socket is in, and what joining one costs.
 *
 * - A subscribe to a room the socket is in, or is joining, does no database
 *   work: it is answered from memory (the room's position as the bridge has
 *   it now), or with the answer of the join under way. The credential check
 *   that every join does guards the opening of a room; a repeat opens none,
 *   and a revoked credential closes the socket anyway (socket-lifetime.ts).
 * - A socket's joins run one after another, never side by side: a socket
 *   holds at most one database connection at a time, however many joins it
 *   sends at once (the message limit, socket-limits.ts, bounds how many).
 * - A socket is in at most MAX_STACK_ROOMS stack rooms: each one the bridge
 *   follows costs every web process a watch and a read per event.
 */
import type { Db } from '../db/client'
import { subscribeCheck } from '../db/queries/accounts'
import type { Bridge } from '../realtime/bridge'
import type { SubscribeAck } from '../realtime/contracts'
import type { SocketPrincipal } from './socket-auth'

/** Stack rooms one socket may be in (or be joining) at once. */
export const MAX_STACK_ROOMS = 100

const STACK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export interface RoomSocket {
  readonly connected: boolean
  data: { principal: SocketPrincipal }
  join(room: string): unknown
  leave(room: string): unknown
  disconnect(close: boolean): unknown
}

/** One join: its answer, shared by every repeat that comes while it runs or after it succeeded. */
interface Membership {
  answer: Promise<SubscribeAck>
}

export function stackRooms(socket: RoomSocket, deps: { db: Db; bridge: Pick<Bridge, 'track' | 'position'> }) {
  const rooms = new Map<string, Membership>()
  /** The socket's joins, one after another. */
  let queue: Promise<unknown> = Promise.resolve()

  async function join(stackId: string, m: Membership): Promise<SubscribeAck> {
    // Left (unsubscribed, or disconnected) while waiting its turn: nothing to do.
    if (rooms.get(stackId) !== m || !socket.connected) return { ok: false, error: 'unsubscribed' }
    const p = socket.data.principal
    // The credential is checked again on every join: a token revoked (or expired) since the
    // handshake opens no more rooms, and its socket is closed.
    const check = await subscribeCheck(deps.db, p.tokenId, p.projectId, stackId)
    if (!check.live) {
      setTimeout(() => socket.disconnect(true), 0)
      return { ok: false, error: 'unauthorized' }
    }
    // Another project's stack looks exactly like a missing one.
    if (!check.found) return { ok: false, error: 'not found' }
    if (rooms.get(stackId) !== m || !socket.connected) return { ok: false, error: 'unsubscribed' }
    await socket.join(`stack:${stackId}`)
    return { ok: true, lastSeq: await deps.bridge.track(stackId) }
  }

  return {
    /** Join a stack's room; the answer says the seq the room starts after, or why not. */
    subscribe(raw: unknown): Promise<SubscribeAck> {
      if (typeof raw !== 'string' || !STACK_ID.test(raw)) return Promise.resolve({ ok: false, error: 'not found' })
      // The bridge names rooms by the stack's id as PostgreSQL prints it (lower case).
      const stackId = raw.toLowerCase()
      const known = rooms.get(stackId)
      if (known) return known.answer.then((a) => (a.ok ? { ok: true, lastSeq: deps.bridge.position(stackId) ?? a.lastSeq } : a))
      if (rooms.size >= MAX_STACK_ROOMS) return Promise.resolve({ ok: false, error: `too many stacks: a connection follows at most ${MAX_STACK_ROOMS}; unsubscribe from one first` })
      const m: Membership = { answer: Promise.resolve({ ok: false, error: 'unavailable' }) }
      m.answer = queue.then(() => join(stackId, m)).catch((): SubscribeAck => ({ ok: false, error: 'unavailable' }))
      queue = m.answer
      rooms.set(stackId, m)
      // A refused join is forgotten, so that a later one checks again.
      void m.answer.then((a) => {
        if (!a.ok && rooms.get(stackId) === m) rooms.delete(stackId)
      })
      return m.answer
    },

    unsubscribe(raw: unknown): void {
      if (typeof raw !== 'string' || !STACK_ID.test(raw)) return
      const stackId = raw.toLowerCase()
      rooms.delete(stackId)
      void socket.leave(`stack:${stackId}`)
    },

    /** The socket is gone: its queued joins find themselves left. */
    clear(): void {
      rooms.clear()
    },
  }
}

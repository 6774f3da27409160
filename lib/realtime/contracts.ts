/**
 * Socket.IO messages between the web server and browsers (import-free so the
 * UI can use it). Every event carries its per-stack sequence number; a client
 * that sees a gap (or reconnects) refetches over REST, so the database stays
 * the truth.
 */
export interface StackEventMessage {
  version: 1
  stackId: string
  seq: number
  traversalId: string | null
  kind: 'stack' | 'traversal' | 'resource' | 'node' | 'lock' | 'progress'
  resourceId: number | null
  resourceName: string | null
  physicalId: string | null
  action: string | null
  status: string | null
  reason: string
  data: Record<string, unknown> | null
  at: string
}

export interface ServerToClientEvents {
  /** Events of one stack, in seq order. */
  'stack:events': (msg: { stackId: string; events: StackEventMessage[] }) => void
  /** Stack-level changes of the project (for the stacks list). */
  'project:stack': (msg: StackEventMessage) => void
  /**
   * The stack's history is shorter than what the room was sent: a database
   * crash lost steps that had committed without waiting for the disk (lazy
   * commits), and their numbers will be handed out again. Refetch; events
   * after `lastSeq` follow as usual.
   */
  'stack:resync': (msg: { stackId: string; lastSeq: number }) => void
  /**
   * Sent just before the server closes the connection for a reason of its own
   * (the client kept sending after its messages were refused as too many).
   */
  'socket:closing': (msg: { reason: string; retryAfter: number }) => void
}

/**
 * The answer to a subscribe: the seq the room starts after, or why not
 * (`not found`, `unauthorized`, `unavailable`, `too many stacks: …`, and
 * `rate limited` with the seconds to wait, which any message with an ack may
 * be answered).
 */
export type SubscribeAck = { ok: true; lastSeq: number } | { ok: false; error: string; retryAfter?: number }

export interface ClientToServerEvents {
  /** Join a stack's room; the ack says the seq the room starts after (or an error). */
  'stack:subscribe': (stackId: string, ack: (res: SubscribeAck) => void) => void
  'stack:unsubscribe': (stackId: string) => void
}

/**
 * The worker's LISTEN connection: kiln_jobs (work was queued or a parked node
 * woken: claim) and kiln_abort (stop actions of a stack). A reconnect claims
 * too: jobs queued while nobody listened sent their NOTIFY into the void.
 *
 * Under it, the safety net: after `idleClaimMs` without a kiln_jobs
 * notification or a claim, claim anyway, so that a silently lost LISTEN costs
 * seconds instead of a stall. Re-armed for what is left of the period when
 * something was heard meanwhile, so a notification costs no timer call. A
 * claim it makes that finds jobs means a notification was lost: the claim
 * loop logs it and asks the connection whether it still answers (a half-open
 * connection never reports its own death).
 */
import { PgListener } from '../lib/db/listener'
import { IDLE_REASON, type NotificationChannel } from './claim-loop'
import type { WorkerResources } from './resources'
import type { AbortNotice } from './signals'

/** How long the LISTEN connection may take to answer a ping before it is replaced. */
const PING_TIMEOUT_MS = 10_000

export class JobListener implements NotificationChannel {
  private connection: PgListener | null = null
  /** When this worker last heard of work (a kiln_jobs notification) or claimed: the idle-claim timer counts from here. */
  private lastHeard = Date.now()

  constructor(
    private readonly resources: WorkerResources,
    /** Ask for a claim round, with the reason. */
    private readonly wake: (reason: string) => void,
  ) {}

  get listening(): boolean {
    return this.connection?.listening ?? false
  }

  heard(): void {
    this.lastHeard = Date.now()
  }

  checkConnection(): void {
    void this.connection?.check(PING_TIMEOUT_MS)
  }

  async open(): Promise<void> {
    const { db, log } = this.resources
    this.connection = await PgListener.open({
      url: db.url,
      channels: ['kiln_jobs', 'kiln_abort'],
      application: 'kiln-worker-listen',
      label: 'worker',
      log,
      onNotification: (msg) => this.notified(msg.channel, msg.payload),
      // Jobs queued while nobody listened sent their NOTIFY into the void.
      onReconnect: () => this.wake('LISTEN connection back'),
    })
  }

  async close(): Promise<void> {
    await this.connection?.close()
    this.connection = null
  }

  /** Start the idle-claim timer. */
  startIdleClaims(): void {
    this.scheduleIdleClaim(this.resources.settings.idleClaimMs)
  }

  private notified(channel: string, payload: string | undefined) {
    const { lifecycle, traversals, aborts, log } = this.resources
    if (channel === 'kiln_jobs') {
      this.heard()
      this.wake('notify')
      // A new traversal: load its context now, beside the claim (errors are the cache's to forget).
      if (payload && lifecycle.running()) void traversals.get(payload).catch(() => {})
    } else if (channel === 'kiln_abort' && payload) {
      try {
        const n = aborts.notice(JSON.parse(payload) as AbortNotice)
        if (n) log.info(`aborted ${n} action(s): ${payload}`)
      } catch {
        /* malformed notice: ignore */
      }
    }
  }

  private scheduleIdleClaim(delayMs: number) {
    const { idleClaimMs } = this.resources.settings
    this.resources.timers.after(delayMs, () => {
      const quiet = Date.now() - this.lastHeard
      let next = idleClaimMs - quiet
      if (next <= 0) {
        next = idleClaimMs
        // While the LISTEN connection is known to be down, its return wakes a claim (onReconnect).
        if (this.listening) {
          this.heard()
          this.wake(`${IDLE_REASON}: no notification or claim for ${quiet} ms`)
        }
      }
      this.scheduleIdleClaim(next)
    })
  }
}

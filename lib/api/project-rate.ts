/**
 * Requests of one kind a project may make per window (a minute), so that one project's
 * bursts on a costly route (an import preview looks at objects on the target
 * server) cannot take the web server's time from the others. Past the limit,
 * the project is answered 429 with `Retry-After` until its window ends;
 * other projects are not touched.
 *
 * The counts live in this process's memory, as failed credential attempts do
 * (lib/auth/failed-attempts.ts): N web processes allow up to N times the rate.
 */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible'

export interface ProjectRateLimit {
  /** Count a request of `projectId`: 0 when it may go on, else the whole seconds until it may. */
  take(projectId: string): Promise<number>
}

export function projectRateLimit(opts: { requests: number; windowSeconds: number }): ProjectRateLimit {
  const limiter = new RateLimiterMemory({ points: opts.requests, duration: opts.windowSeconds })
  return {
    async take(projectId) {
      try {
        await limiter.consume(projectId)
        return 0
      } catch (res) {
        if (res instanceof RateLimiterRes) return Math.max(1, Math.ceil(res.msBeforeNext / 1000))
        throw res
      }
    },
  }
}

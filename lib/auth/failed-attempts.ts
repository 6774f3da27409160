/**
 * A limit on failed credential attempts per client address: `perMinute`
 * failures in a one-minute window, then every credential from that address is
 * answered 429 with `Retry-After` until the window ends. Used by the REST and
 * Heat APIs, the login form and the Socket.IO handshake alike.
 *
 * - A limited address's credentials are refused *without being checked*: an
 *   answer that still told a right guess from a wrong one (200 against 429)
 *   would leave the guessing unlimited.
 * - Successful attempts consume nothing, so a busy client with a valid token
 *   is never limited. Failures are counted when they happen, so requests
 *   already in flight when the limit is reached still get their answer.
 * - IPv6 clients are counted per /64 (one host usually holds a whole /64).
 * - The counts live in this process's memory: each web process counts its own
 *   clients, so N web processes behind a balancer allow up to N times the rate.
 *   That is enough against guessing (a token has 256 random bits) and against
 *   a client flooding the token lookup, and needs no shared state.
 */
import { RateLimiterMemory } from 'rate-limiter-flexible'
import type { Logger } from '../logger'

export interface FailedAttemptLimit {
  /** Whole seconds until `address` may present a credential again; 0 when it may now. */
  retryAfter(address: string | undefined): Promise<number>
  /** Count a failed attempt from `address`. */
  failed(address: string | undefined): Promise<void>
}

export function failedAttemptLimit(opts: { perMinute: number; log: Logger }): FailedAttemptLimit {
  const limiter = new RateLimiterMemory({ points: opts.perMinute, duration: 60 })
  return {
    async retryAfter(address) {
      const res = await limiter.get(clientKey(address))
      return res && res.consumedPoints >= opts.perMinute ? Math.max(1, Math.ceil(res.msBeforeNext / 1000)) : 0
    },
    async failed(address) {
      const key = clientKey(address)
      const res = await limiter.penalty(key, 1)
      // Once per burst: the failure that spends the allowance (later ones are refused unchecked).
      if (res.consumedPoints === opts.perMinute) {
        opts.log.warn(`auth: ${opts.perMinute} failed credential attempts from ${key} within a minute; refusing its credentials for ${Math.ceil(res.msBeforeNext / 1000)} s`)
      }
    },
  }
}

/** The address a client is counted under: IPv4 as is (also when IPv4-mapped), IPv6 by its /64. */
export function clientKey(address: string | undefined): string {
  if (!address) return 'unknown'
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return mapped[1]!
  if (!address.includes(':')) return address
  const groups = expandIPv6(address.replace(/%.*$/, ''))
  return groups ? `${groups.slice(0, 4).join(':')}::/64` : address
}

/** The eight groups of an IPv6 address (`::` expanded), or null when it is not one. */
function expandIPv6(address: string): string[] | null {
  const halves = address.toLowerCase().split('::')
  if (halves.length > 2) return null
  const head = halves[0] ? halves[0].split(':') : []
  const tail = halves.length === 2 && halves[1] ? halves[1].split(':') : []
  const missing = 8 - head.length - tail.length
  if (halves.length === 1 ? missing !== 0 : missing < 1) return null
  const groups = [...head, ...Array<string>(halves.length === 2 ? missing : 0).fill('0'), ...tail]
  return groups.every((g) => /^[0-9a-f]{1,4}$/.test(g)) ? groups.map((g) => g.replace(/^0+(?=.)/, '')) : null
}

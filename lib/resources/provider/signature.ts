/**
 * Request signatures between Kiln and a provider, in the manner of Stripe's
 * and GitHub's webhooks: `Kiln-Signature: t=<unix seconds>,v1=<hex>`, where
 * v1 is HMAC-SHA256, keyed with the provider's secret, of `<t>.<body>` (the
 * exact bytes sent; an empty body for a GET). A provider checks it and that
 * `t` is recent, so a request cannot be forged or replayed later.
 */
import { createHmac, timingSafeEqual } from 'node:crypto'

export const SIGNATURE_HEADER = 'kiln-signature'
/** How old a signed request may be when it is checked. */
export const SIGNATURE_TOLERANCE_SECS = 300

const mac = (secret: string, t: number, body: string) => createHmac('sha256', secret).update(`${t}.${body}`).digest('hex')

export function sign(secret: string, body: string, now = Date.now()): string {
  const t = Math.floor(now / 1000)
  return `t=${t},v1=${mac(secret, t, body)}`
}

/** Whether `header` signs `body` with `secret`, made within the tolerance of `now`. */
export function verify(secret: string, header: string | null | undefined, body: string, now = Date.now()): boolean {
  const m = /^t=(\d{1,12}),v1=([0-9a-f]{64})$/.exec(header ?? '')
  if (!m) return false
  const t = Number(m[1])
  if (Math.abs(now / 1000 - t) > SIGNATURE_TOLERANCE_SECS) return false
  const want = Buffer.from(mac(secret, t, body), 'hex')
  return timingSafeEqual(want, Buffer.from(m[2]!, 'hex'))
}

/** The signature of a callback URL's path: a provider can call back only the URL Kiln gave it. */
export const callbackSignature = (secret: string, path: string) => createHmac('sha256', secret).update(`callback ${path}`).digest('base64url')

/**
 * A server component: a script in the page's HTML that starts the reads the
 * page's first load makes (components/api.ts's earlyReadsScript), so that they
 * travel while the page's scripts load instead of after. The script carries
 * the request's nonce (the Content-Security-Policy admits nothing else;
 * lib/server/security-headers.ts); without one it is left out and the page
 * reads as usual.
 */
import { headers } from 'next/headers'
import { earlyReadsScript } from './api'

export async function EarlyReads({ paths }: { paths: string[] }) {
  const nonce = (await headers()).get('content-security-policy')?.match(/'nonce-([^']+)'/)?.[1]
  if (!nonce) return null
  return <script nonce={nonce} dangerouslySetInnerHTML={{ __html: earlyReadsScript(paths) }} />
}

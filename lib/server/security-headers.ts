/**
 * The security headers of every response of the web process: the UI's pages
 * (Next), the REST and Heat APIs, and Socket.IO's HTTP answers.
 *
 * The UI's Content-Security-Policy admits scripts by a nonce made per request.
 * Next hydrates through inline scripts; it takes the nonce from the request's
 * `Content-Security-Policy` header (server.ts sets it) and puts it on every
 * script it renders, which is why every page is rendered per request
 * (app/layout.tsx). `'strict-dynamic'` extends that trust to the chunks those
 * scripts load. Styles are admitted inline: CodeMirror injects `<style>`
 * elements and Cytoscape and React write `style` attributes, which no nonce can
 * cover (and a style-src with a nonce ignores 'unsafe-inline'); injected CSS
 * cannot run code. `connect-src 'self'` covers Socket.IO's WebSocket to the
 * same origin (CSP 3: 'self' matches ws: and wss: of the page's host).
 */
import crypto from 'node:crypto'

const COMMON: Record<string, string> = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
}

/** What an API answer (JSON, a graph export, Socket.IO) may do if a browser renders it: nothing. */
const API_POLICY = "default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

export const API_SECURITY_HEADERS: Readonly<Record<string, string>> = { ...COMMON, 'content-security-policy': API_POLICY }

/** A fresh nonce for one page request. */
export function newNonce(): string {
  return crypto.randomBytes(16).toString('base64')
}

/** The UI's policy for one page request; development adds 'unsafe-eval', which React's dev build needs. */
export function pagePolicy(nonce: string, dev: boolean): string {
  return [
    "default-src 'self'",
    `script-src 'self' 'nonce-${nonce}' 'strict-dynamic'${dev ? " 'unsafe-eval'" : ''}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self'",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ')
}

export function pageSecurityHeaders(policy: string): Record<string, string> {
  return { ...COMMON, 'content-security-policy': policy }
}

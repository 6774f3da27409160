import type { ReactNode } from 'react'
import { connection } from 'next/server'
import './globals.css'

export const metadata = { title: 'Kiln', description: 'Stack convergence, live' }

export default async function RootLayout({ children }: { children: ReactNode }) {
  // Rendered per request, never prerendered: the Content-Security-Policy admits a page's scripts by the
  // request's nonce, which Next writes into the scripts as it renders (lib/server/security-headers.ts).
  await connection()
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  )
}

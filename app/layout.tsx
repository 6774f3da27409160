import type { ReactNode } from 'react'
import './globals.css'

export const metadata = { title: 'Kiln', description: 'Stack convergence, live' }

export default function RootLayout({ children }: { children: ReactNode }) {
  return (
    <html lang="en">
      <body>{children}</body>
    </html>
  )
}

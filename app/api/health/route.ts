import { appContext } from '@/lib/server/context'
import { health } from '@/lib/services/health'

export const dynamic = 'force-dynamic'

export async function GET() {
  const ctx = appContext()
  const h = await health(ctx.db, ctx.env.KILN_LEASE_MS)
  return Response.json(h, { status: h.status === 'down' ? 503 : 200 })
}

/**
 * What every read system shares: the pool it reads with and the resource
 * types (which values of a row are secret), and the two lookups each read
 * starts from: a stack of the actor's project, and a stored template.
 */
import type { Db } from '../../db/client'
import { stackForRead } from '../../db/queries/stacks'
import { templateById } from '../../db/queries/templates'
import { NotFoundError } from '../../plan/errors'
import type { Registry } from '../../resources/registry'
import type { Actor } from '../stacks/types'

export interface ReadResources {
  pool: Db['pool']
  registry: Registry
}

export const iso = (d: unknown) => (d ? new Date(d as string).toISOString() : null)

const STACK_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A stack of the actor's project by id or name (deleted ones too); another project's is "not found". */
export async function stackRow({ pool }: ReadResources, actor: Actor, ref: string): Promise<Record<string, unknown>> {
  const row = await stackForRead(pool, actor.projectId, ref, STACK_ID.test(ref))
  if (!row) throw new NotFoundError(`stack ${ref} not found`)
  return row
}

export async function templateOf({ pool }: ReadResources, templateId: string | null) {
  if (!templateId) return null
  return templateById(pool, templateId)
}

/**
 * Registering HTTP resource providers (docs/reference/provider-protocol.md):
 * a project registers one for itself, the admin one for every project. Kiln
 * asks the provider for its types (`GET /types`, signed), checks them against
 * the protocol, and stores them; the types are then `<prefix>::<type>` in
 * the registering project's templates. A provider's callback wakes the row's
 * parked action, once its URL's signature checks.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { Db } from '../db/client'
import { UUID } from '../ids'
import { listProviders, providerNamed, providerOfRow, removeProvider, saveProvider, wakeProviderWait, type ProviderListing } from '../db/queries/providers'
import { ConflictError, ForbiddenError, NotFoundError, ValidationError } from '../plan/errors'
import { send } from '../resources/provider/client'
import { TypesReply, type TypeDeclT } from '../resources/provider/protocol'
import { callbackSignature } from '../resources/provider/signature'
import { callbackHandle, callbackPath } from '../resources/provider/type'
import { RESERVED_PREFIXES } from '../resources/packages'
import { ResourceActionError } from '../resources/types'

export interface ProviderRegistration {
  name: string
  url: string
  prefix: string
  /** The key of the HMAC that signs Kiln's requests; generated (and answered once) when not given. */
  secret?: string
  /** `global`: for every project (admin tokens only). */
  scope?: 'project' | 'global'
}

export interface ProviderActor {
  projectId: string
  role: string
}


export interface ProviderServiceDeps {
  db: Db
  /** Called once a registration changed in this process (its own types reload before the answer). */
  changed: () => Promise<void>
  /** Prefixes the type packages' types use: a provider cannot take them. */
  packagePrefixes?: string[]
}

export function createProviderService(deps: ProviderServiceDeps) {
  const pool = deps.db.pool
  const ownerOf = (actor: ProviderActor, scope: ProviderRegistration['scope']) => {
    if (scope !== 'global') return actor.projectId
    if (actor.role !== 'admin') throw new ForbiddenError('a provider for every project (scope: global) is registered with an admin token')
    return null
  }

  async function typesOf(reg: { name: string; url: string; secret: string }): Promise<TypeDeclT[]> {
    try {
      const reply = await send(reg, 'types', null, TypesReply, { signal: AbortSignal.timeout(20_000), timeoutMs: 10_000, backoffMs: (n) => 200 * n })
      if (reply.kind !== 'ok') throw new ResourceActionError(reply.kind === 'accepted' ? 'answered 202; GET /types answers at once' : `answered HTTP ${reply.status}: ${reply.error}`)
      return reply.value.types
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err)
      throw new ValidationError(`url: could not read the provider's types (GET ${reg.url}/types): ${why}`)
    }
  }

  return {
    async register(actor: ProviderActor, reg: ProviderRegistration): Promise<{ provider: ProviderListing; secret?: string }> {
      const projectId = ownerOf(actor, reg.scope)
      const head = reg.prefix.split('::')[0]!
      if (RESERVED_PREFIXES.includes(head)) throw new ValidationError(`prefix: ${head}:: is reserved for Kiln's and Heat's own types; choose another`)
      if (deps.packagePrefixes?.includes(head)) throw new ConflictError(`prefix: ${head}:: belongs to a type package this server loads (KILN_TYPE_PACKAGES); choose another`)
      const secret = reg.secret ?? `kiln_prov_${randomBytes(24).toString('base64url')}`
      const url = reg.url.replace(/\/+$/, '')
      const types = await typesOf({ name: reg.name, url, secret })
      const saved = await saveProvider(pool, { projectId, name: reg.name, prefix: reg.prefix, url, secret, types })
      if (saved.outcome === 'prefix_taken') throw new ConflictError(`prefix: ${reg.prefix} is taken by another provider; choose another`)
      await deps.changed()
      return { provider: saved.provider, ...(reg.secret === undefined ? { secret } : {}) }
    },

    list: (actor: ProviderActor) => listProviders(pool, actor.projectId),

    /** Ask the provider for its types again (it added or changed one). */
    async refresh(actor: ProviderActor, name: string, scope?: ProviderRegistration['scope']): Promise<ProviderListing> {
      const projectId = ownerOf(actor, scope)
      const p = await providerNamed(pool, projectId, name)
      if (!p) throw new NotFoundError(`provider ${name} not found`)
      const types = await typesOf(p)
      const saved = await saveProvider(pool, { ...p, types })
      if (saved.outcome !== 'saved') throw new ConflictError(`prefix: ${p.prefix} is taken by another provider`)
      await deps.changed()
      return saved.provider
    },

    async remove(actor: ProviderActor, name: string, scope?: ProviderRegistration['scope']): Promise<void> {
      const out = await removeProvider(pool, ownerOf(actor, scope), name)
      if (out.outcome === 'absent') throw new NotFoundError(`provider ${name} not found`)
      if (out.outcome === 'in_use') throw new ConflictError(`provider ${name} still has resources in stack(s) ${out.stacks.join(', ')}; delete them first`, { stacks: out.stacks })
      await deps.changed()
    },

    /** A provider's callback: wakes the row's parked action when `sig` is the provider's signature of the URL. */
    async callback(stackId: string, resourceUuid: string, sig: string): Promise<{ woken: number }> {
      const found = UUID.test(stackId) && UUID.test(resourceUuid) ? await providerOfRow(pool, stackId, resourceUuid) : null
      // The same answer for no such row and a bad signature: a caller learns nothing of what exists.
      if (!found || !sameText(sig, callbackSignature(found.provider.secret, callbackPath(stackId, resourceUuid)))) throw new NotFoundError('no such callback')
      return { woken: await wakeProviderWait(pool, stackId, callbackHandle(resourceUuid)) }
    },
  }
}

export type ProviderService = ReturnType<typeof createProviderService>

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

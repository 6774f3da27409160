/**
 * Import: adopting objects that already exist into a stack, through the
 * resources of a template that carry `external_id` (Heat's key). An import
 * creates the stack, or updates it when the project has a stack of that
 * name; its preview says, resource by resource, what would be adopted, as
 * the type observes it now, and how it differs from the template, without
 * writing anything.
 *
 * The preview runs the types' `adopt` in a dry run in this process: it only
 * looks (the rules of observe: read-only, fast, abortable; a deadline of
 * PREVIEW_LOOK_MS for the whole look), and its records are read, never
 * written. Its cost is bounded whatever the template: at most
 * `maxPreviewItems` resources are looked at (more is a 413 naming
 * KILN_MAX_IMPORT_PREVIEW_ITEMS), and a type that can (`adoptMany`) looks at
 * all of its objects at once: Kiln::Postgres::Database with one connection to
 * the target server and one catalog query per preview, instead of a
 * connection per database. The route limits previews per project
 * (KILN_IMPORT_PREVIEWS_PER_MINUTE).
 */
import crypto from 'node:crypto'
import { isDeepStrictEqual } from 'node:util'
import type { Db } from '../db/client'
import { adoptOutside, findOutside, inScopeOutside } from '../db/queries/outside-objects'
import { heldRowData } from '../db/queries/resources'
import { liveStackNamed } from '../db/queries/stacks'
import { adoptionOf, externalIdRefusal } from '../engine/adoption'
import type { Logger } from '../logger'
import { shownValue, validateProperties } from '../resources/schema'
import { ResourceActionError, type Adopted, type OutsideObjects, type OutsideOwner, type ResourceContext, type ResourceType, type ResourceTypeConfig } from '../resources/types'
import { outsideRun } from '../resources/outside-run'
import type { TypeCatalog } from '../template/types'
import { ConflictError, LimitError, ValidationError } from '../plan/errors'
import { hiddenValues, MASK, redact, secretList, type Secrets } from '../plan/secrets'
import type { Actor, OperationResult, StackService } from './stacks'
import type { Limits, Submission } from '../plan/template-check'
import { checkSubmission } from './templates'

/** How long the preview's look at its objects may take, all of them. */
const PREVIEW_LOOK_MS = 15_000

export interface ImportDeps {
  db: Db
  catalog: TypeCatalog
  types: { get(name: string): ResourceType | undefined }
  /** Where the types find their objects (the workspace, the target server); without it a preview cannot look. */
  typeConfig?: ResourceTypeConfig
  limits: Limits
  /** Most resources with external_id one preview looks at (KILN_MAX_IMPORT_PREVIEW_ITEMS). */
  maxPreviewItems: number
  stacks: StackService
  log: Logger
}

export interface ImportRequest extends Submission {
  /** The stack to import into: created, or updated when the project has one of that name. */
  name: string
  timeoutMins?: number
  disableRollback?: boolean
}

export interface ImportItem {
  name: string
  type: string
  externalId: string
  /**
   * adopt: the object exists and would be adopted; adopted: the stack holds it
   * already (left as it is); refused: it cannot be (the reason says why:
   * missing, another owner, an update Heat's rule forbids); error: the look
   * itself failed.
   */
  outcome: 'adopt' | 'adopted' | 'refused' | 'error'
  reason?: string
  /** The object as observed (secrets masked, long values cut). */
  properties?: Record<string, unknown>
  attributes?: Record<string, unknown>
  /** Where the template's known values differ from the object: what an update without external_id would change. */
  differences?: { property: string; template: unknown; seen: unknown }[]
}

export interface ImportPreview {
  stack: { name: string; id: string | null; exists: boolean }
  items: ImportItem[]
  summary: { adopt: number; adopted: number; refused: number; error: number }
}

function masked(type: ResourceType, values: Record<string, unknown>, which: 'properties' | 'attributes', secrets: Secrets): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(values).map(([k, v]) => {
      const schema = type[which][k]
      if (schema?.secret) return [k, v === null ? null : MASK]
      return [k, shownValue(which === 'properties' ? type.properties[k] : undefined, redact(v, secrets))]
    }),
  )
}

export function createImportService(deps: ImportDeps) {
  const { pool } = deps.db

  async function existing(actor: Actor, name: string): Promise<{ id: string; name: string } | null> {
    return liveStackNamed(pool, actor.projectId, name)
  }

  async function checked(actor: Actor, req: ImportRequest, stackId: string) {
    const c = await checkSubmission(req, { catalog: deps.catalog, limits: deps.limits, stackName: req.name, stackId, projectId: actor.projectId })
    if (!c.plan.external) throw new ValidationError('template: no resource has external_id: there is nothing to import', [{ code: 'structure', path: 'resources', line: null, column: null, message: 'no resource has external_id: there is nothing to import' }])
    return c
  }

  /** Records may be read, and an adoption tried in a dry run; nothing else (a preview writes nothing). */
  function lookOnly(owner: OutsideOwner): OutsideObjects {
    const refuse = () => Promise.reject(new Error('an import preview writes nothing'))
    return {
      find: (refs) => findOutside(pool, refs),
      inScope: (kind, scope) => inScopeOutside(pool, kind, scope),
      adopt: (refs, opts) => (opts.dryRun ? adoptOutside(pool, owner, refs, opts) : refuse()),
      claim: refuse,
      settle: refuse,
      startDelete: refuse,
      forget: refuse,
    }
  }

  function context(actor: Actor, stack: { id: string; name: string }, resourceName: string, config: ResourceTypeConfig, signal: AbortSignal): ResourceContext {
    const owner = { projectId: actor.projectId, stackId: stack.id, resourceName, resourceUuid: crypto.randomUUID() }
    return {
      ...owner,
      ...outsideRun('an import preview'),
      stackName: stack.name,
      replacesUuid: null,
      physicalName: `${stack.name}-${resourceName}-preview`,
      signal,
      log: deps.log,
      config,
      objects: lookOnly(owner),
    }
  }

  return {
    async preview(actor: Actor, req: ImportRequest): Promise<ImportPreview> {
      const stack = await existing(actor, req.name)
      const target = stack ?? { id: crypto.randomUUID(), name: req.name }
      const c = await checked(actor, req, target.id)
      const external = c.plan.external!
      const template = JSON.parse(c.templateText) as { parameters?: Record<string, unknown> }
      const env = c.environmentJson as { parameters?: Record<string, unknown>; parameter_defaults?: Record<string, unknown> }
      const secrets = secretList(hiddenValues(template.parameters as never, [c.parameters, env.parameters, env.parameter_defaults]))
      const held = new Map<string, Record<string, unknown> | null>()
      if (stack) {
        for (const r of await heldRowData(pool, stack.id)) held.set(String(r.name), r.data)
      }
      const names = Object.keys(external).sort()
      if (names.length > deps.maxPreviewItems) {
        throw new LimitError(`the template has ${names.length} resources with external_id; an import preview looks at ${deps.maxPreviewItems} at most (KILN_MAX_IMPORT_PREVIEW_ITEMS)`, 'import_preview_items', deps.maxPreviewItems)
      }
      const items = new Map<string, ImportItem>()
      /** The resources to look at, by type. */
      const looks = new Map<ResourceType, { name: string; externalId: string }[]>()
      for (const name of names) {
        const e = external[name]!
        const typeName = c.plan.types[name]!
        const base = { name, type: typeName, externalId: e.externalId }
        if (held.has(name)) {
          const why = externalIdRefusal(name, adoptionOf(held.get(name) ?? null), e.externalId, e.fingerprint)
          items.set(name, why ? { ...base, outcome: 'refused', reason: redact(why, secrets) } : { ...base, outcome: 'adopted', reason: 'the stack holds it already: it is left as it is' })
          continue
        }
        const type = deps.types.get(typeName)
        if (!type?.adopt) items.set(name, { ...base, outcome: 'refused', reason: `${typeName} cannot adopt an existing object` })
        else if (!deps.typeConfig) items.set(name, { ...base, outcome: 'error', reason: 'this server is not configured to look at resources' })
        else looks.set(type, [...(looks.get(type) ?? []), { name, externalId: e.externalId }])
      }
      const signal = AbortSignal.timeout(PREVIEW_LOOK_MS)
      for (const [type, wanted] of looks) {
        const batch = wanted.map((w) => ({ ctx: context(actor, target, w.name, deps.typeConfig!, signal), externalId: w.externalId }))
        const answers = await adoptions(type, batch)
        wanted.forEach((w, i) => {
          const e = external[w.name]!
          const base = { name: w.name, type: type.name, externalId: e.externalId }
          const seen = answers[i]!
          if (seen instanceof Error) {
            items.set(w.name, { ...base, outcome: seen instanceof ResourceActionError ? 'refused' : 'error', reason: redact(seen.message, secrets) })
            return
          }
          const template = validateProperties(type.properties, e.known, { acceptUnknown: type.acceptsAnyProperties === true }).value
          const shown = (k: string, v: unknown) => masked(type, { [k]: v }, 'properties', secrets)[k]
          // A value that waits for another resource is not known yet: not compared.
          const differences = Object.keys(seen.properties)
            .filter((k) => !e.deferred.includes(k) && !isDeepStrictEqual(template[k] ?? null, seen.properties[k] ?? null))
            .map((k) => ({ property: k, template: shown(k, template[k] ?? null), seen: shown(k, seen.properties[k] ?? null) }))
          items.set(w.name, { ...base, outcome: 'adopt', properties: masked(type, seen.properties, 'properties', secrets), attributes: masked(type, seen.attributes, 'attributes', secrets), differences })
        })
      }
      const ordered = names.map((n) => items.get(n)!)
      const count = (o: ImportItem['outcome']) => ordered.filter((i) => i.outcome === o).length
      return { stack: { name: req.name, id: stack?.id ?? null, exists: stack !== null }, items: ordered, summary: { adopt: count('adopt'), adopted: count('adopted'), refused: count('refused'), error: count('error') } }
    },

    /** Adopt: create the stack, or update the project's stack of that name (external_id resources adopted, the others made). */
    async run(actor: Actor, req: ImportRequest): Promise<OperationResult & { created: boolean }> {
      const stack = await existing(actor, req.name)
      await checked(actor, req, stack?.id ?? crypto.randomUUID())
      const { name, ...sub } = req
      if (!stack) return { ...(await deps.stacks.create(actor, { name, ...sub })), created: true }
      try {
        return { ...(await deps.stacks.update(actor, stack.id, sub)), created: false }
      } catch (err) {
        if (err instanceof ConflictError) throw new ConflictError(`stack ${name} exists and cannot take the import now: ${err.message}`)
        throw err
      }
    },
  }
}

/**
 * The dry-run adoptions of one type's objects, in order: all at once when the
 * type can (adoptMany), else one after the other. A look that fails as a
 * whole (the server unreachable) is every item's error.
 */
async function adoptions(type: ResourceType, batch: { ctx: ResourceContext; externalId: string }[]): Promise<(Adopted | Error)[]> {
  const failed = (err: unknown) => (err instanceof Error ? err : new Error(String(err)))
  if (type.adoptMany) {
    try {
      return await type.adoptMany(batch, { dryRun: true })
    } catch (err) {
      return batch.map(() => failed(err))
    }
  }
  const out: (Adopted | Error)[] = []
  for (const { ctx, externalId } of batch) out.push(await type.adopt!(ctx, externalId, { dryRun: true }).catch(failed))
  return out
}

export type ImportService = ReturnType<typeof createImportService>

/**
 * The set of resource types a process knows, and the views other modules
 * need of it: the template module's TypeCatalog (validation at submit time)
 * and a Heat-style schema description for the API.
 */
import { delayResource } from './builtin/delay'
import type { TypeCatalog } from '../template/types'
import { execResource, type ExecSettings } from './builtin/exec'
import { fileResource } from './builtin/file'
import { cloudConfigResource, multipartMimeResource, softwareConfigResource, structuredConfigResource } from './builtin/software-config'
import { postgresDatabaseResource } from './builtin/postgres-database'
import { noneResource, randomStringResource, valueResource } from './builtin/simple'
import { testResource } from './builtin/test-resource'
import { updateWaitConditionHandleResource, waitConditionHandleResource, waitConditionResource } from './builtin/wait-condition'
import { catalogData, catalogFromData } from './catalog'
import type { ProviderTypes } from './provider/provider-types'
import type { PropertySchema, ResourceType } from './types'

export interface Registry {
  get(name: string): ResourceType | undefined
  has(name: string): boolean
  list(): ResourceType[]
  /** Changes whenever the set of types does (providers registered or removed); absent: never changes. */
  generation?(): number
}

/** The built-in types and, after them, the providers' (whose names carry a prefix no built-in type has). */
export function withProviders(builtin: Registry, providers: Pick<ProviderTypes, 'get' | 'list' | 'generation'>): Registry {
  return {
    get: (name) => builtin.get(name) ?? providers.get(name),
    has: (name) => builtin.has(name) || providers.get(name) !== undefined,
    list: () => [...builtin.list(), ...providers.list().sort((a, b) => a.name.localeCompare(b.name))],
    generation: () => providers.generation,
  }
}

export interface BuiltinOptions {
  /** Kiln::Exec's allow-list (KILN_EXEC_COMMANDS); empty or unset: the type refuses every command. */
  exec?: ExecSettings
  /** Types of the type packages (KILN_TYPE_PACKAGES, lib/resources/packages.ts), loaded before. */
  packages?: ResourceType[]
}

export function builtinTypes(opts: BuiltinOptions = {}): ResourceType[] {
  return [
    testResource,
    noneResource,
    valueResource,
    randomStringResource,
    waitConditionHandleResource,
    updateWaitConditionHandleResource,
    waitConditionResource,
    delayResource,
    fileResource,
    postgresDatabaseResource,
    softwareConfigResource,
    structuredConfigResource,
    cloudConfigResource,
    multipartMimeResource,
    execResource(opts.exec ?? { commands: [] }),
    ...(opts.packages ?? []),
  ]
}

export function createRegistry(types: ResourceType[]): Registry {
  const byName = new Map<string, ResourceType>()
  for (const t of types) {
    if (byName.has(t.name)) throw new Error(`resource type ${t.name} is registered twice`)
    byName.set(t.name, t)
  }
  return {
    get: (name) => byName.get(name),
    has: (name) => byName.has(name),
    list: () => [...byName.values()].sort((a, b) => a.name.localeCompare(b.name)),
  }
}

/** Whether `who`'s project may use type `t`: a provider's type registered by another project is unknown to it. */
export const mayUse = (t: ResourceType, who: { projectId: string }) => t.ownerProject === undefined || t.ownerProject === who.projectId

/** Names of the types whose actions change nothing outside Kiln's database (ResourceType.stateOnly). */
export function stateOnlyTypeNames(registry: Pick<Registry, 'list'>): string[] {
  return registry.list().filter((t) => t.stateOnly).map((t) => t.name)
}

/** The template module's view of `registry`, rebuilt when its types change (a provider registered). */
export function typeCatalog(registry: Registry): TypeCatalog {
  let built: { generation: number; catalog: TypeCatalog } | null = null
  const current = () => {
    const generation = registry.generation?.() ?? 0
    if (built?.generation !== generation) built = { generation, catalog: catalogFromData(catalogData(registry.list())) }
    return built.catalog
  }
  return {
    get data() {
      return current().data
    },
    has: (name) => current().has(name),
    validateProperties: (name, properties) => current().validateProperties(name, properties),
    attributes: (name) => current().attributes(name),
    adopts: (name) => current().adopts?.(name) === true,
    snapshots: (name) => current().snapshots?.(name) === true,
  }
}

/** Heat's resource_schema shape (GET /resource_types/{type}). */
export function describeType(t: ResourceType) {
  const prop = (s: PropertySchema): Record<string, unknown> => ({
    type: s.type,
    description: s.description ?? '',
    required: s.required === true,
    update_allowed: s.updateAllowed === true,
    immutable: false,
    ...(s.default !== undefined ? { default: s.default } : {}),
    ...(s.constraints?.length ? { constraints: s.constraints } : {}),
    ...(s.schema ? { schema: Object.fromEntries(Object.entries(s.schema).map(([k, v]) => [k, prop(v)])) } : {}),
    ...(s.items ? { schema: { '*': prop(s.items) } } : {}),
  })
  return {
    resource_type: t.name,
    description: t.description,
    properties: Object.fromEntries(Object.entries(t.properties).map(([k, v]) => [k, prop(v)])),
    attributes: Object.fromEntries(Object.entries(t.attributes).map(([k, v]) => [k, { description: v.description, ...(v.type ? { type: v.type } : {}) }])),
    support_status: { status: 'SUPPORTED', version: null, message: null, previous_status: null },
  }
}

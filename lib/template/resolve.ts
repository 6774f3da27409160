/**
 * Runtime evaluation: a resource's properties and the stack's outputs, with
 * the values other resources have now (or UNKNOWN, for a preview).
 */
import { resolveDeferred } from './evaluate'
import type { ResolveContext, StackDefinition } from './types'

export function resolveProperties(def: StackDefinition, name: string, ctx: ResolveContext): Record<string, unknown> {
  const r = def.resources[name]
  if (!r) throw new Error(`resource ${name} is not in the stack definition`)
  return resolveDeferred(r.properties, ctx) as Record<string, unknown>
}

export interface ResolvedOutput {
  description?: string
  value: unknown
  /** Set when the value could not be computed (e.g. a resource it needs failed). */
  error?: string
}

export function resolveOutputs(def: StackDefinition, ctx: ResolveContext): Record<string, ResolvedOutput> {
  const out: Record<string, ResolvedOutput> = {}
  for (const [name, o] of Object.entries(def.outputs)) {
    const description = o.description !== undefined ? { description: o.description } : {}
    try {
      out[name] = { ...description, value: resolveDeferred(o.value, ctx) }
    } catch (err) {
      out[name] = { ...description, value: null, error: (err as Error).message }
    }
  }
  return out
}

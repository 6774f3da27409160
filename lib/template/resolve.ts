/**
 * Runtime evaluation: a resource's properties and the stack's outputs, with
 * the values other resources have now (or UNKNOWN, for a preview).
 */
import { Budget, BudgetExceeded, DEFAULT_EVALUATION_LIMITS } from './budget'
import { resolveDeferred, runtime } from './evaluate'
import type { PortableDefinition, ResolveContext } from './types'

/** A resource's properties; `budget` bounds the work (a spent one throws BudgetExceeded). */
export function resolveProperties(def: Pick<PortableDefinition, 'resources'>, name: string, ctx: ResolveContext, budget = new Budget(DEFAULT_EVALUATION_LIMITS)): Record<string, unknown> {
  const r = def.resources[name]
  if (!r) throw new Error(`resource ${name} is not in the stack definition`)
  try {
    return resolveDeferred(r.properties, ctx, runtime(budget)) as Record<string, unknown>
  } catch (err) {
    if (err instanceof BudgetExceeded) err.at(`resources.${name}.properties`)
    throw err
  }
}

export interface ResolvedOutput {
  description?: string
  value: unknown
  /** Set when the value could not be computed (e.g. a resource it needs failed). */
  error?: string
}

/**
 * Every output's value with the values resources have now. An output that
 * cannot be computed carries its error; one that spends the (shared) budget
 * carries the budget's message, and so does every output after it.
 */
export function resolveOutputs(def: Pick<PortableDefinition, 'outputs'>, ctx: ResolveContext, budget = new Budget(DEFAULT_EVALUATION_LIMITS)): Record<string, ResolvedOutput> {
  const out: Record<string, ResolvedOutput> = {}
  const rt = runtime(budget)
  let spent: BudgetExceeded | null = null
  for (const [name, o] of Object.entries(def.outputs)) {
    const description = o.description !== undefined ? { description: o.description } : {}
    if (spent) {
      out[name] = { ...description, value: null, error: spent.message }
      continue
    }
    try {
      out[name] = { ...description, value: resolveDeferred(o.value, ctx, rt) }
    } catch (err) {
      if (err instanceof BudgetExceeded) {
        if (err.inline) throw err // the caller runs it again under the whole budget
        spent = err.at(`outputs.${name}.value`)
      }
      out[name] = { ...description, value: null, error: (err as Error).message }
    }
  }
  return out
}

/**
 * Runtime evaluation: a resource's properties and the stack's outputs, with
 * the values other resources have now (or UNKNOWN, for a preview).
 */
import { Budget, BudgetExceeded, DEFAULT_EVALUATION_LIMITS } from './budget'
import { resolveDeferred, runtime } from './evaluate'
import { Secrecy } from './secrecy'
import type { PortableDefinition, ResolveContext } from './types'

/**
 * A resource's properties; `budget` bounds the work (a spent one throws BudgetExceeded), and
 * `secrecy` learns the forms of the secret values they are made from.
 */
export function resolveProperties(
  def: Pick<PortableDefinition, 'resources'>,
  name: string,
  ctx: ResolveContext,
  budget = new Budget(DEFAULT_EVALUATION_LIMITS),
  secrecy = new Secrecy(budget),
): Record<string, unknown> {
  const r = def.resources[name]
  if (!r) throw new Error(`resource ${name} is not in the stack definition`)
  try {
    return resolveDeferred(r.properties, ctx, runtime(budget, secrecy)) as Record<string, unknown>
  } catch (err) {
    if (err instanceof BudgetExceeded) err.at(`resources.${name}.properties`)
    throw err
  }
}

/** A resource's properties, and the secret forms they carry (what its row stores with them, so reads mask them). */
export interface SecretAwareProperties {
  properties: Record<string, unknown>
  secretForms: string[]
}

/**
 * A resource's properties with what is secret in them. `known`: the forms the definition knows
 * (its hidden parameters' and those the static phase derived in this resource's properties).
 */
export function resolveSecretAware(def: Pick<PortableDefinition, 'resources'>, name: string, ctx: ResolveContext, known: readonly string[], budget = new Budget(DEFAULT_EVALUATION_LIMITS)): SecretAwareProperties {
  const secrecy = new Secrecy(budget, known)
  const properties = resolveProperties(def, name, ctx, budget, secrecy)
  return { properties, secretForms: secrecy.carried(properties) }
}

/** The forms a resolution of `name`'s properties starts from. */
export function knownSecrets(def: Pick<PortableDefinition, 'resources' | 'secretForms'>, name: string): string[] {
  const own = def.resources[name]?.secretForms ?? []
  return own.length ? [...def.secretForms, ...own] : def.secretForms
}

export interface ResolvedOutput {
  description?: string
  value: unknown
  /** Set when the value could not be computed (e.g. a resource it needs failed). */
  error?: string
  /** Its value was evaluated from a secret: shown only when asked for by name (reads mask it otherwise). */
  sensitive?: boolean
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
    const sensitive = o.sensitive ? { sensitive: true } : {}
    if (spent) {
      out[name] = { ...description, value: null, error: spent.message, ...sensitive }
      continue
    }
    const mark = rt.secrecy.mark()
    try {
      const value = resolveDeferred(o.value, ctx, rt)
      out[name] = { ...description, value, ...(o.sensitive || rt.secrecy.since(mark) ? { sensitive: true } : {}) }
    } catch (err) {
      if (err instanceof BudgetExceeded) {
        if (err.inline) throw err // the caller runs it again under the whole budget
        spent = err.at(`outputs.${name}.value`)
      }
      out[name] = { ...description, value: null, error: (err as Error).message, ...(o.sensitive || rt.secrecy.since(mark) ? { sensitive: true } : {}) }
    }
  }
  return out
}

/**
 * Evaluations that usually stay on the calling thread: a stored template's
 * definition (a worker's traversal, a rollback's plan, a read's outputs), a
 * resource's properties when its node runs, a stack's outputs when read.
 *
 * Each first runs here under a small allowance: KILN_TEMPLATE_EVAL_INLINE_OPS
 * operations plus INLINE_OPS_PER_NODE per node of what it evaluates, so work
 * in proportion to the template stays put (no thread hop for the engine's
 * thousand resources a second). An evaluation that spends the allowance is
 * run again on an evaluation thread under the full budget and the time limit;
 * if that is spent too, BudgetExceeded names the budget, and the caller fails
 * the node (or the output) with it. The calling thread never runs more than
 * its allowance of a tenant's template.
 */
import type { TemplateEvaluator } from '../engine/ports'
import { knownSecrets, resolveOutputs, resolveSecretAware, type ResolvedOutput, type SecretAwareProperties } from '../template'
import { Budget, BudgetExceeded, countNodes } from '../template/budget'
import type { OutputSnippet, PortableDefinition, ResourceValues, StoredTemplate } from '../template/types'
import { decodeDeferred, encodeDeferred } from './codec'
import { evaluation } from './pool'
import { INLINE_OPS_PER_NODE } from './settings'
import { storedDefinition, valuesContext, type Task } from './tasks'

/** Run `inline` under the allowance for `input`; if it spends it, run `task` on a thread. */
async function bounded<T>(input: unknown, inline: (budget: Budget) => T, task: () => Task, decode: (v: unknown) => T = (v) => v as T): Promise<T> {
  const pool = evaluation()
  const { limits, inlineOps } = pool.settings
  const allowance = inlineOps + INLINE_OPS_PER_NODE * countNodes(input, limits.maxOps)
  try {
    return inline(new Budget(limits, allowance))
  } catch (err) {
    if (!(err instanceof BudgetExceeded && err.inline)) throw err
  }
  return decode(await pool.run(task()))
}

/** A stored template's definition (or only what its outputs need). */
export function definitionOf(stored: StoredTemplate, opts: { outputsOnly?: boolean } = {}): Promise<PortableDefinition> {
  const outputsOnly = opts.outputsOnly === true
  const t = stored.parsed && Object.keys(stored.parsed).length ? stored.parsed : stored.source
  // Outputs need the parameters, conditions and outputs sections only: the allowance is theirs.
  const input = outputsOnly && t && typeof t === 'object' ? [t.parameters, t.conditions, t.outputs] : t
  return bounded(
    input,
    (budget) => storedDefinition(stored, budget, outputsOnly),
    () => ({ kind: 'definition', stored, outputsOnly }),
    (v) => decodeDeferred(v) as PortableDefinition,
  )
}

/** A resource's properties with the values of the resources it reads, and the secret forms they carry. */
export function propertiesOf(def: Pick<PortableDefinition, 'resources' | 'secretForms'>, name: string, inputs: ResourceValues[]): Promise<SecretAwareProperties> {
  const properties = def.resources[name]?.properties
  const known = knownSecrets(def, name)
  return bounded(
    properties,
    (budget) => resolveSecretAware(def, name, valuesContext(inputs), known, budget),
    () => ({ kind: 'properties', name, properties: encodeDeferred(properties), inputs, known }),
  )
}

/** A stack's outputs with the values its resources have now. */
export function outputsOf(outputs: Record<string, OutputSnippet>, rows: ResourceValues[]): Promise<Record<string, ResolvedOutput>> {
  return bounded(
    outputs,
    (budget) => resolveOutputs({ outputs }, valuesContext(rows), budget),
    () => ({ kind: 'outputs', outputs: encodeDeferred(outputs), rows }),
  )
}

/** The engine's TemplateEvaluator port, as a worker runs it. */
export const boundedEvaluator: TemplateEvaluator = { definitionOf: (stored) => definitionOf(stored), propertiesOf }

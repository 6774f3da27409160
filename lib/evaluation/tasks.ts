/**
 * The template work an evaluation thread does, as plain functions of plain
 * data (what postMessage can carry). bounded.ts runs the same functions on
 * the calling thread first, under a small allowance.
 */
import { catalogFromData, schemasFromData } from '../resources/catalog'
import { computePreview, type PreviewInput } from '../services/preview'
import { budgetError, checkSubmissionNow, type PortableCheckContext, type Submission } from '../services/templates'
import { buildDefinition, parseEnvironment, parseTemplate, resolveOutputs, resolveSecretAware, secretList, type Secrets } from '../template'
import { Budget, BudgetExceeded, type EvaluationLimits } from '../template/budget'
import type { PortableDefinition, ResolveContext } from '../template/types'
import { decodeDeferred, encodeDeferred } from './codec'

/** A stored template (raw_template) and the stack it belongs to. */
export interface StoredTemplate {
  /** The text, or null when the parsed form is given instead (the engine reads the parsed JSON). */
  source: string | null
  parsed: Record<string, unknown> | null
  environment: unknown
  parameters: Record<string, unknown>
  stackName: string
  stackId: string
  projectId: string
}

/** What a resolution may read of another resource. */
export interface ResourceValues {
  name: string
  physicalId: string | null
  attributes: Record<string, unknown> | null
  /** Attributes its type declares secret. */
  secretAttributes?: string[]
  /** The secret forms its row was made from (resource.secret_forms). */
  secretForms?: string[]
}

export type Task =
  | { kind: 'submission'; sub: Submission; ctx: PortableCheckContext }
  | { kind: 'definition'; stored: StoredTemplate; outputsOnly: boolean }
  | { kind: 'properties'; name: string; properties: unknown; inputs: ResourceValues[]; known: string[] }
  | { kind: 'outputs'; outputs: unknown; rows: ResourceValues[] }
  | { kind: 'preview'; sub: Submission; ctx: PortableCheckContext; preview: Omit<PreviewInput, 'next' | 'target'>; target: StoredTemplate | null }

/**
 * A stored template's definition. It was checked when submitted, so
 * parameter constraints are not checked again (`validated`).
 */
export function storedDefinition(stored: StoredTemplate, budget: Budget, outputsOnly = false): PortableDefinition {
  const maxDepth = budget.limits.maxDepth
  const t = parseTemplate(stored.source ?? stored.parsed ?? '', { maxDepth })
  const def = buildDefinition(t, {
    environment: parseEnvironment(stored.environment as string | object | null | undefined, maxDepth),
    parameters: stored.parameters,
    stackName: stored.stackName,
    stackId: stored.stackId,
    projectId: stored.projectId,
    validated: true,
    outputsOnly,
    budget,
  })
  return { parameters: def.parameters, hiddenParameters: def.hiddenParameters, secretForms: def.secretForms, resources: def.resources, outputs: def.outputs }
}

export function valuesContext(rows: ResourceValues[]): ResolveContext {
  const byName = new Map(rows.map((r) => [r.name, r]))
  const forms = new Map<string, Secrets>()
  return {
    getResource: (name) => byName.get(name)?.physicalId ?? null,
    getAttr: (name, attribute) => byName.get(name)?.attributes?.[attribute] ?? null,
    secretAttribute: (name, attribute) => byName.get(name)?.secretAttributes?.includes(attribute) === true,
    secretFormsOf: (name) => {
      const stored = byName.get(name)?.secretForms
      if (!stored?.length) return undefined
      let s = forms.get(name)
      if (!s) forms.set(name, (s = secretList(stored)))
      return s
    },
  }
}

export function runTask(task: Task, limits: EvaluationLimits): unknown {
  const budget = () => new Budget(limits)
  switch (task.kind) {
    case 'submission':
      return checkSubmissionNow(task.sub, { ...task.ctx, catalog: catalogFromData(task.ctx.catalog) }, budget()).checked
    case 'definition':
      return encodeDeferred(storedDefinition(task.stored, budget(), task.outputsOnly))
    case 'properties': {
      const resources = { [task.name]: { properties: decodeDeferred(task.properties) } } as unknown as PortableDefinition['resources']
      return resolveSecretAware({ resources }, task.name, valuesContext(task.inputs), task.known, budget())
    }
    case 'outputs':
      return resolveOutputs({ outputs: decodeDeferred(task.outputs) as PortableDefinition['outputs'] }, valuesContext(task.rows), budget())
    case 'preview': {
      const ctx = { ...task.ctx, catalog: catalogFromData(task.ctx.catalog) }
      const next = checkSubmissionNow(task.sub, ctx, budget()).definition
      try {
        const target = task.target ? storedDefinition(task.target, budget()) : null
        return computePreview({ ...task.preview, next, target }, schemasFromData(task.ctx.catalog), budget())
      } catch (err) {
        // The answer to a request: a spent budget is the request's 400.
        if (err instanceof BudgetExceeded) throw budgetError(err)
        throw err
      }
    }
  }
}

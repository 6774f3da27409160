/**
 * The template work an evaluation thread does, as plain functions of plain
 * data (what postMessage can carry). bounded.ts runs the same functions on
 * the calling thread first, under a small allowance.
 */
import { catalogFromData } from '../resources/catalog'
import { builtinReplaceRules } from '../resources/replace-rules'
import type { PropertySchema } from '../resources/types'
import { computePreview, type PreviewInput, type TypeRulesOf } from '../plan/preview-model'
import type { PreviewResult } from '../plan/preview-types'
import { budgetError, checkSubmissionNow, submissionSecrets, type CheckedSubmission, type PortableCheckContext, type Submission } from '../plan/template-check'
import { buildDefinition, parseEnvironment, parseTemplate, resolveOutputs, resolveSecretAware, secretList, type Secrets } from '../template'
import { Budget, BudgetExceeded, type EvaluationLimits } from '../template/budget'
import type { CatalogData, PortableDefinition, ResolveContext, ResourceValues, StackDefinition, StoredTemplate } from '../template/types'
import { decodeDeferred, encodeDeferred } from './codec'

export type Task =
  | { kind: 'submission'; sub: Submission; ctx: PortableCheckContext }
  | { kind: 'definition'; stored: StoredTemplate; outputsOnly: boolean }
  | { kind: 'properties'; name: string; properties: unknown; inputs: ResourceValues[]; known: string[] }
  | { kind: 'outputs'; outputs: unknown; rows: ResourceValues[] }
  | { kind: 'preview'; sub: Submission; ctx: PortableCheckContext; preview: Omit<PreviewInput, 'next' | 'target'>; target: StoredTemplate | null }

/** A preview's answer: what the update will do, and the submission as checked (what a saved plan stores). */
export interface PreviewOutcome {
  preview: PreviewResult
  checked: CheckedSubmission
}

/**
 * A stored template's definition. It was checked when submitted, so
 * parameter constraints are not checked again (`validated`).
 */
export function storedDefinition(stored: StoredTemplate, budget: Budget, outputsOnly = false): PortableDefinition {
  const def = storedStackDefinition(stored, budget, outputsOnly)
  return { parameters: def.parameters, hiddenParameters: def.hiddenParameters, secretForms: def.secretForms, resources: def.resources, outputs: def.outputs, ...(def.hooks ? { hooks: def.hooks } : {}) }
}

/** The same, with everything buildDefinition gives (the parsed template, the conditions). */
export function storedStackDefinition(stored: StoredTemplate, budget: Budget, outputsOnly = false): StackDefinition {
  const maxDepth = budget.limits.maxDepth
  const t = parseTemplate(stored.source ?? stored.parsed ?? '', { maxDepth })
  return buildDefinition(t, {
    environment: parseEnvironment(stored.environment as string | object | null | undefined, maxDepth),
    parameters: stored.parameters,
    stackName: stored.stackName,
    stackId: stored.stackId,
    projectId: stored.projectId,
    validated: true,
    outputsOnly,
    budget,
  })
}

/**
 * What the engine's decision needs of a type on this thread: its property
 * schemas from the catalog the request was checked with, and its own
 * replace rule (replaceOnUpdate) from lib/resources/replace-rules.ts, the
 * very function a worker's node run calls.
 */
export function typeRulesFrom(catalog: CatalogData): TypeRulesOf {
  return (name) => {
    if (!Object.hasOwn(catalog, name)) return undefined
    const t = catalog[name]!
    const replaceOnUpdate = builtinReplaceRules.get(name)
    return { properties: t.properties as Record<string, PropertySchema>, acceptsAnyProperties: t.acceptsAnyProperties, ...(replaceOnUpdate ? { replaceOnUpdate } : {}), ...(t.replaceOnEveryUpdate ? { replaceOnEveryUpdate: true } : {}) }
  }
}

export function valuesContext(rows: ResourceValues[]): ResolveContext {
  const byName = new Map(rows.map((r) => [r.name, r]))
  const forms = new Map<string, Secrets>()
  return {
    getResource: (name) => byName.get(name)?.physicalId ?? null,
    getAttr: (name, attribute) => byName.get(name)?.attributes?.[attribute] ?? null,
    getAttrs: (name) => byName.get(name)?.attributes ?? null,
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
      const { checked, definition: next } = checkSubmissionNow(task.sub, ctx, budget())
      try {
        const target = task.target ? storedStackDefinition(task.target, budget()) : null
        // The new submission's hidden values are masked too, as the stack's earlier ones are.
        const secrets = [...new Set([...task.preview.secrets, ...submissionSecrets(next.template, task.sub).texts])]
        const preview = computePreview({ ...task.preview, secrets, next, target }, typeRulesFrom(task.ctx.catalog), budget())
        return { preview, checked } satisfies PreviewOutcome
      } catch (err) {
        // The answer to a request: a spent budget is the request's 400.
        if (err instanceof BudgetExceeded) throw budgetError(err)
        throw err
      }
    }
  }
}

/**
 * The stack's outputs. An output evaluated from a secret (or whose value
 * holds one) is `sensitive`: its value is masked whole, unless it is the
 * output asked for by name with `reveal`.
 */
import { outputSourceRows } from '../../db/queries/resources'
import { definitionOf, outputsOf } from '../../evaluation/bounded'
import { NotFoundError } from '../../plan/errors'
import { holdsSecret, MASK, redact, type Secrets } from '../../plan/secrets'
import { secretsOfType } from '../../resources/secrets'
import type { ResolvedOutput } from '../../template'
import { BudgetExceeded } from '../../template/budget'
import type { OutputSnippet } from '../../template/types'
import type { Actor } from '../stacks/types'
import type { SecretSystem } from './secrets'
import { stackRow, templateOf, type ReadResources } from './shared'

/** Static outputs kept per template (a template row never changes), least recently used first. */
const OUTPUTS_CACHE_SIZE = 256

export class OutputSystem {
  /**
   * A template's outputs with parameters and conditions applied (what is left: references to
   * resources), by template id. Reads evaluate them once per template, not on every GET, and
   * evaluate nothing of the resources.
   */
  private readonly cache = new Map<string, Promise<Record<string, OutputSnippet>>>()

  constructor(private readonly options: { resources: ReadResources; secrets: SecretSystem }) {}

  /** Every output of the stack; sensitive ones masked. */
  async outputs(actor: Actor, ref: string): Promise<Record<string, ResolvedOutput>> {
    return this.of(await stackRow(this.options.resources, actor, ref))
  }

  /** One output; a sensitive one's value only with `reveal` (an explicit request by a member of the project). */
  async output(actor: Actor, ref: string, key: string, opts: { reveal: boolean }): Promise<ResolvedOutput> {
    const all = await this.of(await stackRow(this.options.resources, actor, ref), opts.reveal ? key : null)
    if (!Object.hasOwn(all, key)) throw new NotFoundError(`output ${key} not found`)
    return all[key]!
  }

  /** The outputs of a stack row; `reveal` names the one sensitive output shown, `known` the stack's secrets if read already. */
  async of(stack: Record<string, unknown>, reveal: string | null = null, known?: Secrets): Promise<Record<string, ResolvedOutput>> {
    const { resources, secrets: stackSecrets } = this.options
    const t = await templateOf(resources, (stack.raw_template_id as string | null) ?? null)
    if (!t) return {}
    let snippets: Record<string, OutputSnippet>
    try {
      snippets = await this.staticOutputs(t, stack)
    } catch (err) {
      return { _error: { value: null, error: redact((err as Error).message, known ?? (await stackSecrets.of(stack.id))) } }
    }
    if (!Object.keys(snippets).length) return {}
    const rows = await outputSourceRows(resources.pool, String(stack.id))
    const values = rows.map((r) => ({
      name: String(r.name),
      physicalId: (r.physical_id as string | null) ?? null,
      attributes: (r.attributes as Record<string, unknown> | null) ?? null,
      secretAttributes: secretsOfType(resources.registry.get(String(r.type))).attributes,
      secretForms: (r.secret_forms as string[] | null) ?? [],
    }))
    let resolved: Record<string, ResolvedOutput>
    try {
      resolved = await outputsOf(snippets, values)
    } catch (err) {
      // Outputs that need more than the budget (on an evaluation thread, under the time limit) say so.
      if (!(err instanceof BudgetExceeded)) throw err
      resolved = Object.fromEntries(Object.entries(snippets).map(([k, o]) => [k, { ...(o.description !== undefined ? { description: o.description } : {}), value: null, error: err.message }]))
    }
    return shown(resolved, reveal, known ?? (await stackSecrets.of(stack.id)))
  }

  private staticOutputs(t: Record<string, unknown>, stack: Record<string, unknown>): Promise<Record<string, OutputSnippet>> {
    const id = String(t.id)
    const hit = this.cache.get(id)
    if (hit) {
      this.cache.delete(id)
      this.cache.set(id, hit)
      return hit
    }
    const parsed = t.template && typeof t.template === 'object' && Object.keys(t.template).length ? (t.template as Record<string, unknown>) : null
    const stored = { source: parsed ? null : String(t.source), parsed, environment: t.environment, parameters: t.parameters as Record<string, unknown>, stackName: String(stack.name), stackId: String(stack.id), projectId: String(stack.project_id) }
    const loading = definitionOf(stored, { outputsOnly: true }).then((def) => def.outputs)
    loading.catch(() => this.cache.delete(id))
    this.cache.set(id, loading)
    if (this.cache.size > OUTPUTS_CACHE_SIZE) this.cache.delete(this.cache.keys().next().value!)
    return loading
  }
}

/** Resolved outputs as shown: texts redacted; a sensitive output's value masked whole unless it is `reveal`. */
function shown(resolved: Record<string, ResolvedOutput>, reveal: string | null, secrets: Secrets): Record<string, ResolvedOutput> {
  return Object.fromEntries(
    Object.entries(resolved).map(([k, o]) => {
      const out: ResolvedOutput = { ...(o.description !== undefined ? { description: redact(o.description, secrets) } : {}), value: null }
      if (o.error !== undefined) out.error = redact(o.error, secrets)
      if (o.sensitive || holdsSecret(o.value, secrets)) {
        // Masked whole, not piece by piece: what is left of a secret's text around a mask may still give it away.
        if (o.error === undefined) out.value = reveal === k ? o.value : MASK
        out.sensitive = true
      } else out.value = o.value
      return [k, out]
    }),
  )
}

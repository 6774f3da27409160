/**
 * Every secret of a stack, for the other read systems to mask: its hidden
 * parameters' values (in every form, from every template the stack was
 * given), the values of its rows' secret attributes and properties, and the
 * forms each row's properties were derived from (resource.secret_forms).
 */
import { hiddenParameterTemplates, templateVersionKey } from '../../db/queries/templates'
import { secretHoldingRows } from '../../db/queries/resources'
import { hiddenValues as hiddenForms, secretList, type Secrets } from '../../plan/secrets'
import { addSecretValues, secretsOfType } from '../../resources/secrets'
import type { ReadResources } from './shared'

/** Stacks whose hidden values are kept, least recently computed dropped first. */
const HIDDEN_CACHE_SIZE = 1000

export class SecretSystem {
  /** Types that declare a secret attribute or property: their rows' values are secrets of the stack. */
  private readonly secretTypes: string[]
  private readonly propertySecretTypes: string[]
  /** Hidden values per stack (see hidden), least recently computed first. */
  private readonly hiddenCache = new Map<string, { key: string; secrets: Secrets }>()

  constructor(private readonly resources: ReadResources) {
    const types = resources.registry.list()
    this.secretTypes = types.filter((t) => secretsOfType(t).attributes.length || secretsOfType(t).properties.length).map((t) => t.name)
    this.propertySecretTypes = types.filter((t) => secretsOfType(t).properties.length).map((t) => t.name)
  }

  /** Every secret of the stack, longest first. */
  async of(stackId: unknown): Promise<Secrets> {
    const [hidden, rows] = await Promise.all([this.hidden(stackId), this.rowSecrets(stackId)])
    return rows.size ? secretList([...hidden.texts, ...rows]) : hidden
  }

  /** What the stack's rows hold that is secret (rows change: read each time, one indexed query). */
  private async rowSecrets(stackId: unknown): Promise<Set<string>> {
    const { pool, registry } = this.resources
    const rows = await secretHoldingRows(pool, String(stackId), this.secretTypes, this.propertySecretTypes)
    const out = new Set<string>()
    for (const r of rows) {
      for (const f of (r.secret_forms as string[] | null) ?? []) out.add(f)
      addSecretValues(registry.get(String(r.type)), r, out)
    }
    return out
  }

  /**
   * Every form of every hidden parameter value any template of the stack was given (request,
   * environment or default): rows, events and reasons of earlier templates may still hold old values.
   */
  private async hidden(stackId: unknown): Promise<Secrets> {
    const { pool } = this.resources
    // Templates are only ever added: their count and newest time say whether the cached list still holds.
    const k = await templateVersionKey(pool, String(stackId))
    const key = `${k?.n}|${k?.at ? new Date(k.at).getTime() : ''}`
    const cached = this.hiddenCache.get(String(stackId))
    if (cached?.key === key) return cached.secrets
    const rows = await hiddenParameterTemplates(pool, String(stackId))
    const out = new Set<string>()
    for (const r of rows) {
      const env = (r.environment ?? {}) as Record<string, Record<string, unknown> | undefined>
      hiddenForms(r.schemas, [r.parameters, env.parameters, env.parameter_defaults], out)
    }
    const secrets = secretList(out)
    this.hiddenCache.delete(String(stackId))
    this.hiddenCache.set(String(stackId), { key, secrets })
    if (this.hiddenCache.size > HIDDEN_CACHE_SIZE) this.hiddenCache.delete(this.hiddenCache.keys().next().value as string)
    return secrets
  }
}

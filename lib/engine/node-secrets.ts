/**
 * What one node must never show in a status reason, an event or a log line:
 * every form of its template's hidden parameter values, of the secret values
 * its properties were made from (learned when they were resolved, or stored
 * on its row by the last run), of its row's own secret attributes and
 * properties, and of its inputs' (their secret attributes, and the secret
 * forms their rows carry). Collected on first use: a node that never reports
 * anything pays nothing.
 */
import type { Logger } from '../logger'
import { addSecretValues } from '../resources/secrets'
import type { ResourceType } from '../resources/types'
import { redact, redactText, secretList, type Secrets } from '../template'
import type { NodePayload } from './types'

type Types = { get(name: string): ResourceType | undefined }

export interface NodeSecretSources {
  types: Types
  /** The definition's hidden parameter forms and the static forms of this resource's properties. */
  known: () => readonly string[]
  row: { type: string; attributes: Record<string, unknown> | null; properties: Record<string, unknown> | null; secretForms: string[] }
  inputs: readonly NodePayload[]
  /** An input's type (the traversal's definition names it). */
  typeOfInput: (name: string) => string | undefined
}

export class NodeSecrets {
  private cached: Secrets | null = null
  private readonly learned = new Set<string>()

  constructor(private readonly src: NodeSecretSources) {}

  /** Forms this run learned (its resolved properties'). */
  learn(forms: Iterable<string>): void {
    for (const f of forms) this.learned.add(f)
    this.cached = null
  }

  list(): Secrets {
    if (this.cached) return this.cached
    const all = new Set<string>([...this.src.known(), ...this.src.row.secretForms, ...this.learned])
    addSecretValues(this.src.types.get(this.src.row.type), this.src.row, all)
    for (const p of this.src.inputs) {
      for (const f of p.secretForms ?? []) all.add(f)
      const t = this.src.typeOfInput(p.name)
      if (t) addSecretValues(this.src.types.get(t), { attributes: p.attributes }, all)
    }
    this.cached = secretList(all)
    return this.cached
  }

  mask = (text: string): string => {
    const secrets = this.list()
    return secrets.empty ? text : redactText(text, secrets)
  }

  /** A logger whose every message and field has this node's secrets masked. */
  logger(log: Logger): Logger {
    const fields = (f?: Record<string, unknown>) => (f ? redact(f, this.list()) : f)
    return {
      debug: (m, f) => log.debug(this.mask(m), fields(f)),
      info: (m, f) => log.info(this.mask(m), fields(f)),
      warn: (m, f) => log.warn(this.mask(m), fields(f)),
      error: (m, f) => log.error(this.mask(m), fields(f)),
      scope: (extra) => this.logger(log.scope(extra)),
    }
  }
}

/**
 * The provider types a process knows: built from the registrations (read
 * through the loader the process gives, since only lib/db reads the
 * database), and reloaded when they change (NOTIFY kiln_providers, or a
 * check of their version before a node of an unknown type runs).
 */
import type { ResourceType } from '../types'
import { providerTypes, type ProviderRecord, type ProviderTypeOptions } from './type'

export interface ProviderSource {
  all(): Promise<ProviderRecord[]>
  version(): Promise<string>
}

export class ProviderTypes {
  private byName = new Map<string, ResourceType>()
  private loaded: string | null = null
  private loading: Promise<void> | null = null
  /** Bumped at every reload: catalogs built from the registry rebuild when it changes. */
  generation = 0

  constructor(
    private readonly source: ProviderSource,
    private readonly opts: ProviderTypeOptions = {},
  ) {}

  get(name: string): ResourceType | undefined {
    return this.byName.get(name)
  }

  list(): ResourceType[] {
    return [...this.byName.values()]
  }

  /** Reload if the registrations changed since the last load (one query when they did not). */
  async sync(): Promise<void> {
    const version = await this.source.version()
    if (version !== this.loaded) await this.reload()
  }

  /** Reload now (a registration changed); concurrent calls share one load. */
  reload(): Promise<void> {
    this.loading ??= (async () => {
      try {
        const version = await this.source.version()
        const records = await this.source.all()
        const next = new Map<string, ResourceType>()
        for (const r of records) for (const t of providerTypes(r, this.opts)) next.set(t.name, t)
        this.byName = next
        this.loaded = version
        this.generation++
      } finally {
        this.loading = null
      }
    })()
    return this.loading
  }
}

/** Collecting every problem with its path and position, instead of stopping at the first. */
import { formatPath, type PathPart } from './positions'
import { TemplateError, type SourcePosition, type TemplateIssue, type TemplateIssueCode } from './types'

export interface PositionLookup {
  find(path: ReadonlyArray<PathPart>): SourcePosition | null
}

export class IssueList {
  readonly items: TemplateIssue[] = []

  constructor(
    private readonly positions: PositionLookup,
    private readonly prefix: PathPart[] = [],
  ) {}

  add(code: TemplateIssueCode, path: ReadonlyArray<PathPart>, message: string, extra: Partial<TemplateIssue> = {}): void {
    const full = [...this.prefix, ...path]
    const pos = this.positions.find(full)
    this.items.push({ code, path: formatPath(full), line: pos?.line ?? null, column: pos?.column ?? null, message, ...extra })
  }

  get empty(): boolean {
    return this.items.length === 0
  }

  throwIfAny(): void {
    if (this.items.length) throw new TemplateError(this.items)
  }
}

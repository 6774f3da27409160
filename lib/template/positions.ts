/**
 * Where each template path sits in the submitted text. The `yaml` package
 * keeps source ranges on every node; we index them by path so that any issue
 * found later (in parameters, functions, dependencies) can name its line and
 * column. A JSON template is read with JSON.parse, and its index is built
 * (from a YAML reading of the same text) only when an issue asks for it.
 */
import { isMap, isPair, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node as YamlNode } from 'yaml'
import type { SourcePosition } from './types'

export type PathPart = string | number

/** `resources.web.properties.networks[0].port` */
export function formatPath(path: ReadonlyArray<PathPart>): string {
  let out = ''
  for (const p of path) {
    if (typeof p === 'number') out += `[${p}]`
    else out += out ? `.${p}` : p
  }
  return out
}

export class PositionIndex {
  private indexed: Map<string, SourcePosition> | null = null

  private constructor(private readonly build: (index: Map<string, SourcePosition>) => void = () => {}) {}

  private get byPath(): Map<string, SourcePosition> {
    if (!this.indexed) {
      this.indexed = new Map()
      this.build(this.indexed)
    }
    return this.indexed
  }

  static empty(): PositionIndex {
    return new PositionIndex()
  }

  /** The index of `source`, built on first use (JSON text read with JSON.parse, which keeps no positions). */
  static lazy(source: string): PositionIndex {
    return new PositionIndex((byPath) => {
      const lines = new LineCounter()
      // Tags change values, not where they are: the plain YAML 1.1 reading locates every path.
      const doc = parseDocument(source, { version: '1.1', lineCounter: lines, uniqueKeys: false, prettyErrors: false })
      indexDocument(byPath, doc, lines)
    })
  }

  static fromDocument(doc: Document, lines: LineCounter): PositionIndex {
    return new PositionIndex((byPath) => indexDocument(byPath, doc, lines))
  }

  /**
   * Position of a path: the key of a map entry, or an item of a list. If the
   * path itself has no position (e.g. a property that is missing), the
   * nearest ancestor that has one is used.
   */
  find(path: ReadonlyArray<PathPart>): SourcePosition | null {
    for (let n = path.length; n > 0; n--) {
      const p = this.byPath.get(formatPath(path.slice(0, n)))
      if (p) return p
    }
    return null
  }

  /** Position of the value (rather than the key) of a path. */
  findValue(path: ReadonlyArray<PathPart>): SourcePosition | null {
    return this.byPath.get(formatPath(path) + '=') ?? this.find(path)
  }
}

function indexDocument(byPath: Map<string, SourcePosition>, doc: Document, lines: LineCounter): void {
  const at = (offset: number | undefined): SourcePosition | null => {
    if (offset === undefined) return null
    const p = lines.linePos(offset)
    return { line: p.line, column: p.col }
  }
  const walk = (node: unknown, path: PathPart[]) => {
    if (isMap(node)) {
      for (const item of node.items) {
        if (!isPair(item)) continue
        const key = isScalar(item.key) ? String(item.key.value) : String(item.key)
        const child = [...path, key]
        // A map entry is located at its key: that is the line a reader looks for.
        const keyNode = item.key as YamlNode | null
        const pos = at(keyNode?.range?.[0]) ?? at((item.value as YamlNode | null)?.range?.[0])
        if (pos) byPath.set(formatPath(child), pos)
        const valuePos = at((item.value as YamlNode | null)?.range?.[0])
        if (valuePos) byPath.set(formatPath(child) + '=', valuePos)
        walk(item.value, child)
      }
    } else if (isSeq(node)) {
      node.items.forEach((item, i) => {
        const child = [...path, i]
        const pos = at((item as YamlNode | null)?.range?.[0])
        if (pos) {
          byPath.set(formatPath(child), pos)
          byPath.set(formatPath(child) + '=', pos)
        }
        walk(item, child)
      })
    }
  }
  walk(doc.contents, [])
}

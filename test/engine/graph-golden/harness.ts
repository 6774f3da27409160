/**
 * The golden graph cases (README.md in this folder): a case directory says
 * which rows a stack has and which template a traversal converges to; this
 * module builds the traversal graph exactly as startTraversal does
 * (lib/db/queries/traversal.ts: chooseRows, new INIT rows for the missing
 * names, buildGraph, indexGraph, findCycle), without a database, and renders
 * it as canonical DOT.
 *
 * Pure: no database, no worker, no clock.
 */
import fs from 'node:fs'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import YAML from 'yaml'
import { decideCleanup } from '../../../lib/engine/decide'
import { buildGraph, chooseRows, findCycle, indexGraph } from '../../../lib/engine/graph'
import type { ExistingRow, GraphIndex, NodeId, ResourceAction, ResourceStatus } from '../../../lib/engine/types'
import { parseNodeId } from '../../../lib/engine/types'
import { catalogData, catalogFromData } from '../../../lib/resources/catalog'
import { noneResource } from '../../../lib/resources/builtin/simple'
import { buildDefinition, parseTemplate, type StackDefinition } from '../../../lib/template'
import { EMPTY_TEMPLATE_SOURCE, planFor } from '../../../lib/plan/template-check'
import { scenarioType } from '../../helpers/scenario-type'

export const GOLDEN_DIR = path.dirname(fileURLToPath(import.meta.url))

export type CaseAction = 'CREATE' | 'UPDATE' | 'ROLLBACK' | 'DELETE' | 'CHECK'
const ACTIONS: CaseAction[] = ['CREATE', 'UPDATE', 'ROLLBACK', 'DELETE', 'CHECK']

/** One of Heat's own graphs (Appendix A of the reference), the same case as Heat ran it. */
export interface HeatReference {
  scenario: string
  traversal: string
  /** As the trace prints it: `P->Q` (P waits for Q) and lone nodes, separated by `; `. */
  graph: string
  /** The trace's leaves, comma-separated. */
  leaves: string
}

/** A row as case.yaml lists it (when the old template alone does not say what the rows are). */
interface RowSpec {
  id: number
  name: string
  /** `<ACTION>_<STATUS>`, e.g. CREATE_COMPLETE, INIT_COMPLETE, UPDATE_FAILED */
  state: string
  /** Label of the row's current template: `old` (the stack's template), `new` (the target), or any other. */
  template: string
  requires?: number[]
  replaces?: number
  replaced_by?: number
  /** Tie-breaker of the best-row choice (default: the id; a later row is a newer one). */
  updated_at?: number
  deletion_policy?: string
}

interface CaseSpec {
  description: string
  action: CaseAction
  rows?: RowSpec[]
  heat?: HeatReference[]
}

/** A row the graph may include, with what the rendering shows of it. */
export interface CaseRow extends ExistingRow {
  template: string
  deletionPolicy: string
  /** Inserted by this traversal (a name with no usable row). */
  inserted: boolean
}

export interface GoldenCase {
  name: string
  dir: string
  spec: CaseSpec
  action: CaseAction
  /** The template labels: the stack's (null for a create) and the traversal's. */
  prevTemplate: string | null
  targetTemplate: string
}

export interface BuiltCase {
  golden: GoldenCase
  rows: Map<number, CaseRow>
  index: GraphIndex
  cycle: NodeId[] | null
  /** The target template has no resources (a delete, the rollback of a create). */
  emptyTarget: boolean
}

const catalog = catalogFromData(catalogData([scenarioType(), noneResource]))

/** Many cases share a template: each text is parsed and checked once. */
const definitions = new Map<string, StackDefinition>()

function definitionOf(file: string, source: string): StackDefinition {
  const known = definitions.get(source)
  if (known) return known
  try {
    const def = buildDefinition(parseTemplate(source), { types: catalog, stackName: 'golden' })
    definitions.set(source, def)
    return def
  } catch (err) {
    throw new Error(`${file}: ${(err as Error).message}`, { cause: err })
  }
}

const read = (dir: string, file: string): string | null => {
  const p = path.join(dir, file)
  return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null
}

export function caseNames(): string[] {
  return fs
    .readdirSync(GOLDEN_DIR, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name)
    .sort()
}

export function loadCase(name: string): GoldenCase {
  const dir = path.join(GOLDEN_DIR, name)
  const text = read(dir, 'case.yaml')
  if (text === null) throw new Error(`${name}: no case.yaml`)
  const spec = YAML.parse(text) as CaseSpec
  if (typeof spec?.description !== 'string' || !spec.description.trim()) throw new Error(`${name}/case.yaml: description is required`)
  if (!ACTIONS.includes(spec.action)) throw new Error(`${name}/case.yaml: action must be one of ${ACTIONS.join(', ')}`)
  const action = spec.action
  // The stack's template is `old`; the traversal converges to `new` (a check: to the stack's own template).
  const prevTemplate = action === 'CREATE' ? null : 'old'
  const targetTemplate = action === 'CHECK' ? 'old' : 'new'
  return { name, dir, spec, action, prevTemplate, targetTemplate }
}

/** The rows before the traversal: listed in case.yaml, or every resource of old.yaml created and complete. */
function existingRows(c: GoldenCase, old: StackDefinition | null): CaseRow[] {
  const { spec } = c
  if (spec.rows) {
    const ids = new Set(spec.rows.map((r) => r.id))
    return spec.rows.map((r) => {
      const m = /^([A-Z]+)_([A-Z_]+)$/.exec(r.state)
      if (!m) throw new Error(`${c.name}: row #${r.id}: state must be <ACTION>_<STATUS>, got ${r.state}`)
      for (const ref of [...(r.requires ?? []), r.replaces, r.replaced_by]) {
        if (ref !== undefined && !ids.has(ref)) throw new Error(`${c.name}: row #${r.id} refers to #${ref}, which is not listed`)
      }
      return {
        id: r.id,
        name: r.name,
        action: m[1] as ResourceAction,
        status: m[2] as ResourceStatus,
        currentTemplateId: r.template,
        requires: [...(r.requires ?? [])],
        replaces: r.replaces ?? null,
        replacedBy: r.replaced_by ?? null,
        updatedAt: r.updated_at ?? r.id,
        template: r.template,
        deletionPolicy: r.deletion_policy ?? 'Delete',
        inserted: false,
      }
    })
  }
  if (!old) return []
  // As Kiln's create leaves them: rows inserted in the plan's order, each requiring the rows of its dependencies.
  const plan = planFor(old)
  const ids = new Map(plan.names.map((n, i) => [n, i + 1]))
  return plan.names.map((n) => ({
    id: ids.get(n)!,
    name: n,
    action: 'CREATE',
    status: 'COMPLETE',
    currentTemplateId: 'old',
    requires: plan.dependsOn[n]!.map((d) => ids.get(d)!).sort((a, b) => a - b),
    replaces: null,
    replacedBy: null,
    updatedAt: ids.get(n)!,
    template: 'old',
    deletionPolicy: old.resources[n]!.deletionPolicy,
    inserted: false,
  }))
}

/** What startInTransaction (lib/db/queries/traversal.ts) does between reading the rows and storing the graph. */
export function buildCase(c: GoldenCase): BuiltCase {
  const oldSource = read(c.dir, 'old.yaml')
  let newSource = read(c.dir, 'new.yaml')
  const need = (ok: boolean, what: string) => {
    if (!ok) throw new Error(`${c.name}: ${c.action} ${what}`)
  }
  if (c.action === 'CREATE') need(oldSource === null && !c.spec.rows, 'has no old.yaml and no rows')
  else need(oldSource !== null || !!c.spec.rows, 'needs old.yaml or rows')
  if (c.action === 'DELETE' || c.action === 'CHECK') need(newSource === null, 'has no new.yaml (a delete converges to nothing, a check to the stack template)')
  if (c.action === 'CREATE' || c.action === 'UPDATE') need(newSource !== null, 'needs new.yaml')
  if (c.action === 'CHECK') need(!c.spec.rows, 'takes the rows from old.yaml')
  // A delete, and the rollback of a create, converge to the empty template.
  newSource ??= c.action === 'CHECK' ? oldSource : EMPTY_TEMPLATE_SOURCE
  const old = oldSource === null ? null : definitionOf(`${c.name}/old.yaml`, oldSource)
  const target = definitionOf(`${c.name}/new.yaml`, newSource!)
  const plan = planFor(target)

  const all = existingRows(c, old)
  // The SELECT of startInTransaction: a DELETE_COMPLETE row is gone for a new traversal.
  const existing = all.filter((r) => !(r.action === 'DELETE' && r.status === 'COMPLETE'))
  const isCheck = c.action === 'CHECK'
  const choice = chooseRows(plan.names, existing, c.prevTemplate, c.targetTemplate)
  if (isCheck && choice.missing.length) throw new Error(`${c.name}: a check refuses to start: never created ${choice.missing.join(', ')}`)
  const rows = new Map<number, CaseRow>(existing.map((r) => [r.id, r]))
  const bound = new Map(choice.bound)
  // The resource id sequence: after every row the stack ever had.
  let next = Math.max(0, ...all.map((r) => r.id)) + 1
  for (const name of choice.missing) {
    const id = next++
    bound.set(name, id)
    rows.set(id, {
      id, name, action: 'INIT', status: 'COMPLETE', currentTemplateId: c.targetTemplate, requires: [], replaces: null, replacedBy: null, updatedAt: id,
      template: c.targetTemplate, deletionPolicy: target.resources[name]!.deletionPolicy, inserted: true,
    })
  }
  const ordered = new Map(plan.names.map((n) => [n, bound.get(n)!]))
  const graph = buildGraph(ordered, plan.dependsOn, isCheck ? [] : existing)
  const index = indexGraph(graph)
  return { golden: c, rows, index, cycle: findCycle(index), emptyTarget: plan.names.length === 0 }
}

// ---- rendering ----

const label = (b: BuiltCase, id: NodeId) => {
  const k = parseNodeId(id)
  return `${b.rows.get(k.rid)!.name}#${k.rid} ${k.update ? 'update' : 'cleanup'}`
}

/** Nodes by resource name, then row id, the update node before the cleanup node. */
function nodeOrder(b: BuiltCase) {
  return (x: NodeId, y: NodeId): number => {
    const kx = parseNodeId(x)
    const ky = parseNodeId(y)
    const nx = b.rows.get(kx.rid)!.name
    const ny = b.rows.get(ky.rid)!.name
    if (nx !== ny) return nx < ny ? -1 : 1
    if (kx.rid !== ky.rid) return kx.rid - ky.rid
    return kx.update === ky.update ? 0 : kx.update ? -1 : 1
  }
}

/** What the node will do, as far as the graph's start knows (README.md). */
function intent(b: BuiltCase, id: NodeId): string {
  const k = parseNodeId(id)
  const row = b.rows.get(k.rid)!
  if (k.update) return row.action === 'INIT' ? 'create' : 'update'
  // The row's own update node moves it to the target: only a replacement leaves it behind, to be deleted.
  if (b.index.byId.has(`${k.rid}:u`)) return 'delete if replaced'
  const d = decideCleanup({ action: row.action, status: row.status, type: '', properties: null, currentTemplateId: row.currentTemplateId, deletionPolicy: row.deletionPolicy }, b.golden.targetTemplate)
  return d.kind
}

function nodeLines(b: BuiltCase, id: NodeId): string[] {
  const k = parseNodeId(id)
  const row = b.rows.get(k.rid)!
  const state = row.inserted ? 'new row' : `${row.action}_${row.status} @${row.template}`
  const lines = [label(b, id), `${state}: ${intent(b, id)}`]
  if (!k.update && row.requires.length) lines.push(`requires ${[...row.requires].sort((x, y) => x - y).map((r) => `#${r}`).join(' ')}`)
  if (row.replaces !== null) lines.push(`replaces #${row.replaces}`)
  if (row.replacedBy !== null) lines.push(`replaced by #${row.replacedBy}`)
  return lines
}

const esc = (s: string) => s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')
const q = (s: string) => `"${esc(s)}"`

export function renderDot(b: BuiltCase): string {
  const { golden: c, index } = b
  const order = nodeOrder(b)
  const nodes = [...index.byId.keys()].sort(order)
  const edges = [...index.graph.edges].sort((x, y) => order(x[0], y[0]) || order(x[1], y[1]))
  const roots = [...index.roots].sort(order)
  const from = c.prevTemplate === null ? 'a new stack' : `a stack at template ${c.prevTemplate}`
  const out = [
    `// ${c.name}: generated by test/engine/graph-golden.test.ts from case.yaml and the templates.`,
    '// Regenerate with UPDATE_GOLDEN=1 and review the difference (README.md).',
    '// "X -> Y": X waits for Y (Y runs first). Solid boxes: update nodes; dashed: cleanup nodes.',
    `digraph ${q(c.name)} {`,
    `  // ${c.action}: ${from} converges to template ${c.targetTemplate}${b.emptyTarget ? ', which has no resources' : ''}`,
    `  // leaves, cast first in this order: ${index.leaves.map((id) => label(b, id)).join(', ') || '(none)'}`,
    `  // roots, which report to the stack: ${roots.map((id) => label(b, id)).join(', ') || '(none)'}`,
  ]
  if (b.cycle) out.push(`  // CYCLE, the traversal would not start: ${b.cycle.map((id) => label(b, id)).join(' -> ')}`)
  if (nodes.length) out.push('')
  for (const id of nodes) {
    const style = parseNodeId(id).update ? 'shape=box' : 'shape=box, style=dashed'
    out.push(`  ${q(label(b, id))} [${style}, label="${nodeLines(b, id).map(esc).join('\\n')}"]`)
  }
  if (edges.length) out.push('')
  for (const [x, y] of edges) out.push(`  ${q(label(b, x))} -> ${q(label(b, y))}`)
  out.push('}', '')
  return out.join('\n')
}

// ---- Heat's graphs ----

/**
 * A graph in a form where Kiln's and Heat's row ids do not matter: each row
 * is named by its resource name and its rank among the rows of that name in
 * the graph (1 = the oldest), e.g. `C.2 cleanup` for the newer C row's cleanup.
 */
export interface ComparableGraph {
  nodes: string[]
  edges: string[]
  leaves: string[]
}

function comparable(nodes: { name: string; rid: number; update: boolean }[], edges: [number, number][], leaves: number[]): ComparableGraph {
  const ridsByName = new Map<string, number[]>()
  for (const n of nodes) {
    const list = ridsByName.get(n.name) ?? []
    if (!list.includes(n.rid)) list.push(n.rid)
    ridsByName.set(n.name, list)
  }
  for (const list of ridsByName.values()) list.sort((a, b) => a - b)
  const text = (i: number) => {
    const n = nodes[i]!
    return `${n.name}.${ridsByName.get(n.name)!.indexOf(n.rid) + 1} ${n.update ? 'update' : 'cleanup'}`
  }
  return {
    nodes: nodes.map((_, i) => text(i)).sort(),
    edges: edges.map(([x, y]) => `${text(x)} -> ${text(y)}`).sort(),
    leaves: leaves.map(text).sort(),
  }
}

export function comparableKiln(b: BuiltCase): ComparableGraph {
  const ids = [...b.index.byId.keys()]
  const at = new Map(ids.map((id, i) => [id, i]))
  const nodes = ids.map((id) => {
    const k = parseNodeId(id)
    return { name: b.rows.get(k.rid)!.name, rid: k.rid, update: k.update }
  })
  return comparable(nodes, b.index.graph.edges.map(([x, y]) => [at.get(x)!, at.get(y)!]), b.index.leaves.map((id) => at.get(id)!))
}

/** `C#3(c)->A#5; B#4(c)` as Heat's trace prints a graph; `A#5, B#4(c)` its leaves. */
export function comparableHeat(ref: HeatReference): ComparableGraph {
  const nodes: { name: string; rid: number; update: boolean }[] = []
  const at = new Map<string, number>()
  const node = (token: string): number => {
    const m = /^([A-Za-z][\w-]*)#(\d+)(\(c\))?$/.exec(token.trim())
    if (!m) throw new Error(`${ref.scenario} ${ref.traversal}: cannot read node "${token}"`)
    const key = `${m[2]}${m[3] ? 'c' : 'u'}`
    if (!at.has(key)) {
      at.set(key, nodes.length)
      nodes.push({ name: m[1]!, rid: Number(m[2]), update: !m[3] })
    }
    return at.get(key)!
  }
  const edges: [number, number][] = []
  for (const part of ref.graph.split(';').map((s) => s.trim()).filter(Boolean)) {
    const [x, y] = part.split('->')
    if (y === undefined) node(x!)
    else edges.push([node(x!), node(y)])
  }
  const leaves = ref.leaves.split(',').map((s) => s.trim()).filter(Boolean).map(node)
  return comparable(nodes, edges, leaves)
}

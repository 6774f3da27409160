'use client'
/**
 * The traversal drawn with Cytoscape.
 *
 * Laid out once per graph shape (lib/ui/layout: positions are kept by
 * resource name from one traversal to the next); live changes restyle only
 * the nodes (or groups) whose look changed, in one batch, before the frame is
 * painted; a replacement is added beside the row it replaces. Big graphs use
 * Cytoscape's own economies: straight "haystack" edges, edges and labels
 * hidden and the scene drawn from a texture while panning and zooming,
 * device pixel ratio 1, no motion blur; labels too small to read are not
 * drawn (the counts bar over the graph says how many nodes are in each state).
 * Zoomed out past reading (and not grouped), a big graph's node states are
 * painted on the page's own canvas (state-painter.ts): a live step repaints
 * the nodes it changed, where Cytoscape would redraw all 1,000.
 */
import cytoscape, { type Core, type ElementDefinition } from 'cytoscape'
import { useEffect, useImperativeHandle, useLayoutEffect, useRef, type KeyboardEvent, type RefObject } from 'react'
import { stateCounts, type GraphModel, type NodeState } from '../lib/ui/graph-model'
import { placeBeside, type KeptLayout, type Point } from '../lib/ui/layout'
import { buildView, GROUP_SIZE, summarise, type GroupBy, type ViewGraph } from '../lib/ui/view-graph'
import { DRIFT_ICON, isDrifted } from '../lib/ui/drift'
import { countsLine, driftClass, NODE_SIZE, nodeLabel, stylesheet, type Theme } from './graph-style'
import { Minimap } from './Minimap'
import { probeMark, reportPainted, reportShown } from './perf-probe'
import { StatePainter, type PaintedNode } from './state-painter'

/** Above this many nodes Cytoscape's economies are on. */
export const BIG_GRAPH = 300
/**
 * In a big graph, edges are drawn only from this zoom on: further out they are a grey haze. They are
 * then taken out of Cytoscape, not hidden: its renderer visits every element it holds on every frame,
 * hidden or not, and 1,800 hidden edges double the cost of redrawing 1,000 nodes.
 */
const EDGES_FROM_ZOOM = 0.3
const MINIMAP_ABOVE = 200
/** Between live steps that make Cytoscape redraw a big graph (each redraws every node it holds). */
const BIG_STEP_SPACING_MS = 100

export interface GraphHandle {
  zoomBy(factor: number): void
  fit(ids?: string[]): void
  actualSize(): void
  panBy(dx: number, dy: number): void
  /** How long the page should wait between live steps: a step that makes Cytoscape redraw a big graph costs a redraw of every node. */
  stepSpacingMs(): number
}

interface Props {
  /** the graph's controls (zoom, fit, pan) for the toolbar */
  handle: RefObject<GraphHandle | null>
  model: GraphModel | null
  version: number
  dirty: Set<string>
  groupBy: GroupBy
  expanded: ReadonlySet<string>
  onToggleGroup: (id: string) => void
  /** nodes matching the search or filter (others are dimmed); null: no search */
  highlight: ReadonlySet<string> | null
  critical: string[]
  selected: string | null
  onSelect: (id: string | null) => void
  theme: Theme
  /** the tooltip of a node: its latest event in plain words */
  describe: (id: string) => string
}

interface Drawn {
  /** the drawing's elements (ids, parents, edges): equal signatures need no new elements */
  sig: string
  view: ViewGraph
  /** per drawn unit, the label and state class it has */
  label: Map<string, string>
  state: Map<string, string>
  /**
   * Units whose Cytoscape element is behind `label`/`state` (the state painter shows them), with what the
   * element still carries; they catch up when Cytoscape draws the states again.
   */
  behind: Map<string, { label: string; cls: string }>
  crit: Set<string>
  highlight: ReadonlySet<string> | null
  selected: string | null
}

/** What decides which elements a view has: its units (with their parents) and edges. */
function signature(v: ViewGraph): string {
  return `${v.units.map((u) => `${u.id}<${u.parent ?? ''}`).join(',')}|${v.edges.map((e) => e.id).join(',')}`
}

/**
 * Gives a unit its label and state class, touching Cytoscape only for what changed. `painted`: the
 * state painter shows the unit, so its element is left behind (Cytoscape would redraw every node).
 */
function restyle(el: cytoscape.CollectionReturnValue, d: Drawn, id: string, look: { label: string; cls: string }, painted: boolean) {
  if (el.empty()) return
  const has = d.behind.get(id) ?? { label: d.label.get(id) ?? '', cls: d.state.get(id) ?? '' }
  d.label.set(id, look.label)
  d.state.set(id, look.cls)
  if (painted) {
    if (!d.behind.has(id)) d.behind.set(id, has)
    return
  }
  d.behind.delete(id)
  if (has.label !== look.label) el.data('label', look.label)
  if (has.cls !== look.cls) {
    if (has.cls) el.removeClass(has.cls)
    el.addClass(look.cls)
  }
}

/** Whether the state painter shows the nodes now: a big graph zoomed out past reading, not grouped. */
function painting(c: Core, d: Drawn | null): boolean {
  return Boolean(c.scratch('far')) && d !== null && d.view.groups.size === 0
}

/** A node as the state painter draws it (its state and drift from its class, as Cytoscape would). */
function paintedNode(d: Drawn, id: string): PaintedNode | null {
  const at = d.view.positions.get(id)
  const cls = d.state.get(id)
  if (!at || !cls) return null
  const words = cls.split(' ')
  const drift = words.find((w) => w.startsWith('d-'))?.slice(2)
  return {
    x: at.x, y: at.y, state: words[0]!.slice(2) as NodeState, drift: drift === 'modified' || drift === 'deleted' ? drift : null, crit: d.crit.has(id),
    dim: d.highlight !== null && !d.highlight.has(id),
    halo: d.selected === id ? 'selected' : d.highlight?.size && d.highlight.has(id) ? 'match' : null,
  }
}

/** The node whose box holds a point of the graph (in a drawing without groups: units are nodes), if any. */
function nodeAt(d: Drawn, at: Point): string | null {
  for (const u of d.view.units) {
    const p = d.view.positions.get(u.id)
    if (p && Math.abs(at.x - p.x) <= NODE_SIZE.w / 2 && Math.abs(at.y - p.y) <= NODE_SIZE.h / 2) return u.id
  }
  return null
}

/** Paints every node and the critical path's edges, in Cytoscape's current viewport. */
function paintAll(c: Core, d: Drawn, painter: StatePainter, theme: Theme) {
  painter.setViewport({ zoom: c.zoom(), pan: c.pan(), width: c.width(), height: c.height() })
  const nodes: PaintedNode[] = []
  for (const u of d.view.units) {
    const n = u.kind === 'node' ? paintedNode(d, u.id) : null
    if (n) nodes.push(n)
  }
  const edges: [Point, Point][] = []
  for (const id of d.crit) {
    const [s, t] = id.split('->')
    const a = t ? d.view.positions.get(s!) : undefined
    const b = t ? d.view.positions.get(t) : undefined
    if (a && b) edges.push([a, b])
  }
  painter.paintAll(nodes, edges, d.highlight !== null, theme)
}

/**
 * A unit's label and state class. In a big graph a node's label is its name
 * alone: it then never changes, so a state change costs Cytoscape no new label
 * measurement or texture (the state is in the node's fill, border and shape,
 * and in words in the table and the tooltip).
 */
function unitLook(model: GraphModel, view: ViewGraph, id: string, expanded: boolean): { label: string; cls: string } {
  const n = model.nodes.get(id)
  if (n) {
    // A drifted node keeps its state class and gains an outline class and an icon (a big graph's label: its name, after the icon).
    const label = model.nodes.size > BIG_GRAPH ? (isDrifted(n.drift) ? `${DRIFT_ICON[n.drift!.state as 'MODIFIED' | 'DELETED']} ${n.name}` : n.name) : nodeLabel(n)
    return { label, cls: `s-${n.state}${driftClass(n)}` }
  }
  const g = view.groups.get(id)!
  const s = summarise(model, g.members)
  if (expanded) return { label: `${g.label} · ${s.done} of ${s.total} done  (tap here to collapse)`, cls: 'box' }
  return { label: `${g.label} (${s.total})\n${countsLine(s.counts)}`, cls: `group s-${s.state}` }
}

export function LiveGraph(p: Props) {
  const host = useRef<HTMLDivElement>(null)
  const cyRef = useRef<Core | null>(null)
  const drawn = useRef<Drawn | null>(null)
  const painter = useRef<StatePainter | null>(null)
  const fullPaint = useRef(false)
  const kept = useRef<KeptLayout | null>(null)
  const props = useRef(p)
  props.current = p
  const big = (p.model?.nodes.size ?? 0) > BIG_GRAPH

  useImperativeHandle(p.handle, () => ({
    zoomBy(f) {
      const c = cyRef.current
      if (!c) return
      c.zoom({ level: Math.min(c.maxZoom(), Math.max(c.minZoom(), c.zoom() * f)), renderedPosition: { x: c.width() / 2, y: c.height() / 2 } })
    },
    fit(ids) {
      const c = cyRef.current
      if (!c) return
      const v = drawn.current?.view
      const units = ids && v ? [...new Set(ids.map((id) => v.shownBy.get(id) ?? id))] : null
      let els = units ? c.collection() : c.elements()
      for (const id of units ?? []) els = els.union(c.getElementById(id))
      if (els.nonempty()) c.fit(els, 30)
      if (c.zoom() > 1.5) c.zoom({ level: 1.5, renderedPosition: { x: c.width() / 2, y: c.height() / 2 } })
    },
    actualSize() {
      cyRef.current?.zoom({ level: 1, renderedPosition: { x: cyRef.current.width() / 2, y: cyRef.current.height() / 2 } })
    },
    panBy(dx, dy) {
      cyRef.current?.panBy({ x: dx, y: dy })
    },
    stepSpacingMs() {
      // (asked at every event batch: nothing here walks the elements)
      const c = cyRef.current
      return c && (props.current.model?.nodes.size ?? 0) > BIG_GRAPH && !painting(c, drawn.current) ? BIG_STEP_SPACING_MS : 0
    },
  }))

  /** Every node painted again once this commit's effects are done (several of them may ask in one commit). */
  const paintAllSoon = () => {
    if (fullPaint.current) return
    fullPaint.current = true
    queueMicrotask(() => {
      fullPaint.current = false
      const [c, d, sp] = [cyRef.current, drawn.current, painter.current]
      if (c && d && sp && painting(c, d)) paintAll(c, d, sp, props.current.theme)
    })
  }

  // One Cytoscape per size class: its economies are set when it is created.
  useLayoutEffect(() => {
    if (!host.current) return
    probeMark('cy')
    const c = cytoscape({
      container: host.current, style: stylesheet(props.current.theme, big), minZoom: 0.02, maxZoom: 4,
      boxSelectionEnabled: false, autoungrabify: true, autounselectify: true, motionBlur: false,
      textureOnViewport: big, hideEdgesOnViewport: big, hideLabelsOnViewport: big, pixelRatio: big ? 1 : 'auto',
    } as cytoscape.CytoscapeOptions)
    c.on('tap', 'node', (e) => {
      const id = e.target.id() as string
      const v = drawn.current?.view
      if (v?.groups.has(id)) props.current.onToggleGroup(id)
      else props.current.onSelect(id)
    })
    // While the state painter shows the nodes, Cytoscape holds them hidden (it would build a texture for each, and
    // visit them on every frame): a tap or a hover on the background finds the node under it from the layout.
    const under = (e: cytoscape.EventObject) => (painting(c, drawn.current) ? nodeAt(drawn.current!, e.position) : null)
    c.on('tap', (e) => e.target === c && props.current.onSelect(under(e)))
    c.on('mouseover', 'node', (e) => host.current?.setAttribute('title', props.current.describe(e.target.id())))
    c.on('mouseout', 'node', () => host.current?.removeAttribute('title'))
    c.on('mousemove', (e) => {
      if (e.target !== c || !painting(c, drawn.current)) return
      const id = under(e)
      if (id) host.current?.setAttribute('title', props.current.describe(id))
      else host.current?.removeAttribute('title')
    })
    let frame = 0
    if (big) {
      const sp = new StatePainter(host.current)
      painter.current = sp
      // Panned, zoomed or resized: nearer or further than reading, and the painted states follow the viewport.
      c.on('viewport resize', () => {
        frame ||= requestAnimationFrame(() => {
          frame = 0
          const d = drawn.current
          if (!d) return
          setFar(c, d, c.zoom() < EDGES_FROM_ZOOM)
          if (painting(c, d)) paintAll(c, d, sp, props.current.theme)
          else sp.clear()
        })
      })
    }
    c.scratch('theme', props.current.theme)
    cyRef.current = c
    drawn.current = null
    return () => {
      cancelAnimationFrame(frame)
      painter.current?.destroy()
      painter.current = null
      c.destroy()
      cyRef.current = null
    }
  }, [big])

  // Another theme restyles the drawing; a new Cytoscape already has its theme's stylesheet (setting it
  // again parses it all and restyles every element, a tenth of a second for 1,000 nodes on a busy machine).
  useEffect(() => {
    const c = cyRef.current
    if (!c || c.scratch('theme') === p.theme) return
    c.style(stylesheet(p.theme, big))
    c.scratch('theme', p.theme)
    paintAllSoon()
  }, [p.theme, big])

  const expandedKey = [...p.expanded].sort().join('|')
  // Structure: a new traversal, another grouping, a group opened or closed. A new traversal of
  // the same drawing (same rows, same edges: an update in place) keeps every element and only
  // restyles, instead of removing and adding them all again.
  useLayoutEffect(() => {
    const c = cyRef.current
    const m = p.model
    if (!c) return
    if (!m) {
      c.elements().remove()
      painter.current?.clear()
      drawn.current = null
      return
    }
    const started = performance.now()
    probeMark('structure')
    const previous = kept.current
    const view = buildView(m, p.groupBy, p.expanded, previous)
    probeMark('view')
    if (view.kept) kept.current = view.kept
    const sig = signature(view)
    const old = drawn.current
    if (old && old.sig === sig) {
      old.view = view
      const painted = painting(c, old)
      c.batch(() => {
        for (const u of view.units) {
          const el = c.getElementById(u.id)
          restyle(el, old, u.id, unitLook(m, view, u.id, u.kind === 'box'), painted && u.kind === 'node')
          const at = view.positions.get(u.id)
          if (at && u.kind !== 'box' && (el.position('x') !== at.x || el.position('y') !== at.y)) el.position({ ...at })
        }
      })
    } else {
      c.elements().remove()
      const d: Drawn = { sig, view, label: new Map(), state: new Map(), behind: new Map(), crit: new Set(), highlight: null, selected: null }
      const els: ElementDefinition[] = []
      for (const u of view.units) {
        const look = unitLook(m, view, u.id, u.kind === 'box')
        d.label.set(u.id, look.label)
        d.state.set(u.id, look.cls)
        els.push({ group: 'nodes', data: { id: u.id, label: look.label, ...(u.parent ? { parent: u.parent } : {}) }, classes: look.cls, ...(u.kind === 'box' ? {} : { position: { ...view.positions.get(u.id)! } }) })
      }
      host.current?.removeAttribute('data-painted')
      // The viewport is kept when the drawing is the same shape as before (a new traversal of the same stack).
      if (!previous || previous !== view.kept || c.zoom() === 1) fitPositions(c, view.positions)
      const far = big && c.zoom() < EDGES_FROM_ZOOM
      c.scratch('far', far)
      // Far out the nodes carry no label; when the state painter shows them, Cytoscape holds them hidden.
      const farClasses = painting(c, d) ? ' nl fc' : ' nl'
      if (far) for (const [i, u] of view.units.entries()) if (u.kind === 'node') els[i]!.classes = `${els[i]!.classes}${farClasses}`
      if (!far) for (const e of view.edges) els.push(edgeElement(e, false))
      if (painting(c, d) && !c.scratch('deferred')) {
        // The painter shows the nodes in this frame; Cytoscape's styling of its (hidden) nodes would make it a long
        // one, so they wait in a batch until the painted frame is on screen.
        c.startBatch()
        c.scratch('deferred', true)
        requestAnimationFrame(() =>
          setTimeout(() => {
            if (c.destroyed()) return
            c.scratch('deferred', false)
            c.endBatch()
          }),
        )
      }
      c.add(els)
      drawn.current = d
    }
    const d = drawn.current!
    if (painting(c, d)) paintAllSoon()
    else painter.current?.clear()
    p.dirty.clear()
    probeMark('drawn')
    host.current?.setAttribute('data-layout-ms', String(Math.round(performance.now() - started)))
    host.current?.setAttribute('data-traversal', m.traversalId)
    host.current?.setAttribute('data-view', view.groups.size ? 'grouped' : 'nodes')
    host.current?.setAttribute('data-units', String(view.units.length))
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [p.model, p.groupBy, expandedKey, big])

  // Live changes: the units whose look changed, one batch; replacements beside their rows.
  useLayoutEffect(() => {
    const c = cyRef.current
    const m = p.model
    const d = drawn.current
    if (!c || !m || !d) return
    const touched = new Set<string>()
    const added: string[] = []
    for (const id of p.dirty) {
      const unit = d.view.shownBy.get(id)
      if (unit) touched.add(unit)
      else if (m.nodes.has(id)) added.push(id)
    }
    p.dirty.clear()
    const painted = painting(c, d)
    c.batch(() => {
      for (const id of added) {
        const unit = addReplacement(c, m, d, id, p.expanded)
        if (unit) touched.add(unit)
      }
      if (added.length) d.sig = signature(d.view)
      for (const id of touched) {
        const el = c.getElementById(id)
        if (el.empty()) continue
        restyle(el, d, id, unitLook(m, d.view, id, d.view.groups.has(id) && p.expanded.has(id)), painted && !d.view.groups.has(id))
      }
    })
    // The state painter repaints the changed nodes only (a replacement may have moved its neighbours: all of them).
    const sp = painter.current
    if (painted && sp && (added.length || touched.size)) {
      if (added.length) paintAllSoon()
      else if (!fullPaint.current) sp.paintSome([...touched].flatMap((id) => paintedNode(d, id) ?? []), p.theme)
    }
    // What is drawn, per state (the browser tests and the bench compare it with the table and the badge).
    host.current?.setAttribute('data-drawn', JSON.stringify(stateCounts(m)))
    // ... and which nodes are drawn with a drift mark, by name.
    host.current?.setAttribute('data-drifted', JSON.stringify(driftedNames(m, d)))
    host.current?.setAttribute('data-represented', String(m.nodes.size))
    const seq = m.lastSeq
    const size = m.nodes.size
    const paint = () => {
      // What the canvas shows now (the bench's first full render waits for this, not for the batch).
      host.current?.setAttribute('data-painted', String(size))
      reportPainted(seq)
    }
    const first = !host.current?.hasAttribute('data-painted')
    // Painted on the page's own canvas: on screen with the frame being made now, reported as the next one starts.
    if (painted && (first || touched.size || added.length)) requestAnimationFrame(paint)
    else if (!painted && (first || touched.size)) c.one('render', paint)
    else reportShown(seq)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [p.version, p.model, p.groupBy, expandedKey, big])

  // Search and filters: matches stand out, the rest fade.
  useLayoutEffect(() => {
    const c = cyRef.current
    const d = drawn.current
    if (!c || !d) return
    const hl = p.highlight
    // Nothing searched before or now: nothing to restyle (a rebuilt drawing starts plain).
    if (hl === null && d.highlight === null) return
    const units = hl ? new Set([...hl].map((id) => d.view.shownBy.get(id) ?? id)) : null
    c.batch(() => {
      c.nodes().forEach((el) => {
        const on = units ? units.has(el.id()) : false
        el.toggleClass('match', on && (units?.size ?? 0) > 0)
        el.toggleClass('dim', units !== null && !on && !el.isParent())
      })
      c.edges().toggleClass('dim', units !== null)
    })
    d.highlight = hl
    // (another theme repaints in the theme's own effect)
    paintAllSoon()
  }, [p.highlight, p.model, p.groupBy, expandedKey, big])

  // The critical path: its nodes and the edges between them in amber.
  const critKey = p.critical.join(',')
  useLayoutEffect(() => {
    const c = cyRef.current
    const d = drawn.current
    if (!c || !d) return
    const next = new Set<string>()
    p.critical.forEach((id, i) => {
      next.add(id)
      if (i > 0) next.add(`${p.critical[i - 1]}->${id}`)
    })
    if (painter.current && painting(c, d)) {
      // Painted (Cytoscape's critical path catches up when it draws the states again).
      d.crit = next
      paintAllSoon()
      return
    }
    c.batch(() => {
      for (const id of d.crit) if (!next.has(id)) keepEdgeOut(c, c.getElementById(id).removeClass('crit'))
      for (const id of next) if (!d.crit.has(id)) edgeIn(c, d.view, id).addClass('crit')
    })
    d.crit = next
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [critKey, p.model, p.groupBy, expandedKey, big])

  useLayoutEffect(() => {
    const c = cyRef.current
    const d = drawn.current
    if (!c || !d) return
    const was = d.selected
    if (was) c.getElementById(was).removeClass('sel')
    const unit = p.selected ? (d.view.shownBy.get(p.selected) ?? p.selected) : null
    if (unit) c.getElementById(unit).addClass('sel')
    d.selected = unit
    if (painter.current && painting(c, d) && was !== unit) {
      painter.current.paintSome([was, unit].flatMap((id) => (id ? (paintedNode(d, id) ?? []) : [])), props.current.theme)
    }
  }, [p.selected, p.model, p.groupBy, expandedKey, big])

  const onKey = (e: KeyboardEvent<HTMLDivElement>) => {
    const c = cyRef.current
    if (!c) return
    const step = e.shiftKey ? 240 : 60
    const keys: Record<string, () => void> = {
      '+': () => c.zoom({ level: Math.min(4, c.zoom() * 1.25), renderedPosition: { x: c.width() / 2, y: c.height() / 2 } }),
      '=': () => c.zoom({ level: Math.min(4, c.zoom() * 1.25), renderedPosition: { x: c.width() / 2, y: c.height() / 2 } }),
      '-': () => c.zoom({ level: Math.max(0.02, c.zoom() / 1.25), renderedPosition: { x: c.width() / 2, y: c.height() / 2 } }),
      '0': () => c.fit(undefined, 24),
      ArrowLeft: () => c.panBy({ x: step, y: 0 }),
      ArrowRight: () => c.panBy({ x: -step, y: 0 }),
      ArrowUp: () => c.panBy({ x: 0, y: step }),
      ArrowDown: () => c.panBy({ x: 0, y: -step }),
    }
    const act = keys[e.key]
    if (!act) return
    e.preventDefault()
    act()
  }

  return (
    <div className="graph-wrap">
      <div
        ref={host}
        className="graph"
        data-testid="graph"
        tabIndex={0}
        role="application"
        aria-roledescription="graph"
        aria-label="traversal graph: + and - zoom, arrow keys pan, 0 fits; every node is also a row of the resources table"
        onKeyDown={onKey}
      />
      {(p.model?.nodes.size ?? 0) > MINIMAP_ABOVE && (
        <Minimap cy={cyRef} source={() => (drawn.current ? { positions: drawn.current.view.positions, state: drawn.current.state } : null)} version={p.version} theme={p.theme} />
      )}
    </div>
  )
}

function edgeElement(e: ViewGraph['edges'][number], dim: boolean): ElementDefinition {
  return { group: 'edges', data: { id: e.id, source: e.source, target: e.target }, classes: `${e.kind === 'replaces' ? 'replaces' : ''}${dim ? ' dim' : ''}` }
}

/**
 * Far out (a big graph below EDGES_FROM_ZOOM) the edges leave Cytoscape, all but the critical
 * path's, and the nodes' labels go (graph-style's `nl`); nearer they come back, the edges from
 * the view (dimmed if a search is on).
 */
function setFar(c: Core, d: Drawn, far: boolean) {
  if (far === Boolean(c.scratch('far'))) return
  const wasPainting = painting(c, d)
  c.scratch('far', far)
  const nowPainting = painting(c, d)
  c.batch(() => {
    const nodes = c.nodes().not('.group, .box')
    nodes.toggleClass('nl', far)
    if (nowPainting) {
      // The state painter takes the nodes' states and the critical path over.
      nodes.addClass('fc')
      c.edges().remove()
      return
    }
    if (far) c.edges().not('.crit').remove()
    else c.add(d.view.edges.filter((e) => c.getElementById(e.id).empty()).map((e) => edgeElement(e, d.highlight !== null)))
    if (!wasPainting) return
    // Cytoscape draws the states again: the nodes left behind and the critical path catch up.
    nodes.removeClass('fc')
    for (const id of [...d.behind.keys()]) restyle(c.getElementById(id), d, id, { label: d.label.get(id)!, cls: d.state.get(id)! }, false)
    c.nodes('.crit').forEach((n) => void (d.crit.has(n.id()) || n.removeClass('crit')))
    for (const id of d.crit) edgeIn(c, d.view, id).addClass('crit')
  })
}

/** An edge that is not to be drawn now (far out, not on the critical path) leaves Cytoscape. */
function keepEdgeOut(c: Core, e: cytoscape.CollectionReturnValue) {
  if (c.scratch('far') && e.nonempty() && e.isEdge() && !e.hasClass('crit')) e.remove()
}

/** An edge by id, added from the view if it was left out (the critical path is drawn at every zoom). */
function edgeIn(c: Core, v: ViewGraph, id: string): cytoscape.CollectionReturnValue {
  const el = c.getElementById(id)
  if (el.nonempty() || !c.scratch('far')) return el
  const e = v.edges.find((x) => x.id === id)
  return e ? c.add(edgeElement(e, false)) : el
}

/** The nodes drawn with a drift mark now, by name and kind (what the canvas shows, for the browser tests). */
function driftedNames(m: GraphModel, d: Drawn): Record<string, string> {
  const out: Record<string, string> = {}
  for (const [id, cls] of d.state) {
    if (!cls.includes(' d-')) continue
    out[m.nodes.get(id)?.name ?? id] = cls.slice(cls.indexOf(' d-') + 3)
  }
  return out
}

/**
 * Fits the viewport to the laid-out positions (Cytoscape's own fit measures
 * every label first; the boxes' sizes are known). A small graph is shown at
 * natural size, not blown up to fill the panel.
 */
function fitPositions(c: Core, positions: Map<string, Point>) {
  let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity]
  for (const p of positions.values()) [x0, y0, x1, y1] = [Math.min(x0, p.x), Math.min(y0, p.y), Math.max(x1, p.x), Math.max(y1, p.y)]
  if (!Number.isFinite(x0)) return
  const pad = 24
  const w = x1 - x0 + GROUP_SIZE.w + 2 * pad
  const h = y1 - y0 + GROUP_SIZE.h + 2 * pad
  const zoom = Math.min(1, c.width() / w, c.height() / h)
  c.viewport({ zoom, pan: { x: c.width() / 2 - ((x0 + x1) / 2) * zoom, y: c.height() / 2 - ((y0 + y1) / 2) * zoom } })
}

/** A replacement row appeared: beside the row it replaces (or into that row's collapsed group). Returns the unit to restyle. */
function addReplacement(c: Core, m: GraphModel, d: Drawn, id: string, expanded: ReadonlySet<string>): string | null {
  const n = m.nodes.get(id)!
  const old = n.replaces !== null ? `r${n.replaces}` : null
  const v = d.view
  const shownOld = old ? v.shownBy.get(old) : undefined
  let unit: string
  if (shownOld && v.groups.has(shownOld) && !expanded.has(shownOld)) {
    v.groups.get(shownOld)!.members.push(id)
    v.shownBy.set(id, shownOld)
    unit = shownOld
  } else {
    const parent = old ? (c.getElementById(old).data('parent') as string | undefined) : undefined
    if (parent) v.groups.get(parent)?.members.push(id)
    const before = new Map<string, Point>()
    for (const [k, pt] of v.positions) before.set(k, pt)
    const at = placeBeside(v.positions, old ?? '', id)
    for (const [k, pt] of v.positions) {
      const was = before.get(k)
      if (was && (was.x !== pt.x || was.y !== pt.y)) c.getElementById(k).position({ ...pt })
    }
    const look = unitLook(m, v, id, false)
    c.add({ group: 'nodes', data: { id, label: look.label, ...(parent ? { parent } : {}) }, classes: `${look.cls}${painting(c, d) ? ' nl fc' : c.scratch('far') ? ' nl' : ''}`, position: { ...at } })
    d.label.set(id, look.label)
    d.state.set(id, look.cls)
    v.units.push({ id, kind: 'node', parent: parent ?? null })
    v.shownBy.set(id, id)
    unit = id
  }
  for (const e of m.edges) {
    if (e.source !== id && e.target !== id) continue
    const s = v.shownBy.get(e.source)
    const t = v.shownBy.get(e.target)
    if (!s || !t || s === t) continue
    const eid = `${s}${e.kind === 'replaces' ? '=>' : '->'}${t}`
    if (c.getElementById(eid).nonempty()) continue
    v.edges.push({ id: eid, source: s, target: t, kind: e.kind })
    if (!c.scratch('far')) c.add(edgeElement({ id: eid, kind: e.kind, source: s, target: t }, d.highlight !== null))
  }
  return unit
}

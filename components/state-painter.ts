/**
 * The node states of a big graph zoomed out, painted on a canvas of the
 * page's own over Cytoscape's.
 *
 * Why: Cytoscape redraws every element it holds whenever one changes (its
 * layered textures are skipped while elements keep changing), so while a
 * 1,000-node traversal streams, each step cost a full redraw, a long frame on
 * a busy machine, and the page's events waited behind it. Zoomed out past
 * reading, Cytoscape keeps the nodes hidden (it builds no texture for them
 * and draws nothing) and is not told of state changes; this canvas paints
 * each node in its state's fill, border and shape (the same looks as
 * graph-style's stylesheet) with its selection or search halo, and a step
 * repaints only the nodes it changed. The critical path's edges are painted
 * here too, under the nodes. Zooming in hands the states back to Cytoscape.
 *
 * Pointer events pass through to Cytoscape (LiveGraph finds the node under a
 * tap or a hover from the layout); the canvases are presentational (the
 * graph's container carries the accessible name, and every node is a row of
 * the resources table).
 */
import type { NodeState } from '../lib/ui/graph-model'
import type { Point } from '../lib/ui/layout'
import { DRIFT_COLOR, lookOf, NODE_SIZE, type StateLook, type Theme } from './graph-style'

export interface PaintedNode {
  x: number
  y: number
  state: NodeState
  drift: 'modified' | 'deleted' | null
  crit: boolean
  /** a search is on and the node does not match it */
  dim: boolean
  /** the halo over it: the selected node, or one a search matched */
  halo: 'selected' | 'match' | null
}

export interface Viewport {
  zoom: number
  pan: { x: number; y: number }
  width: number
  height: number
}

/** How far a node's paint reaches beyond its box (its drift outline), in graph units: what a repaint clears. */
const REACH = 9

export class StatePainter {
  private readonly edges: HTMLCanvasElement
  private readonly nodes: HTMLCanvasElement
  private vp: Viewport = { zoom: 1, pan: { x: 0, y: 0 }, width: 0, height: 0 }

  constructor(host: HTMLElement) {
    const make = (z: string) => {
      const c = document.createElement('canvas')
      c.setAttribute('aria-hidden', 'true')
      c.style.cssText = `position:absolute;left:0;top:0;pointer-events:none;z-index:${z}`
      host.appendChild(c)
      return c
    }
    this.edges = make('10')
    this.nodes = make('11')
    this.nodes.dataset.testid = 'state-canvas'
  }

  destroy() {
    this.edges.remove()
    this.nodes.remove()
  }

  /** Follows Cytoscape's viewport (the caller repaints everything after). */
  setViewport(vp: Viewport) {
    for (const c of [this.edges, this.nodes]) {
      if (c.width !== vp.width || c.height !== vp.height) {
        c.width = vp.width
        c.height = vp.height
        c.style.width = `${vp.width}px`
        c.style.height = `${vp.height}px`
      }
    }
    this.vp = vp
  }

  /** Nothing painted (Cytoscape draws the states): asked on every pan while zoomed in, so a no-op when already clear. */
  clear() {
    if (this.nodes.dataset.painted === undefined) return
    for (const c of [this.edges, this.nodes]) c.getContext('2d')?.clearRect(0, 0, c.width, c.height)
    delete this.nodes.dataset.painted
  }

  /** Everything again: after a viewport change, a new drawing, another theme or search. */
  paintAll(nodes: PaintedNode[], critEdges: [Point, Point][], dimEdges: boolean, theme: Theme) {
    this.paintEdges(critEdges, dimEdges)
    const ctx = this.nodes.getContext('2d')
    if (!ctx) return
    ctx.clearRect(0, 0, this.nodes.width, this.nodes.height)
    this.paintNodes(ctx, nodes, theme)
    this.nodes.dataset.painted = String(nodes.length)
  }

  /** The given nodes only: each one's box (and outline) cleared and painted again; nodes never overlap. */
  paintSome(nodes: PaintedNode[], theme: Theme) {
    const ctx = this.nodes.getContext('2d')
    if (!ctx) return
    const { zoom } = this.vp
    for (const p of nodes) {
      const [x, y] = this.at(p)
      const w = (NODE_SIZE.w / 2 + REACH) * zoom + 1
      const h = (NODE_SIZE.h / 2 + REACH) * zoom + 1
      ctx.clearRect(x - w, y - h, 2 * w, 2 * h)
    }
    this.paintNodes(ctx, nodes, theme)
  }

  private at(p: Point): [number, number] {
    return [p.x * this.vp.zoom + this.vp.pan.x, p.y * this.vp.zoom + this.vp.pan.y]
  }

  private paintEdges(edges: [Point, Point][], dim: boolean) {
    const ctx = this.edges.getContext('2d')
    if (!ctx) return
    ctx.clearRect(0, 0, this.edges.width, this.edges.height)
    if (!edges.length) return
    ctx.save()
    ctx.globalAlpha = dim ? 0.1 : 1
    ctx.strokeStyle = '#f59e0b'
    ctx.lineWidth = Math.max(1, 3.5 * this.vp.zoom)
    ctx.beginPath()
    for (const [a, b] of edges) {
      ctx.moveTo(...this.at(a))
      ctx.lineTo(...this.at(b))
    }
    ctx.stroke()
    ctx.restore()
  }

  /**
   * Nodes in the viewport, in as few canvas calls as their looks allow: the nodes that share a fill are one path
   * filled once, those that share a border one path stroked once (a fill or stroke per node cost a millisecond per
   * thirty nodes on a busy machine); drift outlines and halos, on a few nodes, follow.
   */
  private paintNodes(ctx: CanvasRenderingContext2D, nodes: PaintedNode[], theme: Theme) {
    const z = this.vp.zoom
    const hw = (NODE_SIZE.w / 2) * z
    const hh = (NODE_SIZE.h / 2) * z
    const m = REACH * z
    const fills = new Map<string, { color: string; alpha: number; at: [number, number, string][] }>()
    const borders = new Map<string, { color: string; width: number; style: StateLook['borderStyle']; alpha: number; at: [number, number, string][] }>()
    const marked: [number, number, PaintedNode][] = []
    for (const p of nodes) {
      const [x, y] = this.at(p)
      if (x + hw + m < 0 || y + hh + m < 0 || x - hw - m > this.vp.width || y - hh - m > this.vp.height) continue
      const look = lookOf(p.state, theme)
      const alpha = p.dim ? 0.2 : 1
      const fillAlpha = alpha * (p.drift === 'deleted' ? 0.55 : 1)
      const fk = `${look.color}|${fillAlpha}`
      let f = fills.get(fk)
      if (!f) fills.set(fk, (f = { color: look.color, alpha: fillAlpha, at: [] }))
      f.at.push([x, y, look.shape])
      // The stylesheet's border widths (running and deleting 5, the critical path 4, else 2), never thinner than a pixel.
      const width = Math.max(1, (p.state === 'running' || p.state === 'deleting' ? 5 : p.crit ? 4 : 2) * z)
      const bk = `${look.border}|${width}|${look.borderStyle}|${alpha}`
      let b = borders.get(bk)
      if (!b) borders.set(bk, (b = { color: look.border, width, style: look.borderStyle, alpha, at: [] }))
      b.at.push([x, y, look.shape])
      if (p.drift || p.halo) marked.push([x, y, p])
    }
    ctx.save()
    for (const f of fills.values()) {
      ctx.globalAlpha = f.alpha
      ctx.fillStyle = f.color
      ctx.beginPath()
      for (const [x, y, shape] of f.at) shapePath(ctx, shape, x, y, hw, hh, z)
      ctx.fill()
    }
    for (const b of borders.values()) {
      ctx.globalAlpha = b.alpha
      stroke(ctx, b.color, b.width, b.style, (inset) => {
        ctx.beginPath()
        for (const [x, y, shape] of b.at) shapePath(ctx, shape, x, y, hw - inset, hh - inset, z)
      })
    }
    for (const [x, y, p] of marked) {
      ctx.globalAlpha = p.dim ? 0.2 : 1
      if (p.drift) {
        // The drift outline, outside the state's border (as the stylesheet's outline: 3 apart, 5 or 3 wide).
        const ow = Math.max(1, (p.drift === 'modified' ? 5 : 3) * z)
        const off = 3 * z + ow / 2
        stroke(ctx, DRIFT_COLOR[theme], ow, p.drift === 'modified' ? 'double' : 'dashed', (inset) => {
          ctx.beginPath()
          ctx.rect(x - hw - off + inset, y - hh - off + inset, 2 * (hw + off - inset), 2 * (hh + off - inset))
        })
      }
      if (p.halo) {
        // The stylesheet's overlays: translucent, a little larger than the node.
        const pad = (p.halo === 'selected' ? 8 : 6) * z
        ctx.globalAlpha = 0.25
        ctx.fillStyle = p.halo === 'selected' ? '#2563eb' : '#f59e0b'
        ctx.beginPath()
        ctx.roundRect(x - hw - pad, y - hh - pad, 2 * (hw + pad), 2 * (hh + pad), pad)
        ctx.fill()
      }
    }
    ctx.restore()
  }
}

/**
 * Strokes the path `trace(inset)` makes in a border style: a double border is two thin lines, the second
 * `width` further in; dashed and dotted are dashes as long as the line is wide, or three times as long.
 */
function stroke(ctx: CanvasRenderingContext2D, color: string, width: number, style: StateLook['borderStyle'], trace: (inset: number) => void) {
  ctx.strokeStyle = color
  if (style === 'double' && width >= 3) {
    ctx.lineWidth = width / 3
    trace(0)
    ctx.stroke()
    trace(width * (2 / 3))
    ctx.stroke()
    return
  }
  ctx.lineWidth = width
  ctx.setLineDash(style === 'dashed' ? [3 * width, 2 * width] : style === 'dotted' ? [width, width] : [])
  trace(0)
  ctx.stroke()
  ctx.setLineDash([])
}

/** Unit polygons (x, y in -1..1) of the stylesheet's node shapes. */
const POLYGONS: Record<string, [number, number][]> = {
  hexagon: [[-1, 0], [-0.5, -1], [0.5, -1], [1, 0], [0.5, 1], [-0.5, 1]],
  octagon: [[-0.414, -1], [0.414, -1], [1, -0.414], [1, 0.414], [0.414, 1], [-0.414, 1], [-1, 0.414], [-1, -0.414]],
  diamond: [[0, -1], [1, 0], [0, 1], [-1, 0]],
  barrel: [[-0.9, -1], [0.9, -1], [1, -0.6], [1, 0.6], [0.9, 1], [-0.9, 1], [-1, 0.6], [-1, -0.6]],
}

/** Adds a node's shape to the current path (a closed subpath), centred on (x, y), half width hw and half height hh. */
function shapePath(ctx: CanvasRenderingContext2D, shape: string, x: number, y: number, hw: number, hh: number, zoom: number) {
  if (hw <= 0 || hh <= 0) return
  const poly = POLYGONS[shape]
  if (poly) {
    poly.forEach(([px, py], i) => (i ? ctx.lineTo(x + px * hw, y + py * hh) : ctx.moveTo(x + px * hw, y + py * hh)))
    ctx.closePath()
  } else if (shape === 'cut-rectangle') {
    const c = Math.min(8 * zoom, hw, hh)
    const pts: [number, number][] = [[-hw + c, -hh], [hw - c, -hh], [hw, -hh + c], [hw, hh - c], [hw - c, hh], [-hw + c, hh], [-hw, hh - c], [-hw, -hh + c]]
    pts.forEach(([px, py], i) => (i ? ctx.lineTo(x + px, y + py) : ctx.moveTo(x + px, y + py)))
    ctx.closePath()
  } else if (shape === 'round-rectangle') {
    ctx.roundRect(x - hw, y - hh, 2 * hw, 2 * hh, Math.min(hw, hh) / 2)
  } else {
    ctx.rect(x - hw, y - hh, 2 * hw, 2 * hh)
  }
}

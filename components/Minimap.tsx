'use client'
/**
 * An overview of a big graph: every drawn node as a dot in its state's colour
 * and the viewport as a rectangle; a click (or Enter on a focused point of it
 * with the arrow keys) centres the graph there. Redrawn at most four times a
 * second while the traversal runs, and on every pan or zoom.
 */
import type { Core } from 'cytoscape'
import { useEffect, useRef, type MutableRefObject } from 'react'
import type { NodeState } from '../lib/ui/graph-model'
import { lookOf, type Theme } from './graph-style'

const W = 180
const H = 130

export interface MinimapItems {
  positions: ReadonlyMap<string, { x: number; y: number }>
  /** drawn unit id -> its state class(es), as on the graph */
  state: ReadonlyMap<string, string>
}

export function Minimap({ cy, source, version, theme }: { cy: MutableRefObject<Core | null>; source: () => MinimapItems | null; version: number; theme: Theme }) {
  const canvas = useRef<HTMLCanvasElement>(null)
  const last = useRef(0)
  const timer = useRef<ReturnType<typeof setTimeout> | null>(null)
  const frame = useRef(0)
  const bound = useRef<Core | null>(null)

  const onViewport = () => {
    if (frame.current) return
    frame.current = requestAnimationFrame(() => {
      frame.current = 0
      draw()
    })
  }

  const draw = () => {
    const c = cy.current
    const el = canvas.current
    const ctx = el?.getContext('2d')
    const items = source()
    if (!c || !el || !ctx || !items) return
    // The graph's Cytoscape is made again when the graph changes size class: follow the new one's viewport.
    if (bound.current !== c) {
      bound.current?.off('viewport', onViewport)
      c.on('viewport', onViewport)
      bound.current = c
    }
    last.current = performance.now()
    // Bounds and dots from the laid-out positions and drawn states (asking Cytoscape for its bounding box measures every label).
    let [x0, y0, x1, y1] = [Infinity, Infinity, -Infinity, -Infinity]
    for (const p of items.positions.values()) [x0, y0, x1, y1] = [Math.min(x0, p.x), Math.min(y0, p.y), Math.max(x1, p.x), Math.max(y1, p.y)]
    ctx.clearRect(0, 0, W, H)
    if (!Number.isFinite(x0)) return
    x0 -= 100
    x1 += 100
    y0 -= 40
    y1 += 40
    const scale = Math.min((W - 8) / (x1 - x0), (H - 8) / (y1 - y0))
    const ox = (W - (x1 - x0) * scale) / 2 - x0 * scale
    const oy = (H - (y1 - y0) * scale) / 2 - y0 * scale
    const w = Math.max(1.5, 150 * scale)
    const h = Math.max(1.5, 44 * scale)
    for (const [id, p] of items.positions) {
      const cls = items.state.get(id)?.split(' ').find((k) => k.startsWith('s-'))
      ctx.fillStyle = cls ? lookOf(cls.slice(2) as NodeState, theme).border : '#888'
      ctx.fillRect(p.x * scale + ox - w / 2, p.y * scale + oy - h / 2, w, h)
    }
    const ext = c.extent()
    ctx.strokeStyle = theme === 'dark' ? '#f8fafc' : '#1d4ed8'
    ctx.lineWidth = 1.5
    ctx.strokeRect(ext.x1 * scale + ox, ext.y1 * scale + oy, ext.w * scale, ext.h * scale)
    el.dataset.scale = String(scale)
    el.dataset.ox = String(ox)
    el.dataset.oy = String(oy)
  }

  // Live changes: at most every 250 ms.
  useEffect(() => {
    if (timer.current) return
    const wait = Math.max(0, 250 - (performance.now() - last.current))
    timer.current = setTimeout(() => {
      timer.current = null
      draw()
    }, wait)
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [version, theme])

  useEffect(
    () => () => {
      bound.current?.off('viewport', onViewport)
      if (frame.current) cancelAnimationFrame(frame.current)
      if (timer.current) clearTimeout(timer.current)
      timer.current = null
    },
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [],
  )

  const centreAt = (x: number, y: number) => {
    const c = cy.current
    const el = canvas.current
    if (!c || !el) return
    const scale = Number(el.dataset.scale)
    if (!scale) return
    const gx = (x - Number(el.dataset.ox)) / scale
    const gy = (y - Number(el.dataset.oy)) / scale
    c.pan({ x: c.width() / 2 - gx * c.zoom(), y: c.height() / 2 - gy * c.zoom() })
  }

  return (
    <canvas
      ref={canvas}
      className="minimap"
      width={W}
      height={H}
      data-testid="minimap"
      aria-label="overview of the graph; click to move there"
      role="img"
      onClick={(e) => {
        const r = e.currentTarget.getBoundingClientRect()
        centreAt(e.clientX - r.left, e.clientY - r.top)
      }}
    />
  )
}

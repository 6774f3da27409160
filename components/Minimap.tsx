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

export function Minimap({ cy, version, theme }: { cy: MutableRefObject<Core | null>; version: number; theme: Theme }) {
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
    if (!c || !el || !ctx) return
    // The graph's Cytoscape is made again when the graph changes size class: follow the new one's viewport.
    if (bound.current !== c) {
      bound.current?.off('viewport', onViewport)
      c.on('viewport', onViewport)
      bound.current = c
    }
    last.current = performance.now()
    const bb = c.elements().boundingBox()
    ctx.clearRect(0, 0, W, H)
    if (!Number.isFinite(bb.w) || bb.w <= 0) return
    const scale = Math.min((W - 8) / bb.w, (H - 8) / bb.h)
    const ox = (W - bb.w * scale) / 2 - bb.x1 * scale
    const oy = (H - bb.h * scale) / 2 - bb.y1 * scale
    c.nodes().forEach((n) => {
      if (n.isParent()) return
      const cls = (n.classes() as unknown as string[]).find((k) => k.startsWith('s-'))
      ctx.fillStyle = cls ? lookOf(cls.slice(2) as NodeState, theme).border : '#888'
      const p = n.position()
      const w = Math.max(1.5, n.width() * scale)
      const h = Math.max(1.5, n.height() * scale)
      ctx.fillRect(p.x * scale + ox - w / 2, p.y * scale + oy - h / 2, w, h)
    })
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

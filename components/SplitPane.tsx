'use client'
/**
 * Two panes side by side with a separator between them that the pointer
 * drags and the arrow keys move (Home/End: narrowest/widest). The width is
 * remembered for the next visit. Below 900 px wide the panes stack.
 */
import { useEffect, useRef, useState, type ReactNode } from 'react'

const MIN = 280
const KEY = 'kiln.split'

export function SplitPane({ first, second, label }: { first: ReactNode; second: ReactNode; label: string }) {
  const [width, setWidth] = useState(460)
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    const saved = Number(localStorage.getItem(KEY))
    if (saved >= MIN) setWidth(saved)
  }, [])
  const max = () => Math.max(MIN, (box.current?.clientWidth ?? 1200) - 360)
  const set = (w: number) => {
    const v = Math.round(Math.min(max(), Math.max(MIN, w)))
    setWidth(v)
    localStorage.setItem(KEY, String(v))
  }
  return (
    <div className="split" ref={box} style={{ ['--split' as string]: `${width}px` }}>
      <div className="split-first">{first}</div>
      <div
        className="split-handle"
        role="separator"
        aria-orientation="vertical"
        aria-label={label}
        aria-valuemin={MIN}
        aria-valuemax={max()}
        aria-valuenow={width}
        tabIndex={0}
        onKeyDown={(e) => {
          const step = e.shiftKey ? 80 : 20
          if (e.key === 'ArrowLeft') set(width - step)
          else if (e.key === 'ArrowRight') set(width + step)
          else if (e.key === 'Home') set(MIN)
          else if (e.key === 'End') set(max())
          else return
          e.preventDefault()
        }}
        onPointerDown={(e) => {
          const startX = e.clientX
          const startW = width
          const el = e.currentTarget
          el.setPointerCapture(e.pointerId)
          const move = (m: PointerEvent) => set(startW + m.clientX - startX)
          const up = () => {
            el.removeEventListener('pointermove', move)
            el.removeEventListener('pointerup', up)
          }
          el.addEventListener('pointermove', move)
          el.addEventListener('pointerup', up)
        }}
      />
      <div className="split-second">{second}</div>
    </div>
  )
}

/**
 * The page's side of `npm run bench:ui` (bench/ui-probe.ts): when the bench
 * installed `window.__kilnProbe` before the page loaded, the page reports the
 * last event seq it put on screen, timed after the paint that showed it. In a
 * normal session the probe is absent and this does nothing.
 */
interface Probe {
  shown: [number, number][]
  received?: [number, number][]
}

const probe = (): Probe | undefined => (typeof window === 'undefined' ? undefined : (window as unknown as { __kilnProbe?: Probe }).__kilnProbe)

/** From inside a frame (an animation-frame callback, Cytoscape's render): the time right after this frame's paint. */
export function reportPainted(lastSeq: number): void {
  const p = probe()
  if (!p) return
  // A message posted during a frame is handled after that frame's paint.
  const ch = new MessageChannel()
  ch.port1.onmessage = () => p.shown.push([lastSeq, Date.now()])
  ch.port2.postMessage(null)
}

/** Events up to `lastSeq` just arrived on the socket (the bench splits the page's delay into delivery and drawing). */
export function reportReceived(lastSeq: number): void {
  const p = probe()
  if (p) (p.received ??= []).push([lastSeq, Date.now()])
}

/** From anywhere: the time right after the next paint. */
export function reportShown(lastSeq: number): void {
  if (!probe()) return
  requestAnimationFrame(() => reportPainted(lastSeq))
}

/** A named moment of the page's load, in ms after navigation start (the bench prints where the first render's time went). */
export function probeMark(name: string): void {
  const p = probe() as (Probe & { marks?: [string, number][] }) | undefined
  if (!p) return
  ;(p.marks ??= []).push([name, Math.round(performance.now())])
}

/**
 * The page's side of `npm run bench:ui` (bench/ui-probe.ts): when the bench
 * installed `window.__kilnProbe` before the page loaded, the page reports the
 * last event seq it put on screen, timed after the paint that showed it. In a
 * normal session the probe is absent and this does nothing.
 */
interface Probe {
  shown: [number, number][]
}

const probe = (): Probe | undefined => (typeof window === 'undefined' ? undefined : (window as unknown as { __kilnProbe?: Probe }).__kilnProbe)

export function reportShown(lastSeq: number): void {
  const p = probe()
  if (!p) return
  // The frame's paint follows its animation-frame callbacks; a message posted from one runs after that paint.
  requestAnimationFrame(() => {
    const ch = new MessageChannel()
    ch.port1.onmessage = () => p.shown.push([lastSeq, Date.now()])
    ch.port2.postMessage(null)
  })
}

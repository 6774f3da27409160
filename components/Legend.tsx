'use client'
import { NODE_STATES } from '../lib/ui/graph-model'
import { DRIFT_ICON } from '../lib/ui/drift'
import { DRIFT_COLOR, DRIFT_OUTLINE, lookOf } from './graph-style'
import { useTheme } from './theme'

/** Every node state: its icon, colour and border as drawn, with what it means; then the drift marks, the critical path and groups. */
export function Legend() {
  const theme = useTheme()
  return (
    <details className="legend">
      <summary>Legend</summary>
      <ul>
        {NODE_STATES.map(({ state, label, explain }) => {
          const look = lookOf(state, theme)
          return (
            <li key={state}>
              <span className="swatch" style={{ background: look.color, borderColor: look.border, borderStyle: look.borderStyle }} aria-hidden>
                {look.icon}
              </span>
              <strong>{label}</strong> <small>{explain}</small>
            </li>
          )
        })}
        <li>
          <span className="swatch swatch-drift" style={{ outlineColor: DRIFT_COLOR[theme], outlineStyle: DRIFT_OUTLINE.MODIFIED }} aria-hidden>{DRIFT_ICON.MODIFIED}</span>
          <strong>drifted</strong> <small>the latest drift check found the resource changed outside Kiln (the diff is in the side panel); shown until an operation changes resources</small>
        </li>
        <li>
          <span className="swatch swatch-drift" style={{ outlineColor: DRIFT_COLOR[theme], outlineStyle: DRIFT_OUTLINE.DELETED }} aria-hidden>{DRIFT_ICON.DELETED}</span>
          <strong>gone</strong> <small>the latest drift check found the resource deleted outside Kiln</small>
        </li>
        <li><span className="swatch edge-critical" aria-hidden>━</span> <strong>critical path</strong> <small>the chain with the most work left</small></li>
        <li><span className="swatch" aria-hidden>▭</span> <strong>group</strong> <small>nodes gathered by name prefix, type or layer, with their counts by state; tap to open or close</small></li>
      </ul>
    </details>
  )
}

import { NODE_STATES } from '../lib/ui/graph-model'
import { LOOKS } from './graph-style'

/** Every node state: its icon, colour and border as drawn, with what it means. */
export function Legend() {
  return (
    <details className="legend" open>
      <summary>Legend</summary>
      <ul>
        {NODE_STATES.map(({ state, label, explain }) => (
          <li key={state} title={explain}>
            <span className="swatch" style={{ background: LOOKS[state].color, borderColor: LOOKS[state].border, borderStyle: LOOKS[state].borderStyle }} aria-hidden>
              {LOOKS[state].icon}
            </span>
            <strong>{label}</strong> <small>{explain}</small>
          </li>
        ))}
        <li><span className="swatch edge-critical" aria-hidden>━</span> <strong>critical path</strong> <small>the chain with the most work left</small></li>
      </ul>
    </details>
  )
}

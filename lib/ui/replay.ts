/**
 * Replay by time: the model of a traversal as of any moment, moved forward
 * incrementally (playing folds only the events since the last position) and
 * rebuilt from the start only when moved back. Pure.
 */
import { applyEvents, initialModel, type EventRow, type GraphElements, type GraphModel } from './graph-model'

export class Replay {
  model: GraphModel
  /** events folded in so far */
  private next = 0
  private readonly times: number[]

  constructor(
    private readonly traversalId: string,
    private readonly graph: GraphElements,
    private readonly types: ReadonlyMap<number, string>,
    private readonly events: EventRow[],
  ) {
    this.times = events.map((e) => Date.parse(e.at))
    this.model = initialModel(traversalId, graph, types)
  }

  /** When the traversal's first and last events happened (epoch ms). */
  get span(): { start: number; end: number } {
    return { start: this.times[0] ?? 0, end: this.times.at(-1) ?? 0 }
  }

  /** Moves to `untilMs` (epoch ms): every event at or before it is folded in. Returns the nodes that changed, or null when rebuilt. */
  seek(untilMs: number): Set<string> | null {
    let end = this.next
    if (end > 0 && this.times[end - 1]! > untilMs) {
      this.model = initialModel(this.traversalId, this.graph, this.types)
      this.next = end = 0
      while (end < this.times.length && this.times[end]! <= untilMs) end++
      applyEvents(this.model, this.events.slice(0, end), this.types)
      this.next = end
      return null
    }
    while (end < this.times.length && this.times[end]! <= untilMs) end++
    const changed = applyEvents(this.model, this.events.slice(this.next, end), this.types)
    this.next = end
    return changed
  }

  /** Events folded in so far. */
  get position(): number {
    return this.next
  }
}

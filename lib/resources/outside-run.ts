import type { OutsideObjects, ResourceContext } from './types'

/**
 * The parts of a ResourceContext that only a node of a traversal has (signals,
 * parking, progress on the graph), for a type called outside one (an import
 * preview's look, a snapshot delete, a test): signals and parking are refused,
 * saying `who` asked.
 */
export function outsideRun(who: string): Pick<ResourceContext, 'progress' | 'signals' | 'park' | 'resumed'> {
  const noSignals = () => Promise.reject(new Error(`${who} takes no signals`))
  return {
    progress: () => {},
    signals: { waitFor: noSignals, list: noSignals, watch: noSignals, clear: noSignals },
    park: () => {
      throw new Error(`${who} does not wait`)
    },
    resumed: null,
  }
}

/** Records of outside objects for a type called where it may keep none (a signal, the conformance kit): every call is refused, saying `who`. */
export function refusingObjects(who: string): OutsideObjects {
  const refuse = () => Promise.reject(new Error(`${who} keeps no records of outside objects`))
  return { claim: refuse, settle: refuse, find: refuse, startDelete: refuse, forget: refuse, inScope: refuse, adopt: refuse }
}

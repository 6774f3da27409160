/**
 * Preemption (`preempt: true` on an update): which resources' targets the
 * new update changes, compared with the traversal it supersedes (pure). The
 * in-flight actions of those resources are aborted (their AbortSignal fires),
 * and the new traversal observes and converges the rows they leave.
 *
 * A target changed when the resource's definition differs (its type,
 * properties as written, external id: definitionFingerprint), when it is no
 * longer in the template (the new target is its deletion), or when something
 * it depends on changed (its properties may resolve to other values): the
 * closure over the new template's dependencies.
 */
export interface PreemptPlan {
  dependsOn: Record<string, string[]>
  /** definitionFingerprint per resource name. */
  fingerprints: Record<string, string>
}

export function changedTargets(before: PreemptPlan, after: PreemptPlan): string[] {
  const changed = new Set<string>()
  for (const [name, fp] of Object.entries(before.fingerprints)) {
    if (after.fingerprints[name] !== fp) changed.add(name)
  }
  // Dependents of a changed resource, breadth first over the new template's edges (linear in its size).
  const dependents = new Map<string, string[]>()
  for (const [name, deps] of Object.entries(after.dependsOn)) for (const d of deps) dependents.set(d, [...(dependents.get(d) ?? []), name])
  const queue = [...changed]
  for (let i = 0; i < queue.length; i++) {
    for (const next of dependents.get(queue[i]!) ?? []) {
      if (changed.has(next) || !(next in before.fingerprints)) continue
      changed.add(next)
      queue.push(next)
    }
  }
  return [...changed].sort()
}

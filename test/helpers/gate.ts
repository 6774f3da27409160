/**
 * A gate for tests that need a state to last (an action still running, a row
 * still held, an operation still in progress when the next command arrives):
 * an OS::Heat::WaitCondition on an OS::Heat::WaitConditionHandle, whose create
 * or update holds until the handle has received `count` SUCCESS signals. The
 * test signals when it has seen what it came to see, so the state lasts as long
 * as the test needs, however slow the machine; nothing hopes a timer is long
 * enough. Signals are kept: an update that raises `count` waits for more.
 */
import { createSignalService } from '../../lib/services/signals'
import type { TestCluster } from './cluster'

/** The gate's two resources as template objects: `<name>_handle`, and `name` waiting for `count` signals on it. */
export function gateResources(name = 'gate', count = 1): Record<string, unknown> {
  return {
    [`${name}_handle`]: { type: 'OS::Heat::WaitConditionHandle' },
    [name]: { type: 'OS::Heat::WaitCondition', properties: { handle: { get_resource: `${name}_handle` }, count, timeout: 3600 } },
  }
}

/** One SUCCESS signal to the gate's handle, as the cluster's project would send it. */
export async function openGate(c: TestCluster, stackId: string, name = 'gate'): Promise<void> {
  await createSignalService(c.db.pool).signal({ projectId: c.actor.projectId }, stackId, `${name}_handle`, {})
}

/** Resolves once the gate's wait is running (its row is in progress: the action is waiting for signals). */
export function gateHeld(c: TestCluster, stackId: string, name = 'gate', timeoutMs = 60_000): Promise<void> {
  return c.waitFor(
    async () => (await c.rows(stackId)).some((r) => r.name === name && r.status === 'IN_PROGRESS' && r.engine_id !== null),
    timeoutMs,
    `${name} to wait at its gate`,
  )
}

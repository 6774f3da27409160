/**
 * What an evaluation thread does with one task: say it has started (the
 * pool's time limit counts from then), wait at the test gate if there is one,
 * run the task under the budgets it was sent, and answer with the result or
 * the error as data (outcome.ts).
 */
import os from 'node:os'
import type { MessagePort } from 'node:worker_threads'
import type { EvaluationLimits } from '../template/budget'
import { serializeError, type Outcome } from './outcome'
import { runTask, type Task } from './tasks'

// Below the event loop's priority: when both want the one free core, the loop wins. On Linux,
// setpriority of "this process" (0) applies to the calling thread only.
try {
  os.setPriority(0, 10)
} catch {
  /* not permitted here: the same priority, then */
}

export function runOnThread(msg: { task: Task; limits: EvaluationLimits; started: MessagePort; gate?: Int32Array }): Outcome {
  msg.started.postMessage('started')
  msg.started.close()
  if (msg.gate) while (Atomics.load(msg.gate, 0) === 0) Atomics.wait(msg.gate, 0, 0)
  try {
    return { ok: true, value: runTask(msg.task, msg.limits) }
  } catch (err) {
    return { ok: false, error: serializeError(err) }
  }
}

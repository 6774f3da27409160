/**
 * What an evaluation thread does with one task: say it has started (the
 * pool's time limit counts from then), wait at the test gate if there is one,
 * run the task under the budgets it was sent, and answer with the result or
 * the error as data (outcome.ts).
 */
import type { MessagePort } from 'node:worker_threads'
import type { EvaluationLimits } from '../template/budget'
import { serializeError, type Outcome } from './outcome'
import { runTask, type Task } from './tasks'

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

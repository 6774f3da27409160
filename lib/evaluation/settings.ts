/**
 * The process's evaluation settings: the budgets every template evaluation
 * runs under, how much of one may run on the calling thread, and the
 * evaluation threads' time limit and number. Set once per process from the
 * environment (configureEvaluation(evaluationSettingsFrom(env())) in server.ts
 * and worker/main.ts); without that call, the defaults below, which are the
 * environment's defaults.
 */
import type { Env } from '../env'
import { DEFAULT_EVALUATION_LIMITS, type EvaluationLimits } from '../template/budget'

export interface EvaluationSettings {
  limits: EvaluationLimits
  /** Operations an evaluation may do on the calling thread, plus INLINE_OPS_PER_NODE per node of its input. */
  inlineOps: number
  /** Wall-clock limit of one task on an evaluation thread, from the moment the thread starts it. */
  timeoutMs: number
  threads: number
  /** Heap of one evaluation thread; past it the thread dies and the task is refused as too large. */
  threadHeapMb: number
}

/**
 * Work in proportion to what is evaluated (a template's nodes, a resource's
 * properties) is ordinary and stays inline: a 10,000-resource template's
 * traversal is not sent to a thread for being large. Only an evaluation that
 * does much more than its input's size goes to a thread.
 */
export const INLINE_OPS_PER_NODE = 4

export const DEFAULT_EVALUATION_SETTINGS: EvaluationSettings = Object.freeze({
  limits: DEFAULT_EVALUATION_LIMITS,
  inlineOps: 20_000,
  timeoutMs: 10_000,
  threads: 2,
  threadHeapMb: 512,
})

export function evaluationSettingsFrom(e: Env): EvaluationSettings {
  return {
    limits: { maxOps: e.KILN_TEMPLATE_EVAL_MAX_OPS, maxOutputBytes: e.KILN_TEMPLATE_EVAL_MAX_OUTPUT_BYTES, maxDepth: e.KILN_TEMPLATE_EVAL_MAX_DEPTH },
    inlineOps: e.KILN_TEMPLATE_EVAL_INLINE_OPS,
    timeoutMs: e.KILN_TEMPLATE_EVAL_TIMEOUT_MS,
    threads: Math.max(1, e.KILN_TEMPLATE_EVAL_THREADS),
    threadHeapMb: DEFAULT_EVALUATION_SETTINGS.threadHeapMb,
  }
}

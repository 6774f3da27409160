/**
 * Evaluation threads: a small pool of worker threads (tinypool) that run
 * template work the calling thread must not — a submission's check, a
 * preview, and any evaluation that spent its inline allowance (bounded.ts).
 *
 * Each task runs under the process's evaluation budgets and a wall-clock
 * limit that starts when a thread takes the task up (a task waiting for a
 * free thread is not timed): past it the thread is terminated, the task is
 * refused with a BudgetExceeded naming KILN_TEMPLATE_EVAL_TIMEOUT_MS, and the
 * pool starts a fresh thread. A thread whose heap outgrows threadHeapMb dies
 * the same way and the task is refused as producing too much. The calling
 * thread's event loop only posts and receives messages.
 */
import { MessageChannel } from 'node:worker_threads'
import Tinypool from 'tinypool'
import { BudgetExceeded } from '../template/budget'
import { reviveError, type Outcome } from './outcome'
import { DEFAULT_EVALUATION_SETTINGS, type EvaluationSettings } from './settings'
import type { Task } from './tasks'

/** Test hooks: observe a task being taken up, hold it at a gate (Atomics) before it runs. */
export interface EvaluationHooks {
  started?(kind: Task['kind']): void
  /** While gate[0] is 0 a started task waits; the test stores 1 and notifies to let it run. */
  gate?: Int32Array
}

export class EvaluationPool {
  private pool: Tinypool | null = null

  constructor(
    readonly settings: EvaluationSettings,
    private readonly hooks: EvaluationHooks = {},
  ) {}

  private threads(): Tinypool {
    this.pool ??= new Tinypool({
      filename: new URL('./thread.mjs', import.meta.url).href,
      minThreads: 1,
      maxThreads: this.settings.threads,
      // One thread stays up (starting one loads the TypeScript sources: about a second); more stay a minute.
      idleTimeout: 60_000,
      maxQueue: Number.POSITIVE_INFINITY,
      // thread.mjs registers tsx itself; a loader inherited from this process's flags would be a second one.
      execArgv: [],
      resourceLimits: { maxOldGenerationSizeMb: this.settings.threadHeapMb },
    })
    return this.pool
  }

  /** Start the threads now (the web server does, so the first submission does not wait for them). */
  warm(): void {
    this.threads()
  }

  async run(task: Task): Promise<unknown> {
    const { port1, port2 } = new MessageChannel()
    const abort = new AbortController()
    let timer: NodeJS.Timeout | undefined
    let started = false
    const onStart = () => {
      if (started) return
      started = true
      this.hooks.started?.(task.kind)
    }
    port1.on('message', () => {
      onStart()
      // Timer reason: the evaluation's wall-clock limit, from the moment a thread took it up.
      timer = setTimeout(() => abort.abort(), this.settings.timeoutMs)
    })
    try {
      const outcome = (await this.threads().run({ task, limits: this.settings.limits, started: port2, gate: this.hooks.gate }, { transferList: [port2], signal: abort.signal })) as Outcome
      // The start message and the result travel on different channels: on a busy machine the result may come first.
      onStart()
      if (!outcome.ok) throw reviveError(outcome.error)
      return outcome.value
    } catch (err) {
      if (abort.signal.aborted) throw new BudgetExceeded('time', this.settings.timeoutMs)
      if ((err as { code?: string }).code === 'ERR_WORKER_OUT_OF_MEMORY') throw new BudgetExceeded('output', this.settings.limits.maxOutputBytes)
      throw err
    } finally {
      clearTimeout(timer)
      port1.close()
    }
  }

  async close(): Promise<void> {
    const p = this.pool
    this.pool = null
    await p?.destroy()
  }
}

let current: EvaluationPool | null = null

/** The process's evaluation pool (its threads start on first use). */
export function evaluation(): EvaluationPool {
  current ??= new EvaluationPool(DEFAULT_EVALUATION_SETTINGS)
  return current
}

/** Set the process's evaluation settings (at start, from the environment; tests: their own budgets and hooks). */
export function configureEvaluation(settings: EvaluationSettings, hooks: EvaluationHooks = {}): EvaluationPool {
  const old = current
  current = new EvaluationPool(settings, hooks)
  void old?.close()
  return current
}

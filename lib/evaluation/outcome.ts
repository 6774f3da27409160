/**
 * How a task's result or error crosses the thread boundary. Domain errors
 * (a ValidationError, a LimitError, a BudgetError) and a spent budget travel
 * as plain data and are rebuilt on the calling side, so the API answers them
 * as it would have had the work been done in-process; anything else is a
 * bug and arrives as an Error with the thread's message and stack.
 */
import { BudgetError, LimitError, ValidationError } from '../plan/errors'
import { BudgetExceeded, DEFAULT_EVALUATION_LIMITS, type BudgetKind } from '../template/budget'
import type { TemplateIssue } from '../template/types'

export type SerializedError =
  | { kind: 'validation'; message: string; issues: TemplateIssue[] }
  | { kind: 'limit'; message: string; limit: string; max: number }
  | { kind: 'budget-error'; message: string; budget: string; setting: string; max: number; path: string | null }
  | { kind: 'budget'; budget: BudgetKind; max: number; path: string | null; inline: boolean }
  | { kind: 'internal'; message: string; stack?: string }

export type Outcome = { ok: true; value: unknown } | { ok: false; error: SerializedError }

export function serializeError(err: unknown): SerializedError {
  if (err instanceof ValidationError) return { kind: 'validation', message: err.message, issues: err.issues }
  if (err instanceof LimitError) return { kind: 'limit', message: err.message, limit: err.limit, max: err.max }
  if (err instanceof BudgetError) return { kind: 'budget-error', message: err.message, budget: err.budget, setting: err.setting, max: err.max, path: err.path }
  if (err instanceof BudgetExceeded) return { kind: 'budget', budget: err.budget, max: err.max, path: err.path, inline: err.inline }
  // Every recursive walk runs after the depth checks; a stack overflow left is a value nested past them.
  if (err instanceof RangeError && /call stack/.test(err.message)) return { kind: 'budget', budget: 'depth', max: DEFAULT_EVALUATION_LIMITS.maxDepth, path: null, inline: false }
  const e = err instanceof Error ? err : new Error(String(err))
  return { kind: 'internal', message: e.message, ...(e.stack ? { stack: e.stack } : {}) }
}

export function reviveError(e: SerializedError): Error {
  switch (e.kind) {
    case 'validation':
      return new ValidationError(e.message, e.issues)
    case 'limit':
      return new LimitError(e.message, e.limit, e.max)
    case 'budget-error':
      return new BudgetError(e.message, e.budget, e.setting, e.max, e.path)
    case 'budget': {
      const err = new BudgetExceeded(e.budget, e.max, e.inline)
      return e.path ? err.at(e.path) : err
    }
    case 'internal': {
      const err = new Error(`evaluation thread: ${e.message}`)
      if (e.stack) err.stack = `${err.message}\n(thread) ${e.stack}`
      return err
    }
  }
}

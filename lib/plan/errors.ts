/**
 * Domain errors the service layer throws; the API maps `status` to the HTTP
 * status and `body()` to the JSON body. Anything else is a bug (500, logged).
 */
import type { TemplateIssue } from '../template/types'

export abstract class DomainError extends Error {
  abstract readonly status: number
  abstract readonly code: string
  body(): Record<string, unknown> {
    return { error: { code: this.code, message: this.message } }
  }
}

export class NotFoundError extends DomainError {
  override name = 'NotFoundError'
  readonly status = 404
  readonly code = 'not_found'
}

/**
 * The operation cannot proceed in the stack's current state (e.g. update while a delete runs).
 * `details` go into the error body: what changed meanwhile, for a stale edit or plan.
 */
export class ConflictError extends DomainError {
  override name = 'ConflictError'
  readonly status = 409
  readonly code = 'conflict'
  constructor(
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message)
  }
  override body() {
    return { error: { code: this.code, message: this.message, ...this.details } }
  }
}

/** Something that existed and is no longer usable (an expired plan). */
export class GoneError extends DomainError {
  override name = 'GoneError'
  readonly status = 410
  constructor(
    message: string,
    readonly code: string,
  ) {
    super(message)
  }
}

export class ForbiddenError extends DomainError {
  override name = 'ForbiddenError'
  readonly status = 403
  readonly code = 'forbidden'
}

/** Bad input: every problem with its template path, line and column. */
export class ValidationError extends DomainError {
  override name = 'ValidationError'
  readonly status = 400
  readonly code = 'validation_failed'
  constructor(
    message: string,
    readonly issues: TemplateIssue[] = [],
  ) {
    super(message)
  }
  override body() {
    return { error: { code: this.code, message: this.message, issues: this.issues } }
  }
}

/** A configured size limit was exceeded. */
export class LimitError extends DomainError {
  override name = 'LimitError'
  readonly status = 413
  readonly code = 'limit_exceeded'
  constructor(
    message: string,
    readonly limit: string,
    readonly max: number,
  ) {
    super(message)
  }
  override body() {
    return { error: { code: this.code, message: this.message, limit: this.limit, max: this.max } }
  }
}

/**
 * A template needed more than an evaluation budget allows (operations,
 * output, nesting depth, time): a 400 naming the budget's setting and where
 * in the template it ran out.
 */
export class BudgetError extends DomainError {
  override name = 'BudgetError'
  readonly status = 400
  readonly code = 'budget_exceeded'
  constructor(
    message: string,
    /** operations, output, depth or time */
    readonly budget: string,
    /** the setting that sets it (KILN_TEMPLATE_EVAL_…) */
    readonly setting: string,
    readonly max: number,
    readonly path: string | null,
  ) {
    super(message)
  }
  override body() {
    return {
      error: {
        code: this.code,
        message: this.message,
        budget: { kind: this.budget, setting: this.setting, max: this.max },
        issues: [{ code: 'budget', path: this.path ?? '(document)', line: null, column: null, message: this.message }],
      },
    }
  }
}

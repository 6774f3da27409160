/**
 * Checking a submission on an evaluation thread (lib/evaluation), under the
 * evaluation budgets and a time limit: parsing and evaluating a tenant's
 * template never holds up the web process's event loop. The check itself,
 * and the types it speaks, are in lib/plan/template-check.ts (what the thread runs).
 */
import { evaluation } from '../evaluation/pool'
import { portable, type CheckContext, type CheckedSubmission, type Submission } from '../plan/template-check'

/** Check a submission on an evaluation thread, under the budgets and its time limit. */
export function checkSubmission(sub: Submission, ctx: CheckContext): Promise<CheckedSubmission> {
  return evaluation().run({ kind: 'submission', sub, ctx: portable(ctx) }) as Promise<CheckedSubmission>
}


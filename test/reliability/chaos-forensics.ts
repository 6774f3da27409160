/**
 * When a chaos run finds a violation, the state that explains it is gone as
 * soon as the run's PostgreSQL stops. This writes the trail of every stack a
 * violation names (its traversals, rows, sync points, jobs and every event in
 * order) to a text file, so a rare failure can be read after the fact.
 */
import fs from 'node:fs'
import path from 'node:path'
import type { Pool } from 'pg'

const cell = (v: unknown) => (v instanceof Date ? v.toISOString().slice(11, 23) : v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v))

function table(title: string, rows: Record<string, unknown>[]): string {
  if (rows.length === 0) return `## ${title}: none\n`
  const cols = Object.keys(rows[0]!)
  return `## ${title} (${rows.length})\n${cols.join(' | ')}\n${rows.map((r) => cols.map((c) => cell(r[c])).join(' | ')).join('\n')}\n`
}

/** Stack ids named by the violations, by name (`chaos-7`) or by id. */
async function stacksNamed(pool: Pool, violations: string[]): Promise<{ id: string; name: string }[]> {
  const all = (await pool.query('SELECT id, name FROM stack ORDER BY created_at')).rows as { id: string; name: string }[]
  const text = violations.join('\n')
  return all.filter((s) => text.includes(s.id) || new RegExp(`\\b${s.name}\\b`).test(text))
}

export async function dumpForensics(pool: Pool, violations: string[], dir: string, context: string[]): Promise<string> {
  const stacks = await stacksNamed(pool, violations)
  const q = async (sql: string, args: unknown[]) => (await pool.query(sql, args)).rows as Record<string, unknown>[]
  let out = `# chaos violations\n${violations.map((v) => `- ${v}`).join('\n')}\n\n# driver log\n${context.join('\n')}\n`
  for (const s of stacks) {
    out += `\n# stack ${s.name} ${s.id}\n`
    out += table('stack', await q(`SELECT action, status, status_reason, current_traversal_id, raw_template_id, prev_raw_template_id, last_good_template_id, disable_rollback FROM stack WHERE id = $1`, [s.id]))
    out += table('templates', await q(`SELECT t.id, t.created_at, (SELECT string_agg(DISTINCT split_part(v->'properties'->>'content', ':', 1), ',') FROM jsonb_each(t.template->'resources') e(k, v)) AS seeds, (SELECT count(*) FROM jsonb_object_keys(t.template->'resources')) AS resources FROM raw_template t WHERE t.stack_id = $1 ORDER BY t.created_at`, [s.id]))
    out += table('traversals', await q(`SELECT id, action, raw_template_id, started_at, ended_at, outcome, outcome_reason, superseded_by_id, failure_reason, node_count, roots_pending FROM traversal WHERE stack_id = $1 ORDER BY started_at`, [s.id]))
    out += table('resources', await q(`SELECT id, name, action, status, status_reason, physical_id, current_template_id, requires, replaces, replaced_by, properties->>'content' AS content, engine_id, lock_traversal_id, waiter_traversal_id, waiter_is_update, last_traversal_id, atomic_key FROM resource WHERE stack_id = $1 ORDER BY id`, [s.id]))
    out += table('sync points of the current traversal', await q(`SELECT p.resource_id, p.is_update, p.required, p.satisfied, p.state, p.actor_id FROM sync_point p JOIN stack s ON s.current_traversal_id = p.traversal_id WHERE s.id = $1 ORDER BY p.resource_id, p.is_update`, [s.id]))
    out += table('jobs', await q(`SELECT id, kind, traversal_id, resource_id, is_update, graph_key_id, payload, run_at, locked_by, attempts, created_at FROM job WHERE stack_id = $1 ORDER BY id`, [s.id]))
    out += table('events', await q(`SELECT seq, created_at, traversal_id, kind, resource_id, resource_name, action, status, reason, data FROM event WHERE stack_id = $1 ORDER BY seq`, [s.id]))
  }
  fs.mkdirSync(dir, { recursive: true })
  const file = path.join(dir, `chaos-${new Date().toISOString().replace(/[:.]/g, '-')}.md`)
  fs.writeFileSync(file, out)
  return file
}

/**
 * Template versions (raw_template rows): written once, with the operation
 * that converges to them, and read by the services (a stored template's
 * definition, its parameters, its hidden values).
 */
import type pg from 'pg'

/** A new raw_template row: the template as JSON text, environment and parameters as values (stored as JSON). */
export interface NewTemplate {
  id: string
  source: string
  templateText: string
  environment: unknown
  parameters: unknown
}

/** A raw_template row's values after its id and stack id: source, template (JSON text), environment, parameters. */
export function templateValues(t: NewTemplate): string[] {
  return [t.source, t.templateText, JSON.stringify(t.environment ?? {}), JSON.stringify(t.parameters ?? {})]
}

export async function insertTemplate(client: pg.PoolClient, stackId: string, t: NewTemplate): Promise<void> {
  await client.query(`INSERT INTO raw_template (id, stack_id, source, template, environment, parameters) VALUES ($1, $2, $3, $4, $5, $6)`, [t.id, stackId, ...templateValues(t)])
}

/** A raw_template row as stored. */
export type TemplateRow = {
  id: string
  source: string
  template: Record<string, unknown>
  environment: Record<string, unknown>
  parameters: Record<string, unknown>
}

export async function templateById(pool: pg.Pool, templateId: string): Promise<TemplateRow | null> {
  const { rows } = await pool.query<TemplateRow>('SELECT id, source, template, environment, parameters FROM raw_template WHERE id = $1', [templateId])
  return rows[0] ?? null
}

/** What an update that reuses a stored template takes from it: its text, environment and parameters. */
export async function templateInputs(pool: pg.Pool, templateId: string): Promise<Pick<TemplateRow, 'source' | 'environment' | 'parameters'> | null> {
  const { rows } = await pool.query<Pick<TemplateRow, 'source' | 'environment' | 'parameters'>>('SELECT source, environment, parameters FROM raw_template WHERE id = $1', [templateId])
  return rows[0] ?? null
}

/** The names of the template's parameters declared `immutable` (Heat's). */
export async function immutableParameters(pool: pg.Pool, templateId: string): Promise<string[]> {
  const { rows } = await pool.query(
    `SELECT coalesce(array_agg(k), '{}') AS names FROM raw_template, jsonb_each(CASE WHEN jsonb_typeof(template->'parameters') = 'object' THEN template->'parameters' ELSE '{}' END) AS p(k, v)
      WHERE id = $1 AND (v->'immutable' = 'true'::jsonb OR v->>'immutable' = 'true')`,
    [templateId],
  )
  return rows[0].names as string[]
}

/** Of a template, only its description and parameter schemas (the template's key), and the parameter values given. */
export async function templateHeading(pool: pg.Pool, templateId: string | null): Promise<{ template: { description?: unknown; parameters?: unknown }; parameters: Record<string, unknown> } | null> {
  const { rows } = await pool.query(
    `SELECT jsonb_build_object('description', template->'description', 'parameters', template->'parameters') AS template, parameters FROM raw_template WHERE id = $1`,
    [templateId],
  )
  return rows[0] ?? null
}

/** The template's `resources` section (each resource's definition). */
export async function templateResources(pool: pg.Pool, templateId: string | null): Promise<Record<string, unknown> | null> {
  const { rows: [t] } = await pool.query(`SELECT template->'resources' AS resources FROM raw_template WHERE id = $1`, [templateId])
  return (t?.resources as Record<string, unknown> | null | undefined) ?? null
}

/** How many templates the stack has had, and the newest one's time: templates are only ever added, so these say whether anything derived from them still holds. */
export async function templateVersionKey(pool: pg.Pool, stackId: string): Promise<{ n: number; at: Date | null } | undefined> {
  const { rows: [k] } = await pool.query(`SELECT count(*)::int AS n, max(created_at) AS at FROM raw_template WHERE stack_id = $1`, [stackId])
  return k
}

/** A template of the stack with hidden parameters: their schemas, and the values it was given. */
export type HiddenParametersRow = { schemas: Record<string, { hidden?: unknown; default?: unknown; type?: unknown } | null> | null; parameters: Record<string, unknown> | null; environment: Record<string, unknown> | null }

/** On the pool, or inside a caller's transaction (the preview reads it in the same snapshot as the rows). */
export async function hiddenParameterTemplates(q: pg.Pool | pg.PoolClient, stackId: string): Promise<HiddenParametersRow[]> {
  const { rows } = await q.query<HiddenParametersRow>(
    `SELECT template->'parameters' AS schemas, parameters, environment FROM raw_template
      WHERE stack_id = $1 AND jsonb_path_exists(template, '$.parameters.* ? (@.hidden == true || @.hidden == "true")')`,
    [stackId],
  )
  return rows
}

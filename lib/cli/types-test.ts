/**
 * `npx kiln-types-test <provider URL> --secret <secret> [--properties file.json] [--type Name]`:
 * the conformance kit (lib/resources/conformance.ts) against a running HTTP
 * provider, before it is registered: reads its types (GET /types, signed) and
 * runs every check on each. Exits 1 when a check fails.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import { Command } from 'commander'
import { silentLogger } from '../logger'
import { checkType, type CheckResult } from '../resources/conformance'
import { outsideRun } from '../resources/outside-run'
import { send } from '../resources/provider/client'
import { TypesReply } from '../resources/provider/protocol'
import { providerTypes, type ProviderRecord } from '../resources/provider/type'
import type { ResourceContext } from '../resources/types'
import { table } from './render'

export const program = new Command('kiln-types-test')
  .description("check an HTTP resource provider against what Kiln's engine relies on (docs/reference/provider-protocol.md)")
  .argument('<url>', "the provider's base URL")
  .requiredOption('--secret <secret>', 'the secret its requests are signed with')
  .option('--properties <file>', 'JSON: properties to create each type with, by type name (default: made from its schema)')
  .option('--type <name>', 'check this type only')
  .option('--json', 'print the results as JSON')
  .action(async (url: string, o: { secret: string; properties?: string; type?: string; json?: boolean }) => {
    const results = await checkProvider(url, o.secret, o.properties ? JSON.parse(fs.readFileSync(o.properties, 'utf8')) : {}, o.type)
    if (o.json) console.log(JSON.stringify(results, null, 2))
    else console.log(table(results.map((r) => ({ ...r, outcome: r.outcome.toUpperCase() })), ['type', 'check', 'outcome', 'detail']))
    if (results.some((r) => r.outcome === 'fail')) process.exitCode = 1
  })

/** Every check on every type (or `only`) of the provider at `url`. */
export async function checkProvider(url: string, secret: string, properties: Record<string, Record<string, unknown>> = {}, only?: string): Promise<CheckResult[]> {
  const base = url.replace(/\/+$/, '')
  const reply = await send({ name: 'under test', url: base, secret }, 'types', null, TypesReply, { signal: AbortSignal.timeout(20_000) })
  if (reply.kind !== 'ok') throw new Error(`GET ${base}/types: ${reply.kind === 'accepted' ? 'answered 202' : `HTTP ${reply.status}: ${reply.error}`}`)
  const record: ProviderRecord = { id: 'under-test', projectId: null, name: 'under test', prefix: 'UnderTest', url: base, secret, types: reply.value.types }
  const stackId = crypto.randomUUID()
  const results: CheckResult[] = []
  for (const t of providerTypes(record)) {
    const own = t.name.replace(/^UnderTest::/, '')
    if (only && own !== only) continue
    const context = (row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal): ResourceContext => ({
      ...outsideRun('the conformance kit'),
      // No callback can reach the kit: a 202 fails the action there ("does not wait").
      signals: { ...outsideRun('the conformance kit').signals, watch: async () => ({ wakeKey: 'none', seen: 0 }) },
      projectId: crypto.randomUUID(),
      stackId,
      stackName: 'kiln-types-test',
      resourceName: row.name,
      resourceUuid: row.uuid,
      traversalId: row.traversalId,
      replacesUuid: null,
      physicalName: `kiln-types-test-${row.uuid.slice(0, 8)}`,
      signal,
      log: silentLogger,
      config: { workspaceDir: '/nonexistent' },
      objects: null as never, // a provider's type keeps no records in Kiln
    })
    for (const r of await checkType(t, { context, ...(properties[own] ? { properties: properties[own] } : {}) })) results.push({ ...r, type: own })
  }
  return results
}

export function run(argv: string[] = process.argv): Promise<unknown> {
  return program.parseAsync(argv).catch((err) => {
    console.error(`kiln-types-test: ${err instanceof Error ? err.message : String(err)}`)
    process.exit(2)
  })
}

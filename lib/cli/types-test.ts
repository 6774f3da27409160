/**
 * `npx kiln-types-test <provider URL | type package> [--secret <secret>] [--properties file.json] [--type Name]`:
 * the conformance kit (lib/resources/conformance.ts) against a running HTTP
 * provider, before it is registered (its types read with GET /types, signed),
 * or against the types of a type package (as KILN_TYPE_PACKAGES names it).
 * Runs every check on each type; exits 1 when a check fails.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Command } from 'commander'
import { silentLogger } from '../logger'
import { checkType, type CheckResult } from '../resources/conformance'
import { outsideRun, refusingObjects } from '../resources/outside-run'
import { loadTypePackages } from '../resources/packages'
import { send } from '../resources/provider/client'
import { TypesReply } from '../resources/provider/protocol'
import { providerTypes, type ProviderRecord } from '../resources/provider/type'
import type { ResourceContext } from '../resources/types'
import { table } from './render'

export const program = new Command('kiln-types-test')
  .description("check an HTTP resource provider against what Kiln's engine relies on (docs/reference/provider-protocol.md)")
  .argument('<target>', "a provider's base URL (http:// or https://), or a type package (a package name, or a path starting with . or /)")
  .option('--secret <secret>', "the secret a provider's requests are signed with")
  .option('--properties <file>', 'JSON: properties to create each type with, by type name (default: made from its schema)')
  .option('--type <name>', 'check this type only')
  .option('--json', 'print the results as JSON')
  .action(async (target: string, o: { secret?: string; properties?: string; type?: string; json?: boolean }) => {
    const properties = o.properties ? (JSON.parse(fs.readFileSync(o.properties, 'utf8')) as Record<string, Record<string, unknown>>) : {}
    let results: CheckResult[]
    if (/^https?:\/\//.test(target)) {
      if (!o.secret) throw new Error('--secret: the secret the provider checks its requests with')
      results = await checkProvider(target, o.secret, properties, o.type)
    } else results = await checkPackage(target, properties, o.type)
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
  const results: CheckResult[] = []
  for (const t of providerTypes(record)) {
    const own = t.name.replace(/^UnderTest::/, '')
    if (only && own !== only) continue
    const context = (row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal) => kitContext(row, signal, { workspaceDir: '/nonexistent' })
    for (const r of await checkType(t, { context, ...(properties[own] ? { properties: properties[own] } : {}) })) results.push({ ...r, type: own })
  }
  return results
}

/** Every check on every type (or `only`) of a type package. Its types get a directory of their own as workspace; records of outside objects need Kiln's database and are refused. */
export async function checkPackage(spec: string, properties: Record<string, Record<string, unknown>> = {}, only?: string): Promise<CheckResult[]> {
  const types = await loadTypePackages([spec])
  const workspaceDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-types-test-'))
  const results: CheckResult[] = []
  try {
    for (const t of types) {
      if (only && t.name !== only) continue
      const context = (row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal) => kitContext(row, signal, { workspaceDir })
      for (const r of await checkType(t, { context, ...(properties[t.name] ? { properties: properties[t.name] } : {}) })) results.push(r)
    }
  } finally {
    fs.rmSync(workspaceDir, { recursive: true, force: true })
  }
  return results
}

/** A context for one row, outside any traversal of Kiln's: no callback reaches it, and it keeps no records. */
function kitContext(row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal, config: ResourceContext['config']): ResourceContext {
  return {
    ...outsideRun('the conformance kit'),
    // No callback can reach the kit: a 202 fails the action there ("does not wait").
    signals: { ...outsideRun('the conformance kit').signals, watch: async () => ({ wakeKey: 'none', seen: 0 }) },
    projectId: crypto.randomUUID(),
    stackId: KIT_STACK,
    stackName: 'kiln-types-test',
    resourceName: row.name,
    resourceUuid: row.uuid,
    traversalId: row.traversalId,
    replacesUuid: null,
    physicalName: `kiln-types-test-${row.uuid.slice(0, 8)}`,
    signal,
    log: silentLogger,
    config,
    // Records of outside objects need Kiln's database: such a type is checked in Kiln's own suite.
    objects: refusingObjects('the conformance kit'),
  }
}

const KIT_STACK = crypto.randomUUID()

export function run(argv: string[] = process.argv): Promise<unknown> {
  return program.parseAsync(argv).catch((err) => {
    console.error(`kiln-types-test: ${err instanceof Error ? err.message : String(err)}`)
    process.exit(2)
  })
}

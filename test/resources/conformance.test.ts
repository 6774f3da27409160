/**
 * The conformance kit (lib/resources/conformance.ts, `npx kiln-types-test`)
 * on every built-in type, with their records in a real database and the
 * target server the suite runs; on the example Notes provider, a process of
 * its own; and on a provider that breaks a rule, which the kit must catch.
 */
import crypto from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest'
import { checkProvider } from '../../lib/cli/types-test'
import { checkType, type CheckResult } from '../../lib/resources/conformance'
import { builtinTypes } from '../../lib/resources/registry'
import type { ResourceContext } from '../../lib/resources/types'
import { startNotesProvider } from '../helpers/notes-provider'
import { outsideRecords, resourceContext, type OutsideRecords } from '../helpers/resource-context'
import { PROVIDER_SECRET, startTestProvider } from '../helpers/test-provider'

let records: OutsideRecords
let dir: string
beforeAll(async () => {
  records = await outsideRecords()
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kiln-conformance-'))
})
afterAll(async () => {
  await records?.close()
  fs.rmSync(dir, { recursive: true, force: true })
})

const failures = (rs: CheckResult[]) => rs.filter((r) => r.outcome === 'fail').map((r) => `${r.type}: ${r.check}: ${r.detail}`)

/** What the built-in types are created with where a sample from the schema cannot do. */
const FIXTURES: Record<string, Record<string, unknown>> = {
  'Kiln::File': { path: 'conformance/a.txt', content: 'hello' },
  // A command whose object is a file named after the row, in a directory the test gives.
  'Kiln::Exec': {
    environment: { MARKS: '' },
    create: ['/bin/sh', '-c', 'touch "$MARKS/$KILN_RESOURCE_UUID"; echo "{\\"made\\": true}"'],
    observe: ['/bin/sh', '-c', 'if [ -e "$MARKS/$KILN_RESOURCE_UUID" ]; then echo "{\\"exists\\": true}"; else echo "{\\"exists\\": false}"; fi'],
    delete: ['/bin/sh', '-c', 'rm -f "$MARKS/$KILN_RESOURCE_UUID"'],
  },
  'OS::Heat::WaitCondition': { handle: 'st-h-000000000001', count: 1, timeout: 60 },
}

describe('the conformance kit', () => {
  test('every built-in type passes', async () => {
    const stackId = crypto.randomUUID()
    const context = (row: { uuid: string; traversalId: string; name: string }, signal: AbortSignal): ResourceContext => ({
      ...resourceContext(records, { stackId, resourceName: row.name, resourceUuid: row.uuid, traversalId: row.traversalId, physicalName: `st-${row.name}-${row.uuid.slice(0, 8)}`.slice(0, 60), config: { workspaceDir: dir, targetDatabaseUrl: inject('adminUrl') } }, signal),
      // A wait condition is checked with its signal already there: waiting itself needs a traversal (test/resources/wait-condition.test.ts).
      signals: {
        waitFor: async () => ({ kind: 'done', signals: [{ id: '1', status: 'SUCCESS', reason: 'ready', data: 'x' }] }),
        list: async () => [],
        watch: async () => ({ wakeKey: 'none', seen: 0 }),
        clear: async () => {},
      },
    })
    const results: CheckResult[] = []
    const marks = fs.mkdtempSync(path.join(dir, 'marks-'))
    FIXTURES['Kiln::Exec']!.environment = { MARKS: marks }
    for (const t of builtinTypes({ exec: { commands: ['/bin/sh'] } })) results.push(...(await checkType(t, { context, ...(FIXTURES[t.name] ? { properties: FIXTURES[t.name] } : {}) })))
    expect(failures(results)).toEqual([])
    // The checks that apply to types with objects outside Kiln ran, and passed.
    const passed = (type: string) => results.filter((r) => r.type === type && r.outcome === 'pass').map((r) => r.check)
    expect(passed('Kiln::File')).toEqual(['idempotent create', 'observe agrees with create', 'adopt agrees with observe', 'abort is honoured', 'delete of what is gone succeeds'])
    expect(passed('Kiln::Postgres::Database')).toEqual(['idempotent create', 'observe agrees with create', 'adopt agrees with observe', 'abort is honoured', 'delete of what is gone succeeds'])
    expect(passed('Kiln::Exec')).toEqual(['idempotent create', 'observe agrees with create', 'abort is honoured', 'delete of what is gone succeeds'])
  }, 120_000)

  test('the example Notes provider passes, through kiln-types-test', async () => {
    const { url, proc: notes } = await startNotesProvider(dir, PROVIDER_SECRET)
    try {
      const results = await checkProvider(url, PROVIDER_SECRET)
      expect(failures(results)).toEqual([])
      expect(results.filter((r) => r.outcome === 'pass').map((r) => r.check)).toEqual(['idempotent create', 'observe agrees with create', 'adopt agrees with observe', 'abort is honoured', 'delete of what is gone succeeds'])
    } finally {
      notes.kill('SIGTERM')
    }
  })

  test('a provider that shows a secret in a plain attribute fails', async () => {
    const p = await startTestProvider({ leakSecret: true })
    try {
      const results = await checkProvider(p.url, PROVIDER_SECRET, { Bucket: { name: 'leaky', token: 'hush-hush-123' } }, 'Bucket')
      expect(failures(results)).toEqual(['Bucket: secrets stay secret: attributes url hold a secret property\'s value and are not declared secret'])
    } finally {
      await p.stop()
    }
  })
})

/**
 * Heat's 21 convergence scenarios (heat/tests/convergence/scenarios/*.py),
 * each under its Heat name, run by the lock-step harness over the real
 * PostgreSQL store. The scripts, templates, noop budgets and assertions are
 * Heat's (heat/tests/convergence/scenarios/ and framework/ in openstack/heat).
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { testDatabase, type TestDatabase } from '../helpers/db'
import { getAtt, getRes, Scenario, type Tmpl } from './harness'

let db: TestDatabase
beforeAll(async () => {
  db = await testDatabase()
})
afterAll(async () => {
  await db.drop()
})

const BASE5: Tmpl = {
  A: {},
  B: {},
  C: { props: { a: '4alpha' }, deps: ['A', 'B'] },
  D: { props: { c: getRes('C') } },
  E: { props: { ca: getAtt('C', 'a') } },
}
const withF = (t: Tmpl, deps: string[]): Tmpl => ({ ...t, F: { deps } })
const without = (t: Tmpl, name: string): Tmpl => Object.fromEntries(Object.entries(t).filter(([n]) => n !== name))

const REPL = (x: string): Tmpl => ({
  A: { props: { a: x } },
  B: {},
  C: { props: { '!a': getAtt('A', 'a') }, deps: ['B'] },
  D: { props: { c: getRes('C') } },
  E: { props: { ca: getAtt('C', '!a') } },
})
const USER = (x: string): Tmpl => ({
  A: { props: { a: x } },
  B: {},
  newC: { props: { '!a': getAtt('A', 'a') }, deps: ['B'] },
  D: { props: { c: getRes('newC') } },
  E: { props: { ca: getAtt('newC', '!a') } },
})

async function scenario(script: (s: Scenario) => void): Promise<Scenario> {
  const s = await Scenario.open(db.url)
  try {
    script(s)
    await s.run()
    return s
  } finally {
    await s.close()
  }
}

describe('Heat convergence scenarios', () => {
  test('basic_create', async () => {
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
    })
  })

  test('basic_create_rollback', async () => {
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(3)
      s.rollback()
      s.noop(6)
      s.verify({})
      s.call('stack state', async () => expect(await s.stackState()).toBe('ROLLBACK_COMPLETE'))
    })
  })

  test('basic_update_delete', async () => {
    const t2 = withF(BASE5, ['D', 'E'])
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(2)
      s.updateStack(t2)
      s.call('check_resource_count(3)', () => s.assertResourceCount(3))
      s.noop(11)
      s.verify(t2)
      s.deleteStack()
      s.noop(6)
      s.verify({})
      s.call('stack state', async () => expect(await s.stackState()).toBe('DELETE_COMPLETE'))
    })
  })

  test('create_early_delete', async () => {
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(2)
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })

  test('disjoint_create', async () => {
    const t: Tmpl = { A: {}, B: {}, C: { props: { a: '4alpha' }, deps: ['A'] }, D: { props: { c: getRes('C') } }, E: {} }
    await scenario((s) => {
      s.createStack(t)
      s.noop(5)
      s.verify(t)
    })
  })

  test('multiple_update', async () => {
    const t2 = without(BASE5, 'E')
    const t3 = withF(BASE5, ['D', 'E'])
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.updateStack(t2)
      s.noop(10)
      s.verify(t2)
      s.updateStack(t3)
      s.noop(12)
      s.verify(t3)
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })

  test('update_add', async () => {
    const t2 = withF(BASE5, ['D', 'E'])
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.updateStack(t2)
      s.noop(11)
      s.verify(t2)
    })
  })

  test('update_add_concurrent', async () => {
    const t2 = withF(BASE5, ['D', 'E'])
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(2)
      s.updateStack(t2)
      s.call('check_resource_count(3)', () => s.assertResourceCount(3))
      s.noop(11)
      s.verify(t2)
    })
  })

  test('update_add_rollback', async () => {
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.updateStack(withF(BASE5, ['A']))
      s.noop(4)
      s.rollback()
      s.noop(8)
      s.verify(BASE5)
    })
  })

  test('update_add_rollback_early', async () => {
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.updateStack(withF(BASE5, ['D']))
      s.noop(4)
      s.rollback()
      s.noop(8)
      s.verify(BASE5)
    })
  })

  test('update_interrupt_create', async () => {
    const t1: Tmpl = { A: {}, B: { props: { a: '4alpha' }, deps: ['A'] }, C: { props: { a: 'foo' }, deps: ['B'] }, D: { props: { a: 'bar' }, deps: ['C'] } }
    const t2: Tmpl = { ...t1, C: { props: { a: 'blarg' }, deps: ['B'] }, D: { props: { a: 'wibble' }, deps: ['C'] } }
    await scenario((s) => {
      s.createStack(t1)
      s.noop(1)
      s.updateStack(t2)
      s.call('check_resource_count(2)', () => s.assertResourceCount(2))
      s.noop(11)
      s.verify(t2)
    })
  })

  test('update_remove', async () => {
    const t2 = without(BASE5, 'E')
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.updateStack(t2)
      s.noop(9)
      s.verify(t2)
    })
  })

  test('update_remove_rollback', async () => {
    const t2: Tmpl = { A: {}, C: { props: { a: '4alpha' }, deps: ['A'] }, D: { props: { c: getRes('C') } }, E: { props: { ca: getAtt('C', 'a') } } }
    await scenario((s) => {
      s.createStack(BASE5)
      s.noop(5)
      s.verify(BASE5)
      s.call('store_b_uuid', async () => void (s.stored.B = await s.uuidOf('B')))
      s.updateStack(t2)
      s.noop(2)
      s.rollback()
      s.noop(10)
      s.verify(BASE5)
      s.call('check_b_not_replaced', async () => expect(await s.uuidOf('B')).toBe(s.stored.B))
    })
  })

  test('update_replace', async () => {
    const t3 = withF(REPL('updated'), ['D', 'E'])
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.call('store_c_uuid', async () => void (s.stored.C = await s.uuidOf('C')))
      s.updateStack(REPL('updated'))
      s.noop(11)
      s.verify(REPL('updated'))
      s.updateStack(t3)
      s.noop(12)
      s.verify(t3)
      s.call('check_c_replaced', async () => expect(await s.uuidOf('C')).not.toBe(s.stored.C))
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })

  test('update_replace_invert_deps', async () => {
    const t1: Tmpl = { A: { props: { '!a': 'initial' } }, B: { props: { '!b': 'first' }, deps: ['A'] } }
    const t2: Tmpl = { A: { props: { '!a': 'updated' }, deps: ['B'] }, B: { props: { '!b': 'second' } } }
    await scenario((s) => {
      s.createStack(t1)
      s.noop(4)
      s.verify(t1)
      s.updateStack(t2)
      s.noop(4)
      s.call('check_resource_counts(A:2, B:1)', () => s.assertCounts({ A: 2, B: 1 }))
      s.noop(2)
      s.verify(t2)
      s.call('check_resource_counts(A:1, B:1)', () => s.assertCounts({ A: 1, B: 1 }))
      s.deleteStack()
      s.noop(3)
      s.verify({})
    })
  })

  test('update_replace_missed_cleanup', async () => {
    const t3 = withF(REPL('updated'), ['D', 'E'])
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.updateStack(REPL('updated'))
      s.noop(7)
      s.updateStack(t3)
      s.call('check_c_count(2)', () => s.assertCounts({ C: 2 }))
      s.noop(11)
      s.verify(t3)
      s.deleteStack()
      s.noop(12)
      s.verify({})
    })
  })

  test('update_replace_missed_cleanup_delete', async () => {
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.updateStack(REPL('updated'))
      s.noop(7)
      s.deleteStack()
      s.call('check_c_count(2)', () => s.assertCounts({ C: 2 }))
      s.noop(11)
      s.verify({})
    })
  })

  test('update_replace_rollback', async () => {
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.updateStack(REPL('updated'))
      s.noop(4)
      s.rollback()
      s.call('check_c_count(2)', () => s.assertCounts({ C: 2 }))
      s.noop(11)
      s.verify(REPL('initial'))
      s.deleteStack()
      s.noop(12)
      s.verify({})
    })
  })

  test('update_user_replace', async () => {
    const t3 = withF(USER('updated'), ['D', 'E'])
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.call('store_c_uuid', async () => void (s.stored.C = await s.uuidOf('C')))
      s.updateStack(USER('updated'))
      s.noop(11)
      s.verify(USER('updated'))
      s.updateStack(t3)
      s.noop(12)
      s.verify(t3)
      s.call('check_c_replaced', async () => expect(await s.uuidOf('newC')).not.toBe(s.stored.C))
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })

  test('update_user_replace_rollback', async () => {
    await scenario((s) => {
      s.createStack(REPL('initial'))
      s.noop(5)
      s.verify(REPL('initial'))
      s.updateStack(USER('updated'))
      s.noop(3)
      s.rollback()
      s.noop(12)
      s.verify(REPL('initial'))
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })

  test('update_user_replace_rollback_update', async () => {
    const t1: Tmpl = {
      A: { props: { a: 'initial' } },
      B: {},
      C: { props: { '!a': getAtt('A', 'a'), b: 'val1' } },
      D: { props: { c: getRes('C') } },
      E: { props: { ca: getAtt('C', '!a') } },
    }
    const t2: Tmpl = { ...t1, A: { props: { a: 'updated' } } }
    const t3: Tmpl = { ...t1, C: { props: { '!a': getAtt('A', 'a'), b: 'val2' } } }
    await scenario((s) => {
      s.createStack(t1)
      s.noop(5)
      s.verify(t1)
      s.updateStack(t2)
      s.noop(3)
      s.rollback()
      s.noop(12)
      s.verify(t1)
      s.updateStack(t3)
      s.noop(3)
      s.verify(t3)
      s.noop(4)
      s.deleteStack()
      s.noop(6)
      s.verify({})
    })
  })
})

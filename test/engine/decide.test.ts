/**
 * The decisions after a look at the object (decideObserved): Heat's
 * needs_replace_failed for a FAILED row, and `converge`, against what
 * decideUpdate decides without one.
 */
import { describe, expect, test } from 'vitest'
import { decideObserved, decideUpdate, type RowState, type SeenObject, type UpdateInputs } from '../../lib/engine/decide'

const row = (over: Partial<RowState> = {}): RowState => ({
  action: 'UPDATE',
  status: 'COMPLETE',
  type: 'Kiln::File',
  properties: { path: 'a', content: 'x' },
  currentTemplateId: 't1',
  deletionPolicy: 'Delete',
  ...over,
})
const inputs = (r: RowState, changed: string[] = [], notUpdatable: string[] = []): UpdateInputs => ({ row: r, newType: 'Kiln::File', newProperties: {}, changed, notUpdatable })
const exists = (over: Partial<Extract<SeenObject, { state: 'exists' }>> = {}): SeenObject => ({ state: 'exists', changed: [], notUpdatable: [], problems: [], replaceFailed: null, ...over })

describe('a FAILED row', () => {
  const failed = row({ status: 'FAILED' })

  test('is replaced without a look, as Heat does by default', () => {
    expect(decideUpdate(inputs(failed))).toEqual({ kind: 'replace', reason: 'UPDATE_FAILED resource is replaced' })
    expect(decideObserved(inputs(failed), null, { converge: false })).toEqual({ kind: 'replace', reason: 'UPDATE_FAILED resource is replaced' })
  })

  test('whose object exists is updated in place, even with nothing changed', () => {
    expect(decideObserved(inputs(failed), exists(), { converge: false })).toEqual({ kind: 'update', changed: [], repair: true })
    expect(decideObserved(inputs(row({ action: 'CHECK', status: 'FAILED' })), exists({ changed: ['content'] }), { converge: false })).toEqual({ kind: 'update', changed: ['content'], repair: true })
  })

  test('is replaced when its object is gone, when the type asks, or when a changed property cannot be updated in place', () => {
    expect(decideObserved(inputs(failed), { state: 'gone' }, { converge: false })).toEqual({ kind: 'replace', reason: 'the object is gone (observed)' })
    expect(decideObserved(inputs(failed), exists({ replaceFailed: 'the volume is in error' }), { converge: false })).toEqual({ kind: 'replace', reason: 'UPDATE_FAILED resource is replaced: the volume is in error' })
    expect(decideObserved(inputs(failed), exists({ changed: ['path'], notUpdatable: ['path'] }), { converge: false })).toEqual({ kind: 'replace', reason: 'update of path requires replacement' })
  })

  test('of another type, or deleted, is replaced whatever was seen', () => {
    expect(decideObserved({ ...inputs(failed), newType: 'OS::Heat::None' }, exists(), { converge: false }).kind).toBe('replace')
    expect(decideObserved(inputs(row({ action: 'DELETE', status: 'FAILED' })), exists(), { converge: false }).kind).toBe('replace')
  })
})

describe('converge', () => {
  test('compares the new definition with the object as seen: a drifted object is updated although the template did not change', () => {
    expect(decideUpdate(inputs(row()))).toEqual({ kind: 'noop' })
    expect(decideObserved(inputs(row()), exists({ changed: ['content'] }), { converge: true })).toEqual({ kind: 'update', changed: ['content'], repair: true })
    expect(decideObserved(inputs(row()), exists({ problems: ['the login role is missing'] }), { converge: true })).toEqual({ kind: 'update', changed: [], repair: true })
    expect(decideObserved(inputs(row(), ['content']), exists(), { converge: true })).toEqual({ kind: 'noop' })
    expect(decideObserved(inputs(row()), { state: 'gone' }, { converge: true }).kind).toBe('replace')
  })

  test('without converge, a look at a healthy row changes nothing', () => {
    expect(decideObserved(inputs(row(), ['content']), exists(), { converge: false })).toEqual({ kind: 'update', changed: ['content'] })
    expect(decideObserved(inputs(row()), { state: 'gone' }, { converge: false })).toEqual({ kind: 'noop' })
  })
})

/**
 * Deferred nodes across a thread boundary. postMessage copies values with the
 * structured clone algorithm, which keeps plain data and turns class
 * instances into plain objects. A Deferred travels as a Map (fn, args, path):
 * templates, parameters and attributes are JSON and never hold a Map, so a
 * Map on the other side is always a Deferred, whatever keys a tenant chose.
 * Its `secret` flag (its arguments read a secret) travels with it.
 */
import { Deferred } from '../template/evaluate'

export function encodeDeferred(v: unknown): unknown {
  if (v instanceof Deferred) return new Map<string, unknown>([['fn', v.fn], ['args', encodeDeferred(v.args)], ['path', v.path], ['secret', v.secret]])
  if (Array.isArray(v)) return v.map(encodeDeferred)
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encodeDeferred(x)]))
  return v
}

export function decodeDeferred(v: unknown): unknown {
  if (v instanceof Map) return new Deferred(v.get('fn') as string, decodeDeferred(v.get('args')), v.get('path') as (string | number)[], v.get('secret') === true)
  if (Array.isArray(v)) return v.map(decodeDeferred)
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, decodeDeferred(x)]))
  return v
}

/**
 * The stack page's early reads (components/api.ts): the script the page's HTML
 * carries, and how the page's first load takes its answers. The browser test
 * (live-graph.test.ts) checks the same on a real page.
 */
import vm from 'node:vm'
import { afterEach, beforeEach, expect, test } from 'vitest'
import { api, earlyReadsScript, withEarlyReads } from '../../components/api'

const asked: string[] = []
let failNext = false
const g = globalThis as unknown as Record<string, unknown>

beforeEach(() => {
  asked.length = 0
  g.window = globalThis
  // The network as the page's scripts see it: each request answers with the path it was asked for.
  g.fetch = async (path: string) => {
    asked.push(path)
    if (failNext) {
      failNext = false
      throw new TypeError('network down')
    }
    return new Response(JSON.stringify({ path, n: asked.length }), { status: 200 })
  }
})
afterEach(() => {
  delete g.window
  delete g.__kilnEarlyReads
})

/** Runs the HTML's script as the browser would. */
const runScript = (paths: string[]) => vm.runInThisContext(earlyReadsScript(paths))

test('the script cannot end its own element, whatever the paths hold', () => {
  const text = earlyReadsScript(['/api/stacks/x</script><script>alert(1)//'])
  expect(text).not.toMatch(/<\/script/i)
  runScript(['/api/stacks/x</script><b>'])
  expect(asked).toEqual(['/api/stacks/x</script><b>'])
})

test("the first load takes the HTML's answers; nothing asks for them again, and a later load asks afresh", async () => {
  runScript(['/api/a', '/api/b'])
  expect(asked).toEqual(['/api/a', '/api/b'])
  const [a, b] = await withEarlyReads(() => Promise.all([api('GET', '/api/a'), api('GET', '/api/b')]))
  expect([a, b]).toEqual([{ path: '/api/a', n: 1 }, { path: '/api/b', n: 2 }])
  expect(asked).toEqual(['/api/a', '/api/b'])
  // Taken once: the next load is answered by the server, not by the page's first answers.
  expect(await withEarlyReads(() => api('GET', '/api/a'))).toEqual({ path: '/api/a', n: 3 })
})

test('only a GET of the same path, inside the first load, takes an early answer', async () => {
  runScript(['/api/a'])
  // Outside withEarlyReads the page asks as usual (and the early answer stays for the load).
  expect(await api('GET', '/api/a')).toEqual({ path: '/api/a', n: 2 })
  await withEarlyReads(async () => {
    const other = api('GET', '/api/a?x=1')
    const write = api('POST', '/api/a', {})
    expect(await Promise.all([other, write])).toEqual([{ path: '/api/a?x=1', n: 3 }, { path: '/api/a', n: 4 }])
  })
  expect(asked).toEqual(['/api/a', '/api/a', '/api/a?x=1', '/api/a'])
})

test('an early read that never reached the server is asked for again', async () => {
  failNext = true
  runScript(['/api/a'])
  expect(await withEarlyReads(() => api('GET', '/api/a'))).toEqual({ path: '/api/a', n: 2 })
  expect(asked).toEqual(['/api/a', '/api/a'])
})

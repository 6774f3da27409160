/**
 * The routes the API really serves: registered on a router exactly as
 * createApi does (handlers are not run), with paths rebuilt from the router's
 * patterns in `/api/stacks/{stack}` style. Used by the fuzz and isolation
 * suites, so a new route is covered the day it is added.
 */
import type { ApiDeps } from '../../lib/api/deps'
import { heatRoutes } from '../../lib/api/heat-routes'
import { Router } from '../../lib/api/http'
import { kilnRoutes } from '../../lib/api/kiln-routes'
import type { Principal } from '../../lib/services/accounts'
import type { SignalService } from '../../lib/services/signals'

export interface RouteDef {
  method: string
  path: string
  public: boolean
}

export function registeredRoutes(): RouteDef[] {
  const router = new Router<Principal>()
  kilnRoutes({} as ApiDeps, router, {} as SignalService)
  heatRoutes({} as ApiDeps, router, {} as SignalService)
  return router.routes.map((r) => {
    let i = 0
    const path = r.pattern.source
      .replace(/^\^/, '')
      .replace(/\\?\/\?\$$/, '')
      .replace(/\(\[\^\\?\/\]\+\)/g, () => `{${r.keys[i++]}}`)
      .replace(/\\(.)/g, '$1')
    return { method: r.method, path, public: r.public }
  })
}

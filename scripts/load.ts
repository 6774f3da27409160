/**
 * `npm run load [-- --seconds 30 --clients 50 --sockets 100 --stacks 5 --workers 2]`
 *
 * The long load suite: the production web process and workers on an embedded
 * PostgreSQL of its own, loopback clients only. Prints the report as JSON;
 * exits 1 if a request failed or a socket missed an event.
 */
import { makeProject } from '../test/helpers/api-server'
import { TestCluster } from '../test/helpers/cluster'
import { ownPostgres } from '../test/helpers/own-postgres'
import { numberFlag } from './args'
import { startWebServer } from '../test/helpers/web-server'
import { runLoad } from '../test/reliability/load'

const argv = process.argv.slice(2)
const num = (flag: string, def: number) => numberFlag(argv, flag, def)

async function main() {
  const pg = await ownPostgres('load')
  const url = pg.url
  const c = await TestCluster.start(url, { workers: num('--workers', 2), leaseMs: 3000 })
  const web = await startWebServer(c)
  let ok: boolean
  try {
    const a = await makeProject(c, 'admin')
    const report = await runLoad(c, { url: web.url, token: a.token, clients: num('--clients', 50), sockets: num('--sockets', 100), stacks: num('--stacks', 5), seconds: num('--seconds', 30) })
    console.log(JSON.stringify(report, null, 2))
    ok = report.errors === 0 && report.dropped === 0 && report.disordered === 0
  } finally {
    await web.close()
    await c.stop()
    await pg.stop()
  }
  process.exit(ok ? 0 : 1)
}

void main()

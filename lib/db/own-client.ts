/**
 * A connection of its own, outside any pool (bootstrap, migrations, a check
 * at start-up), that a server going away cannot crash the process through.
 *
 * pg reports a session the server ends while the client waits between two
 * statements (a restart or shutdown: 57P01) as an 'error' event on the
 * client, and an 'error' event no one listens to ends the process: a worker
 * starting while PostgreSQL restarts died that way. The statement in flight,
 * or the next one, fails with the error anyway; the listener only keeps the
 * event from being fatal.
 */
import pg from 'pg'

export async function openClient(config: pg.ClientConfig): Promise<pg.Client> {
  const client = new pg.Client(config)
  client.on('error', () => {})
  await client.connect()
  return client
}

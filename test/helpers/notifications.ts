/**
 * The payloads of one channel's notifications sent while `fn` runs, read on a
 * connection of its own (LISTEN before, a round trip after: PostgreSQL delivers
 * a notification sent before that round trip's reply ahead of it).
 */
import pg from 'pg'

export async function notificationsDuring<T>(url: string, channel: string, fn: () => Promise<T>): Promise<{ value: T; payloads: string[] }> {
  const listener = new pg.Client({ connectionString: url })
  await listener.connect()
  const payloads: string[] = []
  listener.on('notification', (m) => {
    if (m.channel === channel) payloads.push(m.payload ?? '')
  })
  try {
    await listener.query(`LISTEN ${pg.escapeIdentifier(channel)}`)
    const value = await fn()
    await listener.query('SELECT 1')
    return { value, payloads }
  } finally {
    await listener.end()
  }
}

/**
 * A SCRAM-SHA-256 verifier for PostgreSQL (RFC 5802/7677, the form
 * pg_authid.rolpassword holds): `CREATE/ALTER ROLE ... PASSWORD '<verifier>'`
 * stores it as it is, so the password itself never reaches the server, its
 * log (log_statement, or a failed statement logged with its text) or
 * pg_stat_activity.
 */
import { createHash, createHmac, pbkdf2, randomBytes } from 'node:crypto'
import { promisify } from 'node:util'

const derive = promisify(pbkdf2)

/** PostgreSQL's own default (scram_iterations). */
export const SCRAM_ITERATIONS = 4096

/**
 * `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64).
 * The password must be ASCII (SASLprep leaves it unchanged): Kiln generates
 * base64url passwords.
 */
export async function scramVerifier(password: string, salt: Buffer = randomBytes(16), iterations = SCRAM_ITERATIONS): Promise<string> {
  if (!/^[\x20-\x7e]*$/.test(password)) throw new Error('a SCRAM verifier is computed here for printable ASCII passwords only')
  const salted = await derive(password, salt, iterations, 32, 'sha256')
  const clientKey = createHmac('sha256', salted).update('Client Key').digest()
  const storedKey = createHash('sha256').update(clientKey).digest()
  const serverKey = createHmac('sha256', salted).update('Server Key').digest()
  return `SCRAM-SHA-256$${iterations}:${salt.toString('base64')}$${storedKey.toString('base64')}:${serverKey.toString('base64')}`
}

/**
 * Pages that need a session send a visitor without the session cookie to
 * the login form on the server, at once: the client would otherwise load
 * its scripts and ask the API first. An expired or revoked session still has
 * a cookie; the page's Shell finds that out and redirects the same way.
 */
import { cookies } from 'next/headers'
import { redirect } from 'next/navigation'

export async function requireSessionCookie(path: string): Promise<void> {
  if (!(await cookies()).has('kiln_session')) redirect(`/login?next=${encodeURIComponent(path)}`)
}

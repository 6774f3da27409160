/**
 * Heat's error body (heat/api/middleware/fault.py) for every error on a /v1
 * route, which heatclient parses: `{code, title, explanation, error: {message,
 * type, traceback}}`, where `title` and `explanation` are webob's for the
 * status and heatclient shows `error.message`.
 */
import { DomainError } from '../plan/errors'
import { HttpError, INTERNAL_MESSAGE, json } from './http'

/** Per status: webob's title and explanation (Heat's fault middleware sends both) and the error type Kiln reports. */
const FAULTS: Record<number, { title: string; type: string; explanation: string }> = {
  400: { title: 'Bad Request', type: 'HTTPBadRequest', explanation: 'The server could not comply with the request since it is either malformed or otherwise incorrect.' },
  401: { title: 'Unauthorized', type: 'HTTPUnauthorized', explanation: 'This server could not verify that you are authorized to access the document you requested.  Either you supplied the wrong credentials (e.g., bad password), or your browser does not understand how to supply the credentials required.' },
  403: { title: 'Forbidden', type: 'Forbidden', explanation: 'Access was denied to this resource.' },
  404: { title: 'Not Found', type: 'EntityNotFound', explanation: 'The resource could not be found.' },
  405: { title: 'Method Not Allowed', type: 'HTTPMethodNotAllowed', explanation: 'The method is not allowed for this resource.' },
  409: { title: 'Conflict', type: 'ActionInProgress', explanation: 'There was a conflict when trying to complete your request.' },
  413: { title: 'Request Entity Too Large', type: 'RequestLimitExceeded', explanation: 'The body of your request was too large for this server.' },
  415: { title: 'Unsupported Media Type', type: 'HTTPUnsupportedMediaType', explanation: 'The request media type is not supported by this server.' },
  429: { title: 'Too Many Requests', type: 'HTTPTooManyRequests', explanation: 'The client has sent too many requests in a given amount of time.' },
  500: { title: 'Internal Server Error', type: 'HTTPInternalServerError', explanation: 'The server has either erred or is incapable of performing the requested operation.' },
}

/**
 * Any thrown value as Heat's error body. Anything unexpected is a 500 that names nothing of the server
 * (`onUnexpected` logs the details); the traceback is always null, as in Heat without debug.
 */
export function heatError(err: unknown, onUnexpected: (err: unknown) => void): Response {
  const known = err instanceof HttpError || err instanceof DomainError
  if (!known) onUnexpected(err)
  const status = known ? err.status : 500
  const fault = FAULTS[status] ?? FAULTS[status >= 500 ? 500 : 400]!
  const message = known ? err.message : INTERNAL_MESSAGE
  return json({ code: status, title: fault.title, explanation: fault.explanation, error: { message, type: fault.type, traceback: null } }, status, err instanceof HttpError ? err.headers : {})
}

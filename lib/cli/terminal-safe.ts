/**
 * Text that came from the server, made safe for the user's terminal. Resource
 * names, reasons, outputs and error messages are chosen by whoever wrote the
 * template or drove the resource: printed raw, an escape sequence in them
 * could retitle the window, clear the screen, rewrite earlier lines or worse.
 */
import stripAnsi from 'strip-ansi'

/** C0 controls except tab and newline (so also CR, which can overwrite a line), DEL, and C1 controls. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const CONTROLS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f]/g

/** For human output: escape sequences (CSI, OSC, DCS…, with their payloads) removed, then every other control character. */
export function terminalSafe(text: string): string {
  return stripAnsi(text).replace(CONTROLS, '')
}

/**
 * For JSON output: the characters JSON.stringify leaves raw that a terminal may act on (DEL and C1; it
 * already escapes C0) written as \u escapes, so the value a script parses is unchanged.
 */
export function jsonSafe(json: string): string {
  return json.replace(/[\u007f-\u009f]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

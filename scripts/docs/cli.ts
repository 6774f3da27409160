/**
 * docs/reference/cli.md from the CLI's own commander definitions
 * (lib/cli/main.ts): every command with its arguments and options, their
 * descriptions, defaults and choices. A command without a description is an
 * error (it would be a blank line in `kiln --help` too).
 */
import type { Command, Option } from 'commander'
import { program } from '../../lib/cli/main'
import { cell, code, generatedHeader, table } from './markdown'

export const CLI_SOURCE = 'lib/cli/main.ts'

/** Leaf commands with their full names (`stack create`), in definition order. */
function leaves(cmd: Command, prefix: string[] = []): { path: string[]; cmd: Command }[] {
  return cmd.commands.flatMap((c) => (c.commands.length ? leaves(c, [...prefix, c.name()]) : [{ path: [...prefix, c.name()], cmd: c }]))
}

const visible = (options: readonly Option[]) => options.filter((o) => !o.hidden && o.long !== '--help')

function optionRows(options: readonly Option[]): string[][] {
  return visible(options).map((o) => {
    const notes: string[] = []
    if (o.mandatory) notes.push('required')
    if (o.argChoices) notes.push(`one of ${o.argChoices.map(code).join(', ')}`)
    // A negated flag's implicit default (true) says nothing a reader needs; false for a plain flag neither.
    const def = o.negate || o.defaultValue === undefined || o.defaultValue === false ? '' : code(String(o.defaultValue))
    if (o.variadic || o.description.includes('repeatable')) notes.push('repeatable')
    return [code(o.flags), o.description.replace(/\s*\(repeatable\)/, ''), def, notes.join('; ')]
  })
}

export function cliReference(): string {
  const out = [
    generatedHeader('CLI reference', [CLI_SOURCE]),
    '`kiln` is the command-line client of the REST API. Run it as `npx kiln …` in a checkout',
    '(or `npm run kiln -- …`). How to set it up and use it: [the CLI guide](../guide/cli.md).',
    '',
    '`<stack>` is a stack\'s name or id; `<name>` is the name of a new stack. Output is a table,',
    'or JSON with `--json`. The exit status is 0 on success, 1 when the server refused the request',
    'or a followed operation ended FAILED, and 2 when the command line or configuration is wrong',
    '(no token, a file that cannot be read).',
    '',
    '## Global options',
    '',
    'Given before the command: `npx kiln --json stack list`.',
    '',
    table(['Option', 'Meaning', 'Default', 'Notes'], optionRows(program.options)),
    '',
    '## Commands',
    '',
    table(
      ['Command', 'What it does'],
      leaves(program).map(({ path, cmd }) => [`[${code(`kiln ${path.join(' ')}`)}](#${anchor(path)})`, cmd.description()]),
    ),
    '',
  ]
  for (const { path, cmd } of leaves(program)) {
    const description = cmd.description()
    if (!description) throw new Error(`${CLI_SOURCE}: the command "${path.join(' ')}" has no .description()`)
    const args = cmd.registeredArguments.map((a) => (a.required ? `<${a.name()}>` : `[${a.name()}]`))
    out.push(`### kiln ${path.join(' ')}`, '', `${code(['kiln', ...path, ...args].join(' '))}: ${cell(description)}.`, '')
    const rows = optionRows(cmd.options)
    if (rows.length) out.push(table(['Option', 'Meaning', 'Default', 'Notes'], rows), '')
    else out.push('No options.', '')
  }
  return out.join('\n')
}

/** The heading anchor of `### kiln stack create` (GitHub's rule, as in scripts/docs/links.ts). */
const anchor = (path: string[]) => ['kiln', ...path].join('-').toLowerCase()

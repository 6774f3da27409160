/** `--flag <number>` from the command line of the long-suite scripts, with a default. */
export function numberFlag(argv: string[], flag: string, def: number): number {
  const i = argv.indexOf(flag)
  return i >= 0 ? Number(argv[i + 1]) : def
}

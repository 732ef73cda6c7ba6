import { EXIT } from './exit-codes';

/** What each exit code means, as `--help` ends. */
export const EXIT_CODES_HELP = [
  'Exit codes:',
  `  ${EXIT.ok}  done`,
  `  ${EXIT.failed}  failed`,
  `  ${EXIT.usage}  usage error: unknown command or option, missing argument, bad option value`,
  `  ${EXIT.unreachable}  storage unreachable`,
].join('\n');

/** The "Examples:" block a command shows after its own help. */
export function examples(...lines: string[]): string {
  return ['', 'Examples:', ...lines.map((line) => `  ${line}`)].join('\n');
}

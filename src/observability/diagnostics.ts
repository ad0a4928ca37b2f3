import type { DiagLogger } from '@opentelemetry/api';
import { format } from 'node:util';

/**
 * The SDK's diagnostics on stderr, one line each. By hand: DiagConsoleLogger prints info and debug
 * through console.info and console.debug, on stdout, which carries only JSON lines.
 */
export function stderrDiagLogger(): DiagLogger {
  const write =
    (level: string) =>
    (message: string, ...args: unknown[]): void => {
      process.stderr.write(`opentelemetry ${level}: ${format(message, ...args).replace(/\s*\n\s*/g, ' ')}\n`);
    };
  return { error: write('error'), warn: write('warn'), info: write('info'), debug: write('debug'), verbose: write('verbose') };
}

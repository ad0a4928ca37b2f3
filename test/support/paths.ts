import { join } from 'node:path';

/** The repository's root directory (package.json, dist/, deploy/, helm/), whatever the working directory. */
export const ROOT = join(__dirname, '..', '..');

export const SRC = join(ROOT, 'src');

/** The production entry point, built by `npm run build`: telemetry first, then the service. */
export const MAIN = join(ROOT, 'dist', 'main.js');

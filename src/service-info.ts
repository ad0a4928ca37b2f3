import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What this build is: used in logs, the build-info metric and the telemetry resource. */
export interface ServiceInfo {
  readonly name: string;
  readonly version: string;
  /** The source revision the image was built from (BUILD_REVISION, set by the Dockerfile), or "unknown". */
  readonly revision: string;
}

let cached: ServiceInfo | undefined;

/** Read once from package.json beside dist/ (the image keeps it for exactly this). */
export function serviceInfo(): ServiceInfo {
  if (cached === undefined) {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { name: string; version: string };
    cached = {
      name: pkg.name,
      version: pkg.version,
      revision: process.env.BUILD_REVISION?.trim() || 'unknown',
    };
  }
  return cached;
}

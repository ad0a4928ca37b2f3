import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** What this build is: used in logs, the build-info metric and the telemetry resource. */
export interface ServiceInfo {
  readonly name: string;
  readonly version: string;
  /** The source revision the build was made from (Config.buildRevision), or "unknown". */
  readonly revision: string;
  /** The deployed configuration's checksum (Config.configRevision), or "unknown". */
  readonly config: string;
}

let cached: Pick<ServiceInfo, 'name' | 'version'> | undefined;

/** The package's name and version, read once from package.json beside dist/ (the image keeps it for exactly this). */
export function packageInfo(): Pick<ServiceInfo, 'name' | 'version'> {
  if (cached === undefined) {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { name: string; version: string };
    cached = { name: pkg.name, version: pkg.version };
  }
  return cached;
}

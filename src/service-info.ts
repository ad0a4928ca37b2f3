import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ServiceInfo {
  readonly name: string;
  readonly version: string;
  readonly revision: string;
  /** The deployed configuration's checksum (Config.configRevision), or "unknown". */
  readonly config: string;
}

/** The image keeps package.json beside dist/ for this. Read twice at start (the telemetry bundle, the service). */
export function packageInfo(): Pick<ServiceInfo, 'name' | 'version'> {
  const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { name: string; version: string };
  return { name: pkg.name, version: pkg.version };
}

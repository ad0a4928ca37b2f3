import { readFileSync } from 'node:fs';
import { join } from 'node:path';

export interface ServiceInfo {
  readonly name: string;
  readonly version: string;
  readonly revision: string;
  /** The deployed configuration's checksum (Config.configRevision), or "unknown". */
  readonly config: string;
}

let cached: Pick<ServiceInfo, 'name' | 'version'> | undefined;

/** The image keeps package.json beside dist/ for this. */
export function packageInfo(): Pick<ServiceInfo, 'name' | 'version'> {
  if (cached === undefined) {
    const pkg = JSON.parse(readFileSync(join(__dirname, '..', 'package.json'), 'utf8')) as { name: string; version: string };
    cached = { name: pkg.name, version: pkg.version };
  }
  return cached;
}

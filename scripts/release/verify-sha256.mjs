// Checks a downloaded file against the SHA-256 its publisher lists next to it (helm's
// `helm-vX.Y.Z-linux-amd64.tar.gz.sha256sum`: "<64 hex>  <file name>", or the hash alone), before
// anything of it runs. The release job installs helm from get.helm.sh this way; the npm tarball
// that scripts/ci/install-helm.sh uses is checked only by a SHA-1 pinned here.
//
// Usage: node scripts/release/verify-sha256.mjs <file> <checksum file>   (exit 1 on any mismatch)
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

const [file, sumFile] = process.argv.slice(2);
if (file === undefined || sumFile === undefined) {
  console.error('usage: verify-sha256.mjs <file> <checksum file>');
  process.exit(2);
}
const [expected = '', listedName] = readFileSync(sumFile, 'utf8').trim().split(/\s+/);
const fail = (message) => {
  console.error(`verify-sha256: ${basename(file)}: ${message}`);
  process.exit(1);
};
if (!/^[0-9a-f]{64}$/i.test(expected)) fail(`${basename(sumFile)} holds no SHA-256`);
// sha256sum's binary-mode marker (`*name`) is part of the listing, not the name.
if (listedName !== undefined && listedName.replace(/^\*/, '') !== basename(file)) fail(`${basename(sumFile)} lists ${listedName}, not this file`);
const actual = createHash('sha256').update(readFileSync(file)).digest('hex');
if (actual !== expected.toLowerCase()) fail(`SHA-256 ${actual}, published ${expected.toLowerCase()}`);
console.log(`verify-sha256: ${basename(file)} matches ${basename(sumFile)}`);

// Reads the base images of the Dockerfile, as its "base images" block declares them: alias stages
// `FROM [--platform=...] <name>:<tag>@sha256:<digest> AS <alias>`, and stages that start from an
// alias unless a build argument names another image (`FROM ${ARG:-alias}`).
//
//   node scripts/ci/dockerfile-bases.mjs --pinned      the pinned references, one per line (what a
//                                                      machine that reaches the registries pulls)
//   node scripts/ci/dockerfile-bases.mjs --stand-ins   their tags alone (what scripts/ci/base-images.sh
//                                                      builds where nothing can be pulled)
//   node scripts/ci/dockerfile-bases.mjs --build-args  ARG=<tag> per line: the build arguments that
//                                                      make the Dockerfile use those stand-ins
//
// Fails, naming the line, when a FROM names an image not pinned by tag and digest, or a build
// argument stands for two different tags: a base image cannot slip in unpinned.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const PINNED = /^([^\s@:]+(?::\d+)?(?:\/[^\s@:]+)*):([\w][\w.-]*)@sha256:[0-9a-f]{64}$/;
const OVERRIDABLE = /^\$\{(\w+):-([\w.-]+)\}$/;

const mode = process.argv.slice(2).find((arg) => ['--pinned', '--stand-ins', '--build-args'].includes(arg));
const dockerfile = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'Dockerfile');
if (mode === undefined) {
  console.error('usage: dockerfile-bases.mjs --pinned | --stand-ins | --build-args');
  process.exit(2);
}

const fail = (line, message) => {
  console.error(`${dockerfile}:${line}: ${message}`);
  process.exit(1);
};

/** alias -> { ref, tag } of the pinned stages; ARG -> tag of the stand-in it names. */
const pinned = new Map();
const buildArgs = new Map();
const stages = new Set();
readFileSync(dockerfile, 'utf8')
  .split('\n')
  .forEach((text, index) => {
    const words = text.trim().split(/\s+/);
    if (words[0]?.toUpperCase() !== 'FROM') return;
    const [image = '', as, stage] = words.slice(1).filter((word) => !word.startsWith('--'));
    const line = index + 1;
    const overridable = OVERRIDABLE.exec(image);
    if (overridable) {
      const [, arg = '', alias = ''] = overridable;
      const base = pinned.get(alias);
      if (base === undefined) fail(line, `${image}: ${alias} is not a pinned base-image stage declared above`);
      const earlier = buildArgs.get(arg);
      if (earlier !== undefined && earlier !== base.tag) fail(line, `${arg} stands for both ${earlier} and ${base.tag}`);
      buildArgs.set(arg, base.tag);
    } else if (!stages.has(image)) {
      const match = PINNED.exec(image);
      if (!match) fail(line, `${image} is not pinned as <name>:<tag>@sha256:<digest>`);
      pinned.set(stage ?? image, { ref: image, tag: `${match[1]}:${match[2]}` });
    }
    if (as?.toUpperCase() === 'AS' && stage !== undefined) stages.add(stage);
  });
if (pinned.size === 0) fail(0, 'no pinned base image');

const unique = (values) => [...new Set(values)];
const lines = {
  '--pinned': unique([...pinned.values()].map((base) => base.ref)),
  '--stand-ins': unique([...pinned.values()].map((base) => base.tag)),
  '--build-args': [...buildArgs].map(([arg, tag]) => `${arg}=${tag}`),
}[mode];
console.log(lines.join('\n'));

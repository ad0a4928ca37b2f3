// `npm run build`: compiles src/ to dist/ with tsc, then bundles the telemetry part with esbuild.
//
//   dist/**/*.js            tsc's output, one module per source file, required normally
//   dist/observability/telemetry.bundle.js
//                           dist/observability/telemetry.js with the OpenTelemetry SDK,
//                           auto-instrumentations and their dependencies in one file (far fewer
//                           modules to find, read and compile at start-up). main.js requires it
//                           when tracing is on, and telemetry.js instead when OTEL_SDK_DISABLED=true.
//
// Production packages stay external (the instrumentations must see koa, @koa/router and pino
// required to patch them, and the SDK and the service share one @opentelemetry/api): package.json's
// `dependencies` and what they require, which is what the image installs (`npm ci --omit=dev`).
// What only the bundle needs (the SDK, auto-instrumentations, resources, sdk-metrics) is a
// devDependency: built into the bundle, never shipped (docs/container-image.md).
// `npm run dev` (scripts/dev.mjs) builds the same bundle into dist-dev/ with telemetryBundleOptions.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import * as esbuild from 'esbuild';

const ROOT = path.resolve(import.meta.dirname, '..');
const DIST = path.join(ROOT, 'dist');
const NODE_MODULES = path.join(ROOT, 'node_modules');

function tsc() {
  fs.rmSync(DIST, { recursive: true, force: true });
  const run = spawnSync(process.execPath, [path.join(NODE_MODULES, 'typescript/bin/tsc'), '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'inherit' });
  if (run.status !== 0) process.exit(run.status ?? 1);
}

const packageName = (specifier) =>
  specifier
    .split('/')
    .slice(0, specifier.startsWith('@') ? 2 : 1)
    .join('/');

/** @returns {esbuild.Plugin} */
function externals(shared, entry, outfile) {
  return {
    name: 'product-service-externals',
    setup(build) {
      // dist's own modules, required from the entry point: stay tsc's, beside the bundle.
      build.onResolve({ filter: /^\.\.?\// }, (args) => (args.importer === entry ? { path: args.path, external: true } : undefined));
      // The service's own dependencies: external when the bundle would find the same copy.
      build.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === 'inner' || !shared.has(packageName(args.path))) return undefined;
        const resolved = await build.resolve(args.path, { kind: args.kind, resolveDir: args.resolveDir, pluginData: 'inner' });
        if (resolved.errors.length > 0) return { errors: resolved.errors };
        const topLevel = path.join(NODE_MODULES, packageName(args.path)) + path.sep;
        return resolved.path.startsWith(topLevel) ? { path: args.path, external: true } : resolved;
      });
      // __dirname and __filename of a bundled module would be the bundle's: give them back.
      build.onLoad({ filter: /[\\/]node_modules[\\/].*\.c?js$/ }, async (args) => {
        const source = await fs.promises.readFile(args.path, 'utf8');
        if (!/\b__(dirname|filename)\b/.test(source)) return undefined;
        const rel = (p) => JSON.stringify(path.relative(path.dirname(outfile), p).split(path.sep).join('/'));
        const prelude =
          `var __dirname = require("node:path").join(__bundleDirname, ${rel(path.dirname(args.path))}), ` +
          `__filename = require("node:path").join(__bundleDirname, ${rel(args.path)});`;
        // After the directive prologue: "use strict" must stay first to mean anything.
        const at = /^(?:\s|\/\/[^\n]*|\/\*[\s\S]*?\*\/)*(?:(['"])use strict\1;?)?/.exec(source)?.[0].length ?? 0;
        return { contents: `${source.slice(0, at)}${prelude}${source.slice(at)}`, loader: 'js', resolveDir: path.dirname(args.path) };
      });
    },
  };
}

/**
 * The packages the image installs (`npm ci --omit=dev --omit=optional`): the hoisted ones of the
 * lockfile's production tree. The bundle requires these rather than hold a second copy.
 */
function sharedDependencies() {
  const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8'));
  return new Set(
    Object.entries(lock.packages)
      .filter(([dir, p]) => /^node_modules\/(@[^/]+\/)?[^/]+$/.test(dir) && !p.dev && !p.optional && !p.devOptional)
      .map(([dir]) => dir.slice('node_modules/'.length)),
  );
}

/**
 * esbuild's options for the telemetry bundle of `entry` (dist/observability/telemetry.js; `npm run
 * dev` bundles src/observability/telemetry.ts the same way) into `outfile`.
 * @returns {esbuild.BuildOptions}
 */
export function telemetryBundleOptions(entry, outfile) {
  return {
    entryPoints: [entry],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node22',
    // import() becomes require(). The import()s are of built-ins (the OTLP exporter's node:http):
    // import() of a built-in builds its ES module namespace, which reads every export, and
    // node:http's lazy ones load undici, ~50 ms of the first export blocking the event loop.
    supported: { 'dynamic-import': false },
    // Not minified: it parsed no faster, and stack traces keep their names and lines.
    minify: false,
    legalComments: 'none',
    banner: { js: `// Generated by scripts/build.mjs from ${path.relative(ROOT, entry)}: do not edit.\nvar __bundleDirname = __dirname;` },
    plugins: [externals(sharedDependencies(), entry, outfile)],
    metafile: true,
    logLevel: 'warning',
  };
}

async function bundle() {
  const shared = sharedDependencies();
  const entry = path.join(DIST, 'observability', 'telemetry.js');
  const outfile = path.join(DIST, 'observability', 'telemetry.bundle.js');
  const result = await esbuild.build(telemetryBundleOptions(entry, outfile));
  // Nothing the service requires may be inside: the instrumentations would not see it required.
  const inputs = Object.keys(result.metafile.inputs);
  const leaked = inputs.filter((input) => [...shared].some((name) => input.startsWith(`node_modules/${name}/`)));
  if (leaked.length > 0) throw new Error(`the telemetry bundle contains modules the service requires itself:\n${leaked.join('\n')}`);
  const dynamic = Object.values(result.metafile.outputs).flatMap((output) => output.imports.filter((i) => i.kind === 'dynamic-import'));
  if (dynamic.length > 0) throw new Error(`the telemetry bundle still has import(): ${dynamic.map((i) => i.path).join(', ')}`);
  const bytes = fs.statSync(outfile).size;
  console.log(`${path.relative(ROOT, outfile)}: ${inputs.length} modules, ${(bytes / 1e6).toFixed(1)} MB`);
}

// Run as a script (npm run build); scripts/dev.mjs imports telemetryBundleOptions only. Real paths,
// so that a checkout reached through a symbolic link still builds.
if (process.argv[1] !== undefined && fs.realpathSync(process.argv[1]) === fs.realpathSync(import.meta.filename)) {
  tsc();
  await bundle();
}

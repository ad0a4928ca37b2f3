// The image and the chart start the service the way the benchmark measured it (bench/process-flags.mjs):
// the same Node flags on the command line and in NODE_OPTIONS, and no OTEL_BSP_* of their own, so the
// span batches are the service's defaults that the bench ran (src/observability/telemetry.ts).
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/paths';
import { SERVICE_NODE_ARGS, SERVICE_NODE_OPTIONS } from '../../bench/process-flags.mjs';
import { containerOf, envNames, envValue, set } from './helm';

const NODE = '/nodejs/bin/node';
const MAIN = '/app/dist/main.js';

/** The runtime stage (the Dockerfile's last FROM): its ENTRYPOINT and its ENV NODE_OPTIONS. */
function runtimeStage(): { entrypoint: string[]; nodeOptions: string; env: string } {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const stage = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
  const entrypoint = /^ENTRYPOINT (\[.*\])$/m.exec(stage)?.[1];
  const nodeOptions = /^ENV NODE_OPTIONS="([^"]*)"$/m.exec(stage)?.[1];
  if (entrypoint === undefined || nodeOptions === undefined) throw new Error('the runtime stage has no exec-form ENTRYPOINT or no ENV NODE_OPTIONS');
  return {
    entrypoint: JSON.parse(entrypoint) as string[],
    nodeOptions,
    env: stage
      .split('\n')
      .filter((line) => line.startsWith('ENV '))
      .join('\n'),
  };
}

describe('process flags: the image and the chart run what the bench measured', () => {
  it("the image starts Node with the bench's command-line flags and NODE_OPTIONS, and sets no OTEL_BSP_*", () => {
    const image = runtimeStage();
    expect(image.entrypoint).toEqual([NODE, ...SERVICE_NODE_ARGS, MAIN]);
    expect(image.nodeOptions.split(' ')).toEqual(expect.arrayContaining(SERVICE_NODE_OPTIONS.split(' ')));
    expect(image.env).not.toMatch(/OTEL_BSP_/);
  });

  it.each([[[]], [set('resources.requests.cpu=1')], [set('resources.limits.cpu=1000m', 'resources.requests.cpu=2')]])(
    "a pod of up to one CPU (%j) keeps the image's command; NODE_OPTIONS carries the bench's flags; no OTEL_BSP_*",
    (values) => {
      const container = containerOf(values);
      expect(container.command).toBeUndefined();
      expect(container.args).toBeUndefined();
      expect(envValue(container, 'NODE_OPTIONS').split(' ')).toEqual(expect.arrayContaining(SERVICE_NODE_OPTIONS.split(' ')));
      expect(envNames(container).filter((name) => name.startsWith('OTEL_BSP_'))).toEqual([]);
    },
  );

  it.each([[set('resources.limits.cpu=2')], [set('resources.limits.cpu=1.5')], [set('resources.requests.cpu=1500m')]])(
    "a pod of more than one CPU (%j) starts the image's Node and script without --single-threaded-gc",
    (values) => {
      expect(containerOf(values).command).toEqual([NODE, MAIN]);
    },
  );

  it('Node refuses --single-threaded-gc in NODE_OPTIONS: it has to be on the command line', () => {
    const run = spawnSync(process.execPath, ['-e', ''], { env: { ...process.env, NODE_OPTIONS: SERVICE_NODE_ARGS.join(' ') }, encoding: 'utf8' });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/--single-threaded-gc is not allowed in NODE_OPTIONS/);
    expect(spawnSync(process.execPath, [...SERVICE_NODE_ARGS, '-e', ''], { encoding: 'utf8' }).status).toBe(0);
  });
});

// The chart starts the service the way the benchmark measured it (bench/process-flags.mjs): the
// image's command (its ENTRYPOINT carries the same flags: test/container/image.test.ts) up to one
// CPU, NODE_OPTIONS with the same flags, and no OTEL_BSP_* of its own, so the span batches
// are the service's defaults that the bench ran (src/observability/telemetry.ts).
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { EVERY_POD_NODE_ARGS, SERVICE_NODE_ARGS, SERVICE_NODE_OPTIONS } from '../../bench/process-flags.mjs';
import { containerOf, envNames, envValue, set } from './helm';

const NODE = '/nodejs/bin/node';
const MAIN = '/app/dist/main.js';

describe('process flags: the chart runs what the bench measured', () => {
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
    "a pod of more than one CPU (%j) starts the image's Node and script without the single-CPU GC flags, still without pretenuring",
    (values) => {
      expect(containerOf(values).command).toEqual([NODE, ...EVERY_POD_NODE_ARGS, MAIN]);
    },
  );

  it("Node refuses the GC flags in NODE_OPTIONS, and the command line's semi-space wins over NODE_OPTIONS'", () => {
    const run = spawnSync(process.execPath, ['-e', ''], { env: { ...process.env, NODE_OPTIONS: SERVICE_NODE_ARGS.join(' ') }, encoding: 'utf8' });
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(/--single-threaded-gc is not allowed in NODE_OPTIONS/);
    // The young generation's largest size (two semi-spaces) while a run of survivors grows it.
    const newSpaceMb = (args: readonly string[]): number => {
      const grow =
        "let max = 0; for (let r = 0; r < 6; r++) { const keep = []; for (let i = 0; i < 300000; i++) keep.push({ i }); max = Math.max(max, require('v8').getHeapSpaceStatistics().find((s) => s.space_name === 'new_space').space_size); } console.log(max / 1048576);";
      const out = spawnSync(process.execPath, [...args, '-e', grow], { env: { ...process.env, NODE_OPTIONS: SERVICE_NODE_OPTIONS }, encoding: 'utf8' });
      expect(out.status, out.stderr).toBe(0);
      return Number(out.stdout);
    };
    const semiSpace = (flags: string): number => Number(/--max-semi-space-size=(\d+)/.exec(flags)?.[1]);
    // The same survivors grow it beyond the command line's two semi-spaces only without the command line.
    const commandLine = 2 * semiSpace(SERVICE_NODE_ARGS.join(' '));
    expect(commandLine).toBeLessThan(2 * semiSpace(SERVICE_NODE_OPTIONS));
    expect(newSpaceMb(SERVICE_NODE_ARGS)).toBeLessThanOrEqual(commandLine);
    expect(newSpaceMb([])).toBeGreaterThan(commandLine);
  });
});

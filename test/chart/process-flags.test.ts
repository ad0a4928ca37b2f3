// The chart starts the service the way the benchmark measured it (bench/process-flags.mjs): the
// image's command (its ENTRYPOINT carries the same flags: test/container/image.test.ts) up to one
// CPU, NODE_OPTIONS with the same flags, and no OTEL_BSP_* of its own, so the span batches
// are the service's defaults that the bench ran (src/observability/telemetry.ts). The GC flags stay on the
// command line because Node refuses them in NODE_OPTIONS (`NODE_OPTIONS=--single-threaded-gc node -e ''`;
// docs/performance.md).
import { describe, expect, it } from 'vitest';
import { EVERY_POD_NODE_ARGS, SERVICE_NODE_OPTIONS } from '../../bench/process-flags.mjs';
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
});

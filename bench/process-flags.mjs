// How the image and the chart start the service, which every bench run uses too: the Dockerfile's
// ENTRYPOINT and NODE_OPTIONS, kept equal to these by test/container/image.test.ts (the built
// image) and test/chart/process-flags.test.ts (the rendered chart).
// SERVICE_NODE_ARGS is how V8 collects best on one CPU or less (the chart drops them above one CPU):
// no GC helper threads (they would take the event loop's CPU), so every collection pauses the event
// loop: atomic full collections (without helper threads, incremental marking keeps up only while
// the loop has idle time: a 5-14 ms pause at 1,000 req/s against 30-56 ms atomic, but under full
// load it falls behind and the RSS rises from ~165 to ~225 MB, over the 200 MB goal) and 8 MiB
// semi-spaces (a scavenge's pause grows with the semi-space, not with what survives). They go on
// the command line: Node refuses the first two in NODE_OPTIONS, and the command line's semi-space
// takes precedence over NODE_OPTIONS' (docs/performance.md, "The tail at half a core").
// EVERY_POD_NODE_ARGS go on every pod's command line, whatever its CPU: V8's allocation-site
// pretenuring, tenuring a few per-request allocation sites after a slow warm-up, sent a process into
// promoting nearly all it copied for its whole life (docs/performance.md, "Pretenuring").
export const EVERY_POD_NODE_ARGS = ['--no-allocation-site-pretenuring'];
export const SERVICE_NODE_ARGS = ['--single-threaded-gc', '--no-incremental-marking', '--max-semi-space-size=8', ...EVERY_POD_NODE_ARGS];
export const SERVICE_NODE_OPTIONS = '--max-semi-space-size=16';

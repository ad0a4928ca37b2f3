// How the image and the chart start the service, which every bench run uses too: the Dockerfile's
// ENTRYPOINT and NODE_OPTIONS, kept equal to these by test/container/image.test.ts (the built
// image) and test/chart/process-flags.test.ts (the rendered chart).
// `--single-threaded-gc` goes on the command line because Node refuses it in NODE_OPTIONS.
export const SERVICE_NODE_ARGS = ['--single-threaded-gc'];
export const SERVICE_NODE_OPTIONS = '--max-semi-space-size=16';

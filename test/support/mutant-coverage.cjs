// Preloaded (`node --require`) into the service a test spawns during Stryker's dry run
// (test/support/mutants.ts). The build in Stryker's sandbox is instrumented: it counts the mutants
// it reaches in globalThis.__stryker__.mutantCoverage, which no one outside this process reads.
// This writes them to the file the test names, every 50 ms (a child killed with SIGKILL runs no
// exit handler) and at exit; the test reports them as its own coverage.
'use strict';
const { renameSync, writeFileSync } = require('node:fs');

const file = process.env.STRYKER_CHILD_COVERAGE_FILE;
let written = 0;
function write() {
  // Not instrumented: npm or the dev loop's watcher, which pass the preload on to the service.
  if (globalThis.__stryker__ === undefined) return;
  written += 1;
  writeFileSync(`${file}.tmp`, JSON.stringify({ written, coverage: globalThis.__stryker__?.mutantCoverage }));
  renameSync(`${file}.tmp`, file);
}
// At exit, after the other handlers (pino writes its last lines in one), so that what they run counts too.
function lastAtExit() {
  process.removeListener('exit', write);
  process.on('exit', write);
}
if (file !== undefined) {
  setInterval(() => {
    write();
    lastAtExit();
  }, 50).unref();
  lastAtExit();
}

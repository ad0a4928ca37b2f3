// Checks the rules this repository holds its GitHub Actions workflows to, which actionlint does
// not enforce. Prints one line per violation and exits 1 if there is any.
//
//   1. Actions pinned by commit SHA with a `# v1.2.3` comment: a moved or hijacked tag cannot
//      change what runs, and Dependabot can still update the pin.
//   2. Top-level `permissions` grant nothing beyond read; jobs ask for writes.
//   3. actions/checkout with `persist-credentials: false`: no token left in .git/config.
//   4. No `${{ }}` inside `run:`: nothing from an event is ever pasted into shell code.
//   5. .github/dependabot.yml updates npm, the Dockerfile's base images and the actions.
//   6. Only locked code runs: `--ignore-scripts` on every install, no `npx` fetching a package,
//      raw.githubusercontent.com read at a commit only.
//   7. Every job that can publish or sign runs in an `environment:`, whose reviewers live in the
//      repository settings, out of reach of a side branch (docs/security.md, "Releases").
//
// Usage: node scripts/ci/workflow-policy.mjs   (from anywhere; needs `npm ci` for `yaml`)
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const workflowDir = join(root, '.github', 'workflows');
const problems = [];
const report = (file, line, message) => problems.push(`${relative(root, file)}${line ? `:${line}` : ''}: ${message}`);

const USES = /^\s*(?:-\s+)?uses:\s*(['"]?)([^\s'"#]+)\1\s*(#.*)?$/;
const PINNED = /^[\w.-]+\/[\w./-]+@[0-9a-f]{40}$/;
const VERSION_COMMENT = /^#\s*v\d+(\.\d+){0,2}\b/;

function checkPins(file, text) {
  text.split('\n').forEach((line, index) => {
    const match = USES.exec(line);
    if (!match) return;
    const [, , ref, comment = ''] = match;
    if (ref.startsWith('./') || ref.startsWith('docker://')) return;
    if (!PINNED.test(ref)) {
      report(file, index + 1, `action not pinned by full commit SHA: ${ref}`);
    } else if (!VERSION_COMMENT.test(comment.trim())) {
      report(file, index + 1, `pinned action without a "# vX.Y.Z" comment: ${ref}`);
    }
  });
}

function checkPermissions(file, workflow) {
  const { permissions } = workflow;
  if (permissions === undefined) {
    report(file, 0, 'no top-level permissions (the default token would get the repository default)');
  } else if (typeof permissions === 'string') {
    if (permissions !== 'read-all') report(file, 0, `top-level permissions "${permissions}"`);
  } else {
    for (const [scope, level] of Object.entries(permissions ?? {})) {
      if (level !== 'read' && level !== 'none') {
        report(file, 0, `top-level permission ${scope}: ${level} (grant writes per job)`);
      }
    }
  }
}

function checkSteps(file, workflow) {
  for (const [jobName, job] of Object.entries(workflow.jobs ?? {})) {
    (job.steps ?? []).forEach((step, index) => {
      const where = `job ${jobName}, step ${step.name ?? step.uses ?? index + 1}`;
      if (typeof step.uses === 'string' && step.uses.startsWith('actions/checkout@') && step.with?.['persist-credentials'] !== false) {
        report(file, 0, `${where}: actions/checkout without persist-credentials: false`);
      }
      if (typeof step.run === 'string' && step.run.includes('${{')) {
        report(file, 0, `${where}: \${{ }} inside run: (pass the value through env:)`);
      }
      if (typeof step.run === 'string') checkLockedCode(file, where, step.run);
    });
  }
}

const NPM_INSTALL = /\bnpm\s+(ci|install|i)\b[^\n]*/g;
const FETCH_AND_RUN = /\b(npx|npm\s+exec)\b/;
const RAW_GITHUB = /raw\.githubusercontent\.com\/[^/\s]+\/[^/\s]+\/([^/\s]+)\//g;

function checkLockedCode(file, where, run) {
  for (const [command] of run.matchAll(NPM_INSTALL)) {
    if (!command.includes('--ignore-scripts')) report(file, 0, `${where}: "${command.trim()}" without --ignore-scripts`);
  }
  if (FETCH_AND_RUN.test(run)) report(file, 0, `${where}: npx / npm exec runs a package outside the lockfile (add it to package.json)`);
}

/** Anywhere in the file (env values, scripts): files read from GitHub at a branch change under the workflow. */
function checkRawGitHub(file, text) {
  text.split('\n').forEach((line, index) => {
    for (const [, ref = ''] of line.matchAll(RAW_GITHUB)) {
      if (!/^[0-9a-f]{40}$/.test(ref)) report(file, index + 1, `raw.githubusercontent.com at "${ref}", not at a commit SHA`);
    }
  });
}

const PUBLISHING = ['packages', 'id-token', 'contents'];

function checkEnvironments(file, workflow) {
  for (const [jobName, job] of Object.entries(workflow.jobs ?? {})) {
    const { permissions } = job;
    const writes =
      permissions === 'write-all' ? ['write-all'] : PUBLISHING.filter((scope) => typeof permissions === 'object' && permissions?.[scope] === 'write');
    if (writes.length > 0 && job.uses === undefined && !job.environment) {
      report(file, 0, `job ${jobName}: ${writes.join(', ')} write outside an environment (add environment: with a deployment policy)`);
    }
  }
}

const files = readdirSync(workflowDir)
  .filter((name) => /\.ya?ml$/.test(name))
  .map((name) => join(workflowDir, name));
if (files.length === 0) report(workflowDir, 0, 'no workflow files');
for (const file of files) {
  const text = readFileSync(file, 'utf8');
  const workflow = parse(text);
  checkPins(file, text);
  checkRawGitHub(file, text);
  checkPermissions(file, workflow);
  checkSteps(file, workflow);
  checkEnvironments(file, workflow);
}

const dependabotFile = join(root, '.github', 'dependabot.yml');
const ecosystems = new Set((parse(readFileSync(dependabotFile, 'utf8')).updates ?? []).map((update) => update['package-ecosystem']));
for (const wanted of ['npm', 'docker', 'github-actions']) {
  if (!ecosystems.has(wanted)) report(dependabotFile, 0, `no updates for ${wanted}`);
}

if (problems.length > 0) {
  console.error(problems.join('\n'));
  console.error(`workflow policy: ${problems.length} problem(s)`);
  process.exit(1);
}
console.log(`workflow policy: ${files.length} workflow file(s) and dependabot.yml pass`);

// Generated Markdown inside a hand-written file: the text between `<!-- NAME:start -->` and
// `<!-- NAME:end -->` is replaced, and the rest of the file is left as it is.
// Used by the benchmark (README.md's tables) and the live-alert suite (docs/runbook.md's table).
import fs from 'node:fs';

/**
 * Replaces the block `name` of `file` with `md`. The block is wrapped in prettier-ignore comments,
 * so that a formatter leaves the generated tables exactly as rendered; the blank lines around `md`
 * keep its first and last lines from being read as part of the comments.
 */
export function writeBlock(file, name, md) {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const text = fs.readFileSync(file, 'utf8');
  const i = text.indexOf(start);
  const j = text.indexOf(end);
  if (i < 0 || j < i) throw new Error(`${file} has no ${start} … ${end} block`);
  const block = `${start}\n<!-- prettier-ignore-start -->\n\n${md.trimEnd()}\n\n<!-- prettier-ignore-end -->\n`;
  fs.writeFileSync(file, text.slice(0, i) + block + text.slice(j));
}

export function readBlock(file, name) {
  const text = fs.readFileSync(file, 'utf8');
  const match = new RegExp(`<!-- ${name}:start -->\n<!-- prettier-ignore-start -->\n\n([\\s\\S]*?)\n\n<!-- prettier-ignore-end -->\n<!-- ${name}:end -->`).exec(
    text,
  );
  if (match === null) throw new Error(`${file} has no <!-- ${name}:start --> … <!-- ${name}:end --> block`);
  return match[1];
}

// Reads what the chart's documentation shows, so that the tests prove the recipes and commands a
// reader copies, not a copy of them kept in a test.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { ROOT } from '../support/paths';
import { chartDir } from './helm';

export const CHART_README = join(chartDir, 'README.md');
export const DIAGNOSTICS_DOC = join(ROOT, 'docs/diagnostics.md');

/** The Markdown of the section under the heading `title` (any level), up to the next heading of the same or a higher level. */
export function section(file: string, title: string): string {
  const lines = readFileSync(file, 'utf8').split('\n');
  const start = lines.findIndex((line) => /^#{1,6} /.test(line) && line.replace(/^#+ /, '').trim() === title);
  if (start === -1) throw new Error(`${file} has no heading "${title}"`);
  const level = /^#+/.exec(lines[start] ?? '')?.[0].length ?? 1;
  const end = lines.findIndex((line, i) => i > start && new RegExp(`^#{1,${level}} `).test(line));
  return lines.slice(start + 1, end === -1 ? undefined : end).join('\n');
}

/** The fenced code blocks of `markdown` in language `lang`, in order (indented ones, in list items, dedented). */
export function codeBlocks(markdown: string, lang: string): string[] {
  return [...markdown.matchAll(new RegExp(`^( *)\`\`\`${lang}\\n([\\s\\S]*?)^\\1\`\`\`$`, 'gm'))].map(([, indent = '', body = '']) =>
    body
      .split('\n')
      .map((line) => (line.startsWith(indent) ? line.slice(indent.length) : line))
      .join('\n'),
  );
}

export function firstBlock(file: string, title: string, lang: 'yaml' | 'json'): unknown {
  const [block] = codeBlocks(section(file, title), lang);
  if (block === undefined) throw new Error(`${file}: the section "${title}" has no ${lang} block`);
  return lang === 'json' ? JSON.parse(block) : parse(block);
}

export const readmeYamlBlock = (title: string): unknown => firstBlock(CHART_README, title, 'yaml');

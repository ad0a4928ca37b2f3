// The process tree, read from /proc (Linux), and scratch copies of the sources for the tests that
// run npm or the dev loop.
import { cpSync, mkdtempSync, readdirSync, readFileSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './paths';

interface ProcessEntry {
  pid: number;
  ppid: number;
  cmdline: string;
}

/** Every live process (zombies are left out: they no longer run anything). */
export function processes(): ProcessEntry[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .flatMap((name) => {
      try {
        // pid (comm) state ppid ...: comm may hold spaces or parentheses, so read after the last ')'.
        const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
        const [state, ppid] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (state === 'Z') return [];
        return [{ pid: Number(name), ppid: Number(ppid), cmdline: readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').join(' ') }];
      } catch {
        return []; // ended meanwhile
      }
    });
}

/** The processes below `pid`, parents before their children. */
export function descendants(pid: number): ProcessEntry[] {
  const all = processes();
  const found = all.filter((entry) => entry.ppid === pid);
  for (let i = 0; i < found.length; i += 1) found.push(...all.filter((entry) => entry.ppid === found[i]?.pid));
  return found;
}

/** A new directory holding a copy of src/, scripts/, package.json, package-lock.json (scripts/build.mjs reads it) and tsconfig.json, and node_modules linked: the caller removes it. */
export function scratchCopy(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  for (const entry of ['src', 'scripts', 'package.json', 'package-lock.json', 'tsconfig.json'])
    cpSync(join(ROOT, entry), join(dir, entry), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/**
 * Summarises V8 CPU profiles (the .cpuprofile files `node --cpu-prof` writes) as self time by package
 * and by keyholder function: where the server's CPU went, in figures.
 */

interface ProfileNode {
  readonly id: number;
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly hitCount?: number;
}

interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[];
  readonly timeDeltas?: readonly number[];
}

/** Where a frame's code lives: a package, keyholder's own src/ file, Node's internals, or V8 itself. */
function ownerOf(url: string, root: string, functionName: string): string {
  if (url === '') return functionName.startsWith('(') ? functionName : '(native)';
  const path = url.replace(/^file:\/\//, '');
  const nm = path.lastIndexOf('/node_modules/');
  if (nm >= 0) {
    const parts = path.slice(nm + '/node_modules/'.length).split('/');
    return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : (parts[0] ?? '?');
  }
  if (path.startsWith('node:')) return 'node (internals)';
  if (path.startsWith(root)) return 'keyholder';
  return 'other';
}

export interface ProfileSummary {
  readonly files: number;
  readonly totalMs: number;
  readonly byPackage: Array<[string, number]>;
  readonly byFunction: Array<[string, number]>;
}

/** Self time (ms) per package and per keyholder function, over every profile in `dir`. */
export function summariseProfiles(dir: string, root: string): ProfileSummary {
  const byPackage = new Map<string, number>();
  const byFunction = new Map<string, number>();
  let totalMs = 0;
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
  for (const file of files) {
    const profile = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile;
    const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
    const samples = profile.samples ?? [];
    const deltas = profile.timeDeltas ?? [];
    for (let i = 0; i < samples.length; i++) {
      const node = nodes.get(samples[i] as number);
      if (!node) continue;
      // The time until the next sample is this sample's.
      const ms = (deltas[i + 1] ?? 0) / 1000;
      totalMs += ms;
      const { functionName, url, lineNumber } = node.callFrame;
      const owner = ownerOf(url, root, functionName);
      byPackage.set(owner, (byPackage.get(owner) ?? 0) + ms);
      if (owner === 'keyholder') {
        const name = `${functionName || '(anonymous)'} ${relative(root, url.replace(/^file:\/\//, ''))}:${lineNumber + 1}`;
        byFunction.set(name, (byFunction.get(name) ?? 0) + ms);
      }
    }
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { files: files.length, totalMs, byPackage: sorted(byPackage), byFunction: sorted(byFunction) };
}

export function renderProfile(summary: ProfileSummary, top = 15): string {
  // Shares are of the time the process was busy: idle time depends on the run's length, not on the code.
  const idleMs = summary.byPackage.find(([name]) => name === '(idle)')?.[1] ?? 0;
  const busyMs = Math.max(1, summary.totalMs - idleMs);
  const pct = (ms: number) => `${((100 * ms) / busyMs).toFixed(1)} %`;
  const lines = [
    `CPU profile of keyholder (the production instance) over the whole run: ${summary.files} profile(s), ` +
      `${(summary.totalMs / 1000).toFixed(1)} s sampled, ${(busyMs / 1000).toFixed(1)} s of it busy. Self time, share of the busy time:`,
    '',
    '| package | self time | share |',
    '| --- | ---: | ---: |',
    ...summary.byPackage
      .filter(([name]) => name !== '(idle)')
      .slice(0, top)
      .map(([name, ms]) => `| ${name} | ${(ms / 1000).toFixed(2)} s | ${pct(ms)} |`),
    '',
    '| keyholder function (dist/) | self time | share |',
    '| --- | ---: | ---: |',
    ...summary.byFunction.slice(0, top).map(([name, ms]) => `| \`${name}\` | ${(ms / 1000).toFixed(2)} s | ${pct(ms)} |`),
  ];
  return lines.join('\n');
}

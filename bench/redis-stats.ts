/** Calls per command so far, from the text of INFO commandstats. */
export function commandStats(info: string): Map<string, number> {
  const calls = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) calls.set(match[1] as string, Number(match[2]));
  return calls;
}

/** Microseconds spent per command so far (a script call's include the commands it ran), from the text of INFO commandstats. */
export function commandMicros(info: string): Map<string, number> {
  const usec = new Map<string, number>();
  for (const match of info.matchAll(/^cmdstat_([^:]+):calls=\d+,usec=(\d+)/gm)) usec.set(match[1] as string, Number(match[2]));
  return usec;
}

/** Calls per command between two INFO commandstats reads; the INFO reads themselves are not counted. */
export function commandDeltas(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [name, calls] of after) {
    if (name === 'info') continue;
    const delta = calls - (before.get(name) ?? 0);
    if (delta > 0) out[name] = delta;
  }
  return out;
}

/** Adds `deltas` into `total`, command by command. */
export function addDeltas(total: Record<string, number>, deltas: Record<string, number>): void {
  for (const [name, delta] of Object.entries(deltas)) total[name] = (total[name] ?? 0) + delta;
}

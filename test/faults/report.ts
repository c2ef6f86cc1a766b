import { mkdirSync, writeFileSync } from 'node:fs';
import { VIOLATION_KINDS } from './checker.js';
import type { ScenarioResult } from './scenarios.js';

/** Every violation a scenario counted: the checker's kinds plus its own (all must be 0). */
export function violationsOf(r: ScenarioResult): Record<string, number> {
  return { ...r.counts, ...r.extraViolations };
}

/** Prints one scenario's figures (so a failing run still shows what it measured). */
export function printScenario(r: ScenarioResult): void {
  const nonZero = Object.entries(violationsOf(r)).filter(([, n]) => n > 0);
  const lines = [
    `[faults] ${r.name}: ${r.operations} operations; faults: ${r.faults}`,
    `  violations: ${nonZero.length === 0 ? 'none' : nonZero.map(([k, n]) => `${k}=${n}`).join(', ')}`,
    `  stale writes accepted/rejected: ${r.staleWritesAccepted}/${r.staleWritesRejected}`,
    `  figures: ${
      Object.entries(r.figures)
        .map(([k, n]) => `${k}=${n}`)
        .join(', ') || '-'
    }`,
  ];
  for (const kind of VIOLATION_KINDS) {
    const first = r.report?.violations[kind].slice(0, 3) ?? [];
    if (first.length > 0) lines.push(`  first ${kind}: ${JSON.stringify(first)}`);
  }
  console.log(lines.join('\n'));
}

/** The summary table, as Markdown: one column per violation kind the checker knows, then the scenario's own. */
export function formatTable(results: readonly ScenarioResult[]): string {
  const header =
    '| scenario | operations | faults injected | overlaps | grants during a lease | token regressions | duplicate tokens | ' +
    'expired on arrival | uncertain successes | lock sets not all-or-nothing | semaphore over limit | rwlock writer shared | ' +
    'scenario checks (violations) | stale writes accepted / rejected | other figures |';
  const rule = '|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|';
  const rows = results.map((r) => {
    const c = r.counts;
    const own =
      Object.entries(r.extraViolations)
        .map(([k, n]) => `${k} ${n}`)
        .join(', ') || '-';
    const figures = Object.entries(r.figures)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    return (
      `| ${r.name} | ${r.operations} | ${r.faults} | ${c.overlaps} | ${c.grantsDuringLease} | ${c.tokenRegressions} | ` +
      `${c.duplicateTokens} | ${c.expiredOnArrival} | ${c.uncertainSuccesses} | ${c.lockSetPartial} | ${c.semaphoreOverLimit} | ${c.rwlockWriterShared} | ` +
      `${own} | ${r.staleWritesAccepted} / ${r.staleWritesRejected} | ${figures} |`
    );
  });
  return [header, rule, ...rows].join('\n');
}

/** Prints the table and keeps a copy in test-artifacts/ for the record. */
export function publishTable(results: readonly ScenarioResult[], file: string): void {
  const table = formatTable(results);
  console.log(`\n[faults] summary\n${table}\n`);
  mkdirSync('test-artifacts', { recursive: true });
  writeFileSync(`test-artifacts/${file}`, `${table}\n`);
}

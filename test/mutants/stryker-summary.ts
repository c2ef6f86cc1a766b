import { readFileSync } from 'node:fs';
import { relative } from 'node:path';

/** The parts of a StrykerJS JSON report (mutation-testing-report-schema) this summary reads. */
interface StrykerReport {
  files: Record<
    string,
    { mutants: Array<{ mutatorName: string; replacement?: string; status: string; location: { start: { line: number } } }> }
  >;
}

export interface FileScore {
  readonly file: string;
  readonly score: number;
  readonly killed: number;
  readonly timeout: number;
  readonly survived: number;
  readonly noCoverage: number;
  readonly ignored: number;
  readonly errors: number;
}

export interface StrykerSummary extends Omit<FileScore, 'file'> {
  readonly files: readonly FileScore[];
  readonly survivors: ReadonlyArray<{ file: string; line: number; mutator: string; replacement: string }>;
}

function score(killed: number, timeout: number, survived: number, noCoverage: number): number {
  const valid = killed + timeout + survived + noCoverage;
  return valid === 0 ? 100 : (100 * (killed + timeout)) / valid;
}

/** Per-file and overall mutation scores, computed as Stryker does ("mutation score", not "covered"). */
export function summariseStryker(paths: readonly string[], root: string): StrykerSummary {
  const report: StrykerReport = { files: {} };
  for (const path of paths) Object.assign(report.files, (JSON.parse(readFileSync(path, 'utf8')) as StrykerReport).files);
  const files: FileScore[] = [];
  const survivors: Array<{ file: string; line: number; mutator: string; replacement: string }> = [];
  for (const [name, { mutants }] of Object.entries(report.files).sort(([a], [b]) => a.localeCompare(b))) {
    const file = name.startsWith('/') ? relative(root, name) : name;
    const count = (...statuses: string[]) => mutants.filter((m) => statuses.includes(m.status)).length;
    const [killed, timeout, survived, noCoverage] = [count('Killed'), count('Timeout'), count('Survived'), count('NoCoverage')];
    files.push({
      file,
      score: score(killed, timeout, survived, noCoverage),
      killed,
      timeout,
      survived,
      noCoverage,
      ignored: count('Ignored'),
      errors: count('CompileError', 'RuntimeError'),
    });
    for (const m of mutants) {
      if (m.status === 'Survived' || m.status === 'NoCoverage') {
        survivors.push({
          file,
          line: m.location.start.line,
          mutator: `${m.mutatorName}${m.status === 'NoCoverage' ? ' (no coverage)' : ''}`,
          replacement: m.replacement ?? '',
        });
      }
    }
  }
  const sum = (key: keyof Omit<FileScore, 'file' | 'score'>) => files.reduce((n, f) => n + f[key], 0);
  return {
    files,
    survivors,
    score: score(sum('killed'), sum('timeout'), sum('survived'), sum('noCoverage')),
    killed: sum('killed'),
    timeout: sum('timeout'),
    survived: sum('survived'),
    noCoverage: sum('noCoverage'),
    ignored: sum('ignored'),
    errors: sum('errors'),
  };
}

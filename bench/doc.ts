import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './procs.js';

/**
 * `npm run bench:doc`: copies the committed run (bench/results/latest.md) into the performance
 * document, between its two markers, so the document quotes a run and nothing else. Fails if the
 * markers are missing.
 */
export const PERFORMANCE_DOC = 'docs/performance.md';
const START = '<!-- bench-results:start (npm run bench:doc writes this block from bench/results/latest.md) -->';
const END = '<!-- bench-results:end -->';

const doc = readFileSync(join(ROOT, PERFORMANCE_DOC), 'utf8');
const from = doc.indexOf(START);
const to = doc.indexOf(END);
if (from < 0 || to < from) throw new Error(`${PERFORMANCE_DOC} has no ${START} ... ${END} block`);
const run = readFileSync(join(ROOT, 'bench/results/latest.md'), 'utf8').trim();
writeFileSync(join(ROOT, PERFORMANCE_DOC), `${doc.slice(0, from + START.length)}\n\n${run}\n\n${doc.slice(to)}`);
console.log(`${PERFORMANCE_DOC}: benchmark block replaced with bench/results/latest.md`);

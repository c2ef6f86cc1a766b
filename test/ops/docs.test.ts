import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import MarkdownIt, { type Token } from 'markdown-it';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES, PROBLEM_CODES } from '../../src/domain/error-codes.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { CONFIG_DOC, TABLE_END, TABLE_START, renderConfigTable, withTable } from '../../scripts/config-docs.js';
import { ERRORS_END, ERRORS_START, renderErrorTable, withErrorTable } from '../../scripts/error-docs.js';

/** The README onboards and docs/ holds the rest: sizes, generated parts and every link are checked. */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');
const DOCS = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];
const md = new MarkdownIt({ html: true });

/** All tokens of a document, inline children included. */
function tokens(source: string): Token[] {
  return md.parse(source, {}).flatMap((t) => [t, ...(t.children ?? [])]);
}

/** The anchors GitHub gives the document's headings (same slugs, same -1, -2 for repeats). */
const anchorsOf = new Map<string, Set<string>>();
function anchors(file: string): Set<string> {
  const known = anchorsOf.get(file);
  if (known) return known;
  const source = readFileSync(file, 'utf8');
  const slugger = new GithubSlugger();
  const list = md.parse(source, {});
  const found = new Set<string>();
  list.forEach((token, i) => {
    if (token.type !== 'heading_open') return;
    const inline = list[i + 1];
    const text = (inline?.children ?? []).map((c) => (c.type === 'text' || c.type === 'code_inline' ? c.content : '')).join('');
    found.add(slugger.slug(text));
  });
  anchorsOf.set(file, found);
  return found;
}

describe('documentation', () => {
  it('README is the onboarding page: at most 12 KB, with quick start, API and links to docs/', () => {
    const readme = read('README.md');
    expect(Buffer.byteLength(readme)).toBeLessThanOrEqual(12 * 1024);
    for (const heading of ['## Quick start', '## The API on one screen', '## Documentation']) expect(readme).toContain(heading);
  });

  it('every relative link and #anchor in README.md and docs/*.md resolves', () => {
    const broken: string[] = [];
    let checked = 0;
    for (const doc of DOCS) {
      for (const token of tokens(read(doc))) {
        const attr = token.type === 'link_open' ? token.attrGet('href') : token.type === 'image' ? token.attrGet('src') : null;
        const href = attr === null ? null : String(attr);
        if (href === null || /^[a-z][a-z0-9+.-]*:/i.test(href)) continue;
        checked++;
        const [path = '', anchor] = href.split('#');
        const target = path === '' ? join(ROOT, doc) : resolve(dirname(join(ROOT, doc)), decodeURIComponent(path));
        if (!existsSync(target)) {
          broken.push(`${doc}: ${href} (no such file)`);
          continue;
        }
        if (anchor === undefined) continue;
        if (statSync(target).isDirectory() || !target.endsWith('.md'))
          broken.push(`${doc}: ${href} (an anchor into a file that is not markdown)`);
        else if (!anchors(target).has(anchor)) broken.push(`${doc}: ${href} (no heading #${anchor} in ${relative(ROOT, target)})`);
      }
    }
    expect(broken).toEqual([]);
    expect(checked).toBeGreaterThan(20);
  });

  it('every doc in docs/ opens with a table of contents and is linked from the README', () => {
    const readme = read('README.md');
    for (const doc of DOCS.filter((d) => d.startsWith('docs/'))) {
      const firstList = tokens(read(doc)).find((t) => t.type === 'bullet_list_open');
      expect(firstList, `${doc} has no table of contents`).toBeDefined();
      expect(readme, `README does not link ${doc}`).toContain(`](${doc})`);
    }
  });

  it('the configuration table is the one the config schema generates (npm run docs:config)', () => {
    const doc = readFileSync(CONFIG_DOC, 'utf8');
    expect(doc).toContain(TABLE_START);
    expect(doc).toContain(TABLE_END);
    expect(doc, 'docs/configuration.md is stale: run `npm run docs:config`').toBe(withTable(doc, renderConfigTable()));
    const variables = [...read('src/config.ts').matchAll(/^ {4}([A-Z][A-Z0-9_]+): /gm)].map((m) => m[1]);
    expect(variables.length).toBeGreaterThan(5);
    for (const name of variables) expect(doc, `docs/configuration.md misses ${name}`).toContain(`| \`${name}\``);
  });

  it('documents every error code the API sends, with its status, in docs/api.md', () => {
    const api = read('docs/api.md');
    for (const code of PROBLEM_CODES) {
      expect(api, `docs/api.md misses ${code}`).toContain(`| \`${code}\` | ${ERROR_CODES[code].status} |`);
    }
  });

  it('the table of errors in docs/api.md is the one the table of codes generates (npm run openapi)', () => {
    const api = read('docs/api.md');
    expect(api).toContain(ERRORS_START);
    expect(api).toContain(ERRORS_END);
    expect(api, 'docs/api.md is stale: run `npm run openapi`').toBe(withErrorTable(api, renderErrorTable()));
  });

  it('documents every keyholder metric in docs/operations.md', () => {
    const operations = read('docs/operations.md');
    const names = createMetrics({ defaultMetrics: false })
      .registry.getMetricsAsArray()
      .map((m) => m.name);
    for (const name of names) expect(operations, `docs/operations.md misses ${name}`).toContain(`\`${name}\``);
  });

  it('.ci/run runs exactly the commands the README gives for CI', () => {
    const line = read('README.md')
      .split('\n')
      .find((l) => l.includes('.ci/run'));
    const commands =
      (line ?? '')
        .split('#')[0]
        ?.split('&&')
        .map((c) => c.trim()) ?? [];
    expect(commands).toEqual(['npm ci', 'npm run lint', 'npm test']);
    const ci = read('.ci/run')
      .split('\n')
      .filter((l) => /^npm /.test(l));
    expect(ci).toEqual(commands);
  });
});

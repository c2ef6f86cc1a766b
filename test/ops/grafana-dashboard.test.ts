import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { createMetrics } from '../../src/observability/metrics.js';
import { requireTool } from '../helpers/tools.js';

const DASHBOARD = fileURLToPath(new URL('../../deploy/grafana-dashboard.json', import.meta.url));

interface Panel {
  id: number;
  title: string;
  targets?: Array<{ refId: string; expr: string }>;
}

const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
  uid: string;
  panels: Panel[];
  templating: { list: Array<{ name: string }> };
};
const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ panel: p.title, id: `${p.id}${t.refId}`, expr: t.expr })));

/** Grafana's variables, replaced the way Grafana would before the query reaches Prometheus. */
const asPromql = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', 'keyholder');

const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'bool', 'and', 'or', 'unless', 'offset']);
/** Labels Prometheus adds (job, instance) or histograms carry (le). */
const SCRAPE_LABELS = new Set(['job', 'instance', 'le']);

/** The metric names and label names a PromQL expression refers to. */
function references(promql: string): { metrics: string[]; labels: string[] } {
  const labels: string[] = [];
  let rest = promql.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  rest = rest.replace(/\{([^}]*)\}/g, (_m, inner: string) => {
    for (const m of inner.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)/g)) labels.push(m[1]!);
    return ' ';
  });
  rest = rest.replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)/g, (_m, _kw: string, inner: string) => {
    for (const name of inner
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean))
      labels.push(name);
    return ' ';
  });
  rest = rest.replace(/\[[^\]]*\]/g, ' ');
  const metrics = [...rest.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![\w:])(?!\s*\()/g)]
    .map((m) => m[1]!)
    .filter((w) => !KEYWORDS.has(w));
  return { metrics, labels };
}

describe('deploy/grafana-dashboard.json', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyholder-dashboard-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('has panels for grants, contention, latency and wait, hold time, every primitive, error codes, lost leases and store up', () => {
    const titles = dashboard.panels.map((p) => p.title);
    const wanted = [
      'Grants',
      'Contention',
      'Acquire latency',
      'Wait time',
      'Hold time',
      'Semaphores',
      'Read/write locks',
      'Lock sets',
      'Error answers by code',
      'Lost leases',
      'Store up',
    ];
    for (const title of wanted) expect(titles).toContain(title);
    expect(dashboard.templating.list.map((v) => v.name)).toEqual(['datasource', 'job']);
    expect(queries.length).toBeGreaterThanOrEqual(10);
  });

  it('shows acquire latency without queue time, beside the wait time', () => {
    const panel = (title: string) => dashboard.panels.find((p) => p.title === title) as Panel & { gridPos: { x: number; y: number } };
    const latency = panel('Acquire latency');
    const wait = panel('Wait time');
    // The histograms that include a waiting acquire's time in the queue.
    const withWaits = [
      'keyholder_lock_operation_duration_seconds',
      'keyholder_primitive_operation_duration_seconds',
      'keyholder_lock_wait_seconds',
    ];
    for (const t of latency.targets ?? []) {
      expect(t.expr).toContain('keyholder_acquire_duration_seconds_bucket');
      for (const name of withWaits) expect(t.expr, `Acquire latency: ${t.expr}`).not.toContain(name);
    }
    for (const t of wait.targets ?? []) expect(t.expr).toContain('keyholder_lock_wait_seconds');
    expect(wait.gridPos.y).toBe(latency.gridPos.y);
  });

  it('every query parses (promtool, as recording rules)', () => {
    requireTool('promtool', 'prometheus');
    const rules = {
      groups: [{ name: 'dashboard', rules: queries.map((q) => ({ record: `dashboard:panel_${q.id}`, expr: asPromql(q.expr) })) }],
    };
    writeFileSync(join(dir, 'dashboard-rules.yml'), stringify(rules));
    const check = spawnSync('promtool', ['check', 'rules', 'dashboard-rules.yml'], { cwd: dir, encoding: 'utf8' });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain(`${queries.length} rules found`);
  });

  it('every query names metrics and labels keyholder exports', async () => {
    const exported = new Map<string, Set<string>>();
    const { registry } = createMetrics();
    for (const metric of await registry.getMetricsAsJSON()) {
      // The label names each metric declares (prom-client keeps them on the metric object).
      const declared = (registry.getSingleMetric(metric.name) as unknown as { labelNames?: string[] }).labelNames ?? [];
      const labelNames = new Set<string>(declared);
      const names = String(metric.type) === 'histogram' ? ['_bucket', '_sum', '_count'].map((s) => `${metric.name}${s}`) : [metric.name];
      for (const name of names) exported.set(name, labelNames);
    }
    for (const q of queries) {
      const { metrics, labels } = references(asPromql(q.expr));
      expect(metrics.length, `${q.panel}: ${q.expr}`).toBeGreaterThan(0);
      for (const name of metrics) {
        expect(exported.has(name), `${q.panel}: ${name} is not a metric keyholder exports`).toBe(true);
        for (const label of labels) {
          const known = metrics.some((m) => exported.get(m)?.has(label)) || SCRAPE_LABELS.has(label);
          expect(known, `${q.panel}: no label ${label} on ${metrics.join(', ')}`).toBe(true);
        }
      }
    }
  });
});

import type { Metrics } from '../../src/observability/metrics.js';

/** The values of metric `name`'s series `series` (a histogram's `<name>_count`, say) that match `labels`, added up. */
async function seriesSum(metrics: Metrics, name: string, series: string, labels: Record<string, string>): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric named ${name}`);
  const { values } = await metric.get();
  return values
    .filter(
      (v) =>
        // A counter's or gauge's values name no series of their own: they are the metric's.
        ((v as { metricName?: string }).metricName ?? name) === series &&
        Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
    )
    .reduce((sum, v) => sum + v.value, 0);
}

/** A histogram's _count or _sum, added up over the series that match `labels`. */
export function histogramPart(metrics: Metrics, name: string, part: 'count' | 'sum', labels: Record<string, string> = {}): Promise<number> {
  return seriesSum(metrics, name, `${name}_${part}`, labels);
}

/** A counter's or gauge's value, added up over the series that match `labels`. */
export function metricValue(metrics: Metrics, name: string, labels: Record<string, string> = {}): Promise<number> {
  return seriesSum(metrics, name, name, labels);
}

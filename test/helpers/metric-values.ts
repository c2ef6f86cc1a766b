import type { Metrics } from '../../src/observability/metrics.js';

/** A histogram's _count or _sum, added up over the series that match `labels`. */
export async function histogramPart(
  metrics: Metrics,
  name: string,
  part: 'count' | 'sum',
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = metrics.registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric named ${name}`);
  const { values } = await metric.get();
  return values
    .filter(
      (v) =>
        (v as { metricName?: string }).metricName === `${name}_${part}` &&
        Object.entries(labels).every(([k, want]) => String((v.labels as Record<string, unknown>)[k]) === want),
    )
    .reduce((sum, v) => sum + v.value, 0);
}

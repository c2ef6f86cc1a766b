/**
 * Answered requests counted by method, route and status between two summary lines (ACCESS_LOG=sampled).
 * Counting one costs three map look-ups keyed by strings Fastify already holds (the route pattern is
 * one string per route), and no allocation once a route and status have been seen in the interval.
 */

interface RouteCounts {
  count: number;
  totalMs: number;
  maxMs: number;
  readonly byStatus: Map<number, number>;
}

/** One interval's counts, as the summary line shows them. */
export interface RequestSummary {
  readonly intervalMs: number;
  readonly requests: number;
  readonly routes: Array<{
    readonly method: string;
    readonly route: string | null;
    readonly count: number;
    /** Answers by HTTP status, e.g. { "200": 950, "409": 50 }. */
    readonly status: Record<string, number>;
    readonly meanMs: number;
    readonly maxMs: number;
  }>;
}

export class RequestCounts {
  private byRoute = new Map<string | null, Map<string, RouteCounts>>();
  private total = 0;
  private since = Date.now();

  add(method: string, route: string | null, status: number, elapsedMs: number): void {
    let byMethod = this.byRoute.get(route);
    if (byMethod === undefined) this.byRoute.set(route, (byMethod = new Map<string, RouteCounts>()));
    let counts = byMethod.get(method);
    if (counts === undefined) byMethod.set(method, (counts = { count: 0, totalMs: 0, maxMs: 0, byStatus: new Map() }));
    counts.count++;
    counts.totalMs += elapsedMs;
    if (elapsedMs > counts.maxMs) counts.maxMs = elapsedMs;
    counts.byStatus.set(status, (counts.byStatus.get(status) ?? 0) + 1);
    this.total++;
  }

  /** The counts since the last call, then starts again from zero; undefined when there were none. */
  take(now = Date.now()): RequestSummary | undefined {
    const intervalMs = now - this.since;
    this.since = now;
    if (this.total === 0) return undefined;
    const routes: RequestSummary['routes'] = [];
    for (const [route, byMethod] of this.byRoute) {
      for (const [method, c] of byMethod) {
        routes.push({
          method,
          route,
          count: c.count,
          status: Object.fromEntries([...c.byStatus].map(([s, n]) => [String(s), n])),
          meanMs: Math.round((c.totalMs / c.count) * 100) / 100,
          maxMs: Math.round(c.maxMs * 100) / 100,
        });
      }
    }
    routes.sort((a, b) => b.count - a.count);
    const summary = { intervalMs, requests: this.total, routes };
    this.byRoute = new Map();
    this.total = 0;
    return summary;
  }
}

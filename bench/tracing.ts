import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { RedisServer } from '../test/helpers/redis-server.js';
import { removeDir, startKeyholder, type Keyholder, type OwnedProcess } from './procs.js';
import type { LoopResult, LoopTask } from './protocol.js';

/**
 * `npm run bench -- --only tracing`: what OpenTelemetry tracing costs the server, as an A/B on lock pairs
 * (acquire + release). The same build runs three times on one Redis, each on its own key prefix:
 *
 * - off: no OTEL_* variables, the default; the tracing module is never loaded (test/ops/tracing-off.test.ts);
 * - on, nothing sampled: the SDK loaded and every request's hooks run, the sampler (always_off) keeps no span;
 * - on, every call exported: each request's server span and store span exported over OTLP/HTTP to a sink
 *   in the bench process that reads and drops them.
 *
 * The variants take turns, in a different order each round, so that a machine whose load drifts during
 * the run does not favour one; each figure is the median of the rounds, with their range. Server CPU per
 * pair (from /proc, the instance's own process) is the figure to compare on a busy machine: pairs/s
 * follow whatever else the machine runs.
 */
export interface TracingSettings {
  readonly rounds: number;
  readonly warmMs: number;
  readonly durationMs: number;
  readonly concurrency: number;
}

export interface TracingRow {
  readonly variant: string;
  readonly results: LoopResult[];
}

export interface TracingResult {
  readonly rows: TracingRow[];
  /** What the OTLP sink received: export requests and bytes (the "every call exported" variant only). */
  readonly exported: { readonly requests: number; readonly bytes: number };
}

type RunLoop = (task: LoopTask) => Promise<LoopResult>;

/** An OTLP/HTTP endpoint that answers every export with 200 and keeps only counts. */
async function startSink(): Promise<{ url: string; server: Server; counts: { requests: number; bytes: number } }> {
  const counts = { requests: 0, bytes: 0 };
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => (counts.bytes += chunk.length));
    req.on('end', () => {
      counts.requests += 1;
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server, counts };
}

export async function measureTracing(
  settings: TracingSettings,
  dir: string,
  access: Record<string, string>,
  runLoop: RunLoop,
  progress: (line: string) => void,
): Promise<TracingResult> {
  const owned: OwnedProcess[] = [];
  const redis = await RedisServer.start();
  const sink = await startSink();
  try {
    const otlp = {
      OTEL_TRACES_EXPORTER: 'otlp',
      OTEL_EXPORTER_OTLP_ENDPOINT: sink.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    };
    const variants: Array<[string, Record<string, string>]> = [
      ['off (default: the tracing module never loaded)', {}],
      ['on, nothing sampled (OTEL_TRACES_SAMPLER=always_off)', { ...otlp, OTEL_TRACES_SAMPLER: 'always_off' }],
      ['on, every call exported (OTLP/HTTP)', otlp],
    ];
    progress('tracing: starting redis-server and three keyholder instances (off, on unsampled, on exported)');
    const instances: Array<[string, Keyholder]> = [];
    for (const [i, [name, env]] of variants.entries()) {
      // Load shedding by event-loop delay off, in all three alike: on a shared machine whose other work
      // delays the loop, 503s would otherwise replace pairs, and the CPU they cost would count for no pair.
      const kh = await startKeyholder(`keyholder-tracing-${i}`, redis.url, dir, {
        ...access,
        OVERLOAD_MAX_EVENT_LOOP_DELAY_MS: '0',
        ...env,
        REDIS_KEY_PREFIX: `bt${i}:`,
      });
      owned.push(kh.proc);
      instances.push([name, kh]);
    }
    const rows: TracingRow[] = instances.map(([variant]) => ({ variant, results: [] }));
    for (let round = 1; round <= settings.rounds; round++) {
      // Rotate who goes first: round 1 off, unsampled, exported; round 2 unsampled, exported, off; ...
      const order = instances.map((_, i) => (i + round - 1) % instances.length);
      for (const i of order) {
        const [name, kh] = instances[i] as [string, Keyholder];
        progress(`tracing round ${round}/${settings.rounds}: ${name}`);
        const result = await runLoop({
          kind: 'loop',
          scenario: 'pairs',
          target: kh.url,
          concurrency: settings.concurrency,
          warmMs: settings.warmMs,
          durationMs: settings.durationMs,
          tag: `tracing-${round}-${i}-${Date.now()}`,
          serverPid: kh.proc.pid,
        });
        kh.proc.truncateLog();
        rows[i]?.results.push(result);
        const errors = Object.keys(result.errors).length ? `  errors ${JSON.stringify(result.errors)}` : '';
        progress(`tracing round ${round}/${settings.rounds}: ${name}: ${result.unitsPerSecond.toFixed(0)} pairs/s${errors}`);
      }
    }
    // Stopped first: the exporting instance sends the spans it still buffers on the way out.
    for (const proc of owned.splice(0).reverse()) await proc.stop();
    return { rows, exported: { ...sink.counts } };
  } finally {
    for (const proc of owned.reverse()) await proc.stop().catch(() => undefined);
    await new Promise((resolve) => sink.server.close(resolve));
    await redis.stop();
    removeDir(dir);
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? (sorted[mid] ?? NaN) : ((sorted[mid - 1] ?? NaN) + (sorted[mid] ?? NaN)) / 2;
}

/** Server CPU milliseconds per pair of one measured window. */
const cpuMsPerPair = (r: LoopResult) => ((r.serverCpuSeconds ?? NaN) * 1000) / Math.max(1, r.units);

export function renderTracing(result: TracingResult, settings: TracingSettings): string {
  const base = result.rows[0];
  const baseCpu = base ? median(base.results.map(cpuMsPerPair)) : NaN;
  const basePairs = base ? median(base.results.map((r) => r.unitsPerSecond)) : NaN;
  const pct = (value: number, of: number) => `${value >= of ? '+' : ''}${(((value - of) / of) * 100).toFixed(1)}%`;
  const lines = [
    `Lock pairs (acquire + release) at concurrency ${settings.concurrency}, ${settings.rounds} rounds of ` +
      `${settings.durationMs / 1000} s per variant, taking turns; median of the rounds (min to max).`,
    '',
    '| keyholder | pairs/s | server CPU per pair | CPU vs off | pairs/s vs off | errors |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  for (const row of result.rows) {
    const pairs = row.results.map((r) => r.unitsPerSecond);
    const cpu = row.results.map(cpuMsPerPair);
    const errors = row.results.reduce((n, r) => n + Object.values(r.errors).reduce((a, b) => a + b, 0), 0);
    const range = (xs: number[], digits: number) => `${Math.min(...xs).toFixed(digits)} to ${Math.max(...xs).toFixed(digits)}`;
    const m = median(cpu);
    const p = median(pairs);
    lines.push(
      `| ${row.variant} | ${p.toFixed(0)} (${range(pairs, 0)}) | ${(m * 1000).toFixed(0)} µs (${range(
        cpu.map((x) => x * 1000),
        0,
      )}) | ${row === base ? '' : pct(m, baseCpu)} | ${row === base ? '' : pct(p, basePairs)} | ${errors} |`,
    );
  }
  lines.push(
    '',
    'The off row is the baseline that never loads tracing: with no OTEL_* variable the server does not import ' +
      'the tracing SDK and adds no hook (test/ops/tracing-off.test.ts checks that no OpenTelemetry module is in ' +
      'the process), so tracing off and never loaded are one and the same process; the other rows are measured against it.',
    '',
    `The OTLP sink received ${result.exported.requests} export requests (${(result.exported.bytes / 1e6).toFixed(1)} MB) ` +
      'from the exporting instance.',
  );
  return `${lines.join('\n')}\n`;
}

import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/**
 * In a fresh process: starts tracing as the server does (config from the environment) and prints whether
 * tracing started and how many OpenTelemetry modules were loaded.
 */
const PROBE = `
import { createRequire } from 'node:module';
const { loadConfig } = await import('./src/config.ts');
const { startTracing } = await import('./src/observability/tracing.ts');
const tracing = await startTracing(loadConfig(process.env).tracing);
const loaded = Object.keys(createRequire(import.meta.url).cache).filter((p) => p.includes('@opentelemetry'));
process.stdout.write(JSON.stringify({ on: tracing !== undefined, loaded: loaded.length }));
await tracing?.shutdown();
`;

function probe(env: Record<string, string>): { on: boolean; loaded: number } {
  const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', PROBE], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    encoding: 'utf8',
    timeout: 60_000,
  });
  expect(run.status, run.stderr).toBe(0);
  return JSON.parse(run.stdout) as { on: boolean; loaded: number };
}

describe('tracing off by default', () => {
  it('is on only when the OTEL_* variables ask for traces', () => {
    const on = (env: Record<string, string>) => loadConfig(env).tracing;
    expect(on({})).toBe(false);
    expect(on({ OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(on({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
    expect(on({ OTEL_TRACES_EXPORTER: 'console,otlp' })).toBe(true);
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' })).toBe(true);
    expect(on({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://collector:4318/v1/traces' })).toBe(true);
    expect(on({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
    expect(on({ OTEL_TRACES_EXPORTER: 'otlp', OTEL_SDK_DISABLED: 'true' })).toBe(false);
  });

  it('loads no OpenTelemetry module when off, and the SDK when on', () => {
    expect(probe({})).toEqual({ on: false, loaded: 0 });
    const on = probe({ OTEL_TRACES_EXPORTER: 'console' });
    expect(on.on).toBe(true);
    expect(on.loaded).toBeGreaterThan(0);
  });
});

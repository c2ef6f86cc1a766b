import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMetrics, type Metrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp, type TestApp } from '../helpers/test-app.js';
import { DEFAULT_HTTP_TIMEOUTS, DEFAULT_LIMITS } from '../../src/config.js';

async function problems(metrics: Metrics, code: string): Promise<number> {
  const { values } = await metrics.registry.getSingleMetric('keyholder_problems_total')!.get();
  return values.find((v) => v.labels.code === code)?.value ?? 0;
}

/** Sends `bytes` on a new connection and resolves with the status line of the answer once the server closes it. */
function exchange(port: number, bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('latin1').split('\r\n')[0] ?? ''));
    socket.write(bytes);
  });
}

/**
 * docs/operations.md: keyholder_problems_total counts "error answers by code, wherever they came from",
 * labelled with "every problem code" (each series present at 0 from the start, "so an alert on a rise
 * sees the first one"). request_timeout (408), headers_too_large (431), expectation_failed (417) and
 * the invalid_request answer to a request Node cannot parse are problem answers too.
 */
describe('problem answers written below the routes', () => {
  let metrics: Metrics;
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    metrics = createMetrics({ defaultMetrics: false });
    t = await buildTestApp({
      store: metrics.instrumentStore(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 })),
      metrics,
      observer: metrics.lockObserver,
      limits: DEFAULT_LIMITS,
      httpTimeouts: { ...DEFAULT_HTTP_TIMEOUTS, requestTimeoutMs: 1_000, headersTimeoutMs: 1_000 },
    });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => t?.close());

  it('counts 431 headers_too_large', async () => {
    const before = await problems(metrics, 'headers_too_large');
    const status = await exchange(port, `GET /v1/locks/x HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`);
    expect(status).toContain('431');
    expect(await problems(metrics, 'headers_too_large')).toBe(before + 1);
  });

  it('counts 417 expectation_failed', async () => {
    const before = await problems(metrics, 'expectation_failed');
    const status = await exchange(
      port,
      'POST /v1/locks/x/acquire HTTP/1.1\r\nhost: x\r\nexpect: teapot\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n',
    );
    expect(status).toContain('417');
    expect(await problems(metrics, 'expectation_failed')).toBe(before + 1);
  });

  it('counts 400 invalid_request for a request Node cannot parse', async () => {
    const before = await problems(metrics, 'invalid_request');
    const status = await exchange(port, 'THIS IS NOT HTTP\r\n\r\n');
    expect(status).toContain('400');
    expect(await problems(metrics, 'invalid_request')).toBe(before + 1);
  });

  it('counts 408 request_timeout', async () => {
    const before = await problems(metrics, 'request_timeout');
    // Headers in full, the body never: the request does not arrive within HTTP_REQUEST_TIMEOUT_MS.
    const status = await exchange(
      port,
      'POST /v1/locks/x/acquire HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 20\r\n\r\n{',
    );
    expect(status).toContain('408');
    expect(await problems(metrics, 'request_timeout')).toBe(before + 1);
  });
});

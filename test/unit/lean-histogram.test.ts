import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanHistogram } from '../../src/observability/lean-histogram.js';

/** The lean histogram must expose exactly what prom-client's own would for the same observations. */
const BUCKETS = [0.001, 0.01, 0.1, 1];
const OBSERVED: Array<[string, string, number]> = [
  ['acquire', 'ok', 0.0005],
  ['acquire', 'ok', 0.001], // on a bound: counts in that bucket (le means <=)
  ['acquire', 'ok', 0.05],
  ['acquire', 'error', 2], // past the last bound: +Inf only
  ['release', 'ok', 0.1],
  ['release', 'ok', 0],
];

describe('LeanHistogram', () => {
  it("exposes the same text as prom-client's Histogram, bucket by bucket, before and after a reset", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Histogram({
      name: 'h_seconds',
      help: 'h',
      labelNames: ['operation', 'result'],
      buckets: BUCKETS,
      registers: [theirs],
    });
    const lean = new LeanHistogram('h_seconds', 'h', ['operation', 'result'], BUCKETS, ours);
    for (const [op, result, value] of OBSERVED) {
      reference.labels(op, result).observe(value);
      lean.labels(op, result).observe(value);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    reference.reset();
    lean.reset();
    for (const [op, result] of OBSERVED) reference.labels(op, result).observe(0.5);
    for (const [op, result] of OBSERVED) lean.labels(op, result).observe(0.5);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it("an unlabelled histogram's one series is there at zero from the start, as prom-client's is", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    new Histogram({ name: 'hold_seconds', help: 'hold', buckets: BUCKETS, registers: [theirs] });
    new LeanHistogram('hold_seconds', 'hold', [], BUCKETS, ours).labels();
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});

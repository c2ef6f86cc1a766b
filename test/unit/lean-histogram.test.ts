import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { LeanCounter, LeanHistogram } from '../../src/observability/lean-histogram.js';

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

describe('LeanCounter', () => {
  it("exposes the same text as prom-client's Counter, series at zero included, before and after a reset", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    const reference = new Counter({ name: 'ops_total', help: 'ops', labelNames: ['operation', 'outcome'], registers: [theirs] });
    const lean = new LeanCounter('ops_total', 'ops', ['operation', 'outcome'], ours);
    const counted: Array<[string, string, number]> = [
      ['acquire', 'acquired', 1],
      ['acquire', 'held', 0], // present at zero
      ['acquire', 'acquired', 1],
      ['release', 'released', 3],
      ['acquire', 'acquired', 0.5],
    ];
    for (const [op, outcome, by] of counted) {
      reference.labels(op, outcome).inc(by);
      lean.labels(op, outcome).inc(by);
    }
    expect(await ours.metrics()).toBe(await theirs.metrics());
    reference.reset();
    lean.reset();
    reference.labels('renew', 'renewed').inc();
    lean.labels('renew', 'renewed').inc();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    expect(() => lean.labels('renew', 'renewed').inc(-1)).toThrow(TypeError);
  });

  it("an unlabelled counter is there at zero from the start, as prom-client's is", async () => {
    const theirs = new Registry();
    const ours = new Registry();
    new Counter({ name: 'lost_total', help: 'lost', registers: [theirs] });
    new LeanCounter('lost_total', 'lost', [], ours);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });
});

import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ERROR_CODES } from '../../src/domain/error-codes.js';
import { PERMIT_KINDS } from '../../src/domain/permit-values.js';
import type { StoreKind } from '../../src/domain/lease-store.js';
import type { StoreOperation } from '../../src/observability/instrumented-store.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { MemoryStore } from '../../src/store/memory/memory-store.js';
import { buildTestApp } from '../helpers/test-app.js';
import { DEFAULT_LIMITS } from '../../src/config.js';

const operations = readFileSync(fileURLToPath(new URL('../../docs/operations.md', import.meta.url)), 'utf8');
/** The documented label values of one metric's row in the Metrics table: every `word` in its labels column. */
function documentedLabels(metric: string): string {
  const row = operations.split('\n').find((line) => line.startsWith(`| \`${metric}\``));
  if (row === undefined) throw new Error(`${metric} is not in the table`);
  return row.split('|')[3] ?? '';
}

/** docs/operations.md's Metrics table names each label's values; the metrics must not use others. */
describe('the label values the Metrics table documents', () => {
  it('keyholder_lock_operations_total: every outcome a lock operation can end with', () => {
    const documented = documentedLabels('keyholder_lock_operations_total');
    // Every failure outcome but limit_mismatch (semaphores and read/write locks only) can end a lock call.
    const outcomes = new Set(Object.values(ERROR_CODES).map((row) => row.outcome));
    outcomes.delete('limit_mismatch');
    for (const outcome of outcomes) expect(documented, outcome).toContain(`\`${outcome}\``);
  });

  it('keyholder_lock_operations_total counts an acquire over the namespace quota under a documented outcome', async () => {
    const metrics = createMetrics({ defaultMetrics: false });
    const store = metrics.instrumentStore(new MemoryStore({ fenceGraceMs: 60_000, sweepIntervalMs: 0 }));
    const limits = { ...DEFAULT_LIMITS, maxHeldLocksPerNamespace: 1 };
    const t = await buildTestApp({ store, metrics, observer: metrics.lockObserver, limits });
    try {
      expect((await t.app.inject({ method: 'POST', url: '/v1/locks/q1/acquire', payload: { ttlMs: 5_000 } })).statusCode).toBe(200);
      expect((await t.app.inject({ method: 'POST', url: '/v1/locks/q2/acquire', payload: { ttlMs: 5_000 } })).statusCode).toBe(429);
      const { values } = await metrics.registry.getSingleMetric('keyholder_lock_operations_total')!.get();
      const outcomes = values.filter((v) => v.labels.operation === 'acquire' && v.value > 0).map((v) => String(v.labels.outcome));
      for (const outcome of outcomes) expect(documentedLabels('keyholder_lock_operations_total'), outcome).toContain(`\`${outcome}\``);
    } finally {
      await t.close();
    }
  });

  it('keyholder_primitive_operations_total and keyholder_acquire_duration_seconds: every primitive, lock sets included', () => {
    for (const primitive of [...PERMIT_KINDS, 'lock_set']) {
      expect(documentedLabels('keyholder_primitive_operations_total'), primitive).toContain(`\`${primitive}\``);
      expect(documentedLabels('keyholder_acquire_duration_seconds'), primitive).toContain(`\`${primitive}\``);
    }
  });

  it('keyholder_store_up: every store kind', () => {
    const kinds: StoreKind[] = ['memory', 'redis', 'etcd'];
    for (const kind of kinds) expect(documentedLabels('keyholder_store_up'), kind).toContain(`\`${kind}\``);
  });

  it('keyholder_store_operation_duration_seconds: every store operation', () => {
    const all: Record<StoreOperation, true> = {
      acquire: true,
      renew: true,
      release: true,
      inspect: true,
      ping: true,
      force_release: true,
      release_request: true,
      list: true,
      slot: true,
      permit_acquire: true,
      permit_renew: true,
      permit_release: true,
      permit_inspect: true,
      permit_force_release: true,
      permit_release_request: true,
      permit_list: true,
    };
    const documented = documentedLabels('keyholder_store_operation_duration_seconds');
    for (const op of Object.keys(all)) expect(documented, op).toContain(`\`${op}\``);
  });
});

import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { requireTool } from '../helpers/tools.js';

const RULES = fileURLToPath(new URL('../../deploy/keyholder-alerts.yml', import.meta.url));
const TARGET = { job: 'keyholder', instance: 'kh-1:3000' };
const series = (name: string, labels: Record<string, string>) =>
  `${name}{${Object.entries({ ...TARGET, ...labels })
    .map(([k, v]) => `${k}="${v}"`)
    .join(',')}}`;

/**
 * The alert texts as an operator reads them: promtool evaluates deploy/keyholder-alerts.yml over
 * made-up series and renders each firing alert's annotations, compared word for word.
 */
describe('deploy/keyholder-alerts.yml renders readable alerts', () => {
  const dir = mkdtempSync(join(tmpdir(), 'keyholder-alert-tests-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('prints counts as whole numbers and rates humanised (promtool test rules)', () => {
    requireTool('promtool', 'prometheus');
    copyFileSync(RULES, join(dir, 'keyholder-alerts.yml'));
    const tests = {
      rule_files: ['keyholder-alerts.yml'],
      evaluation_interval: '30s',
      tests: [
        {
          interval: '1m',
          input_series: [
            // 3 lost renewals; evaluated between two scrapes, increase() extrapolates them to the window's
            // edges: 3.375, which the summary rounds.
            { series: series('keyholder_lost_leases_total', { operation: 'renew' }), values: '0 0 1 2 3 3 3' },
            { series: series('keyholder_lost_leases_total', { operation: 'release' }), values: '0x6' },
            // 2 renewals refused as overloaded; 0.4 requests/s shed overall.
            { series: series('keyholder_requests_shed_total', { budget: 'event_loop_delay', priority: 'last' }), values: '0 0 0 1 2 2 2' },
            { series: series('keyholder_requests_shed_total', { budget: 'event_loop_delay', priority: 'normal' }), values: '0+24x12' },
            { series: series('keyholder_store_up', { store: 'redis' }), values: '1 1 0 0 0 0 0' },
          ],
          alert_rule_test: [
            {
              eval_time: '5m30s',
              alertname: 'KeyholderLostLeases',
              exp_alerts: [
                {
                  exp_labels: { severity: 'warning', ...TARGET },
                  exp_annotations: {
                    summary: 'keyholder kh-1:3000: callers lost 3 leases in 5 minutes',
                    description:
                      "Renews or releases came after their lease had expired or been taken over. The callers' critical sections were not protected; use longer ttlMs, renew earlier, or check for pauses.",
                  },
                },
              ],
            },
            {
              eval_time: '5m',
              alertname: 'KeyholderShedsRenewals',
              exp_alerts: [
                {
                  exp_labels: { severity: 'critical', ...TARGET },
                  exp_annotations: {
                    summary: 'keyholder kh-1:3000 refused 2 renewals or releases as overloaded in 5 minutes',
                    description:
                      'The instance is at four times a load budget: renewals are refused and holders may lose leases. Add capacity now.',
                  },
                },
              ],
            },
            {
              eval_time: '12m',
              alertname: 'KeyholderOverloaded',
              exp_alerts: [
                {
                  exp_labels: { severity: 'warning', ...TARGET },
                  exp_annotations: {
                    summary: 'keyholder kh-1:3000 sheds load (400m requests/s refused with 503 overloaded)',
                    description:
                      'The instance is over its load budget and refuses new requests before any store work, so callers retry later. The store is not at fault. Add instances or CPU, or find the client that bursts.',
                  },
                },
              ],
            },
            {
              eval_time: '5m',
              alertname: 'KeyholderStoreDown',
              exp_alerts: [
                {
                  exp_labels: { severity: 'critical', store: 'redis', ...TARGET },
                  exp_annotations: {
                    summary: 'keyholder cannot reach its redis store',
                    description: 'Lock calls are answered 503 store_unavailable; nothing is granted until the store answers.',
                  },
                },
              ],
            },
          ],
        },
      ],
    };
    writeFileSync(join(dir, 'alert-tests.yml'), stringify(tests));
    const run = spawnSync('promtool', ['test', 'rules', 'alert-tests.yml'], { cwd: dir, encoding: 'utf8' });
    expect(run.status, run.stdout + run.stderr).toBe(0);
  });
});

import { setTimeout as sleep } from 'node:timers/promises';
import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse, stringify } from 'yaml';
import { KeyholderProcess, call } from '../helpers/keyholder-process.js';
import { freePort } from '../helpers/redis-server.js';
import { requireTool } from '../helpers/tools.js';

const DEPLOY = fileURLToPath(new URL('../../deploy/', import.meta.url));

interface PromConfig {
  global?: Record<string, unknown>;
  rule_files?: string[];
  scrape_configs: Array<{ job_name: string; metrics_path?: string; static_configs: Array<{ targets: string[] }> }>;
}

interface QueryResult {
  status: string;
  data: { result: Array<{ metric: Record<string, string>; value: [number, string] }> };
}

/**
 * A real Prometheus, run with the repository's own scrape config and alert rules (only the target and
 * the intervals changed), scraping a real keyholder process.
 */
describe('Prometheus scrapes keyholder with deploy/prometheus.yml', () => {
  let keyholder: KeyholderProcess;
  let prometheus: ChildProcess | undefined;
  let promUrl = '';
  let dir = '';
  const promLogs: string[] = [];

  async function query(promql: string): Promise<QueryResult['data']['result']> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`, { signal: AbortSignal.timeout(5_000) });
    const body = (await res.json()) as QueryResult;
    expect(body.status).toBe('success');
    return body.data.result;
  }

  async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
    await vi.waitFor(
      async () => {
        if (!(await check().catch(() => false))) throw new Error(`Prometheus: ${what} not seen within ${timeoutMs} ms\n${promLogs.join('')}`);
      },
      { timeout: timeoutMs, interval: 250 },
    );
  }

  beforeAll(async () => {
    requireTool('prometheus', 'prometheus');
    keyholder = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn' } });

    dir = mkdtempSync(join(tmpdir(), 'keyholder-prometheus-'));
    const config = parse(readFileSync(join(DEPLOY, 'prometheus.yml'), 'utf8')) as PromConfig;
    config.global = { ...config.global, scrape_interval: '1s', evaluation_interval: '1s' };
    const job = config.scrape_configs.find((j) => j.job_name === 'keyholder');
    if (!job) throw new Error('deploy/prometheus.yml has no keyholder job');
    job.static_configs = [{ targets: [`127.0.0.1:${keyholder.port}`] }];
    writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
    for (const file of config.rule_files ?? []) copyFileSync(join(DEPLOY, file), join(dir, file));

    const port = await freePort();
    promUrl = `http://127.0.0.1:${port}`;
    prometheus = spawn(
      'prometheus',
      [
        `--config.file=${join(dir, 'prometheus.yml')}`,
        `--storage.tsdb.path=${join(dir, 'data')}`,
        `--web.listen-address=127.0.0.1:${port}`,
        '--log.level=warn',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    prometheus.stdout?.on('data', (b: Buffer) => promLogs.push(b.toString()));
    prometheus.stderr?.on('data', (b: Buffer) => promLogs.push(b.toString()));
    await waitFor('/-/ready', async () => (await fetch(`${promUrl}/-/ready`)).status === 200);
  });

  afterAll(async () => {
    if (prometheus?.exitCode === null) {
      const exited = new Promise((r) => prometheus?.once('exit', r));
      prometheus.kill('SIGTERM');
      await exited;
    }
    await keyholder?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('sees the target up, counters moving with lock traffic, and the lost-lease alert firing', async () => {
    await waitFor('up{job="keyholder"} == 1', async () => (await query('up{job="keyholder"}'))[0]?.value[1] === '1');

    const acquires = 5;
    for (let i = 0; i < acquires; i++) {
      const granted = await call(keyholder.url, 'POST', `/v1/locks/prom-${i}/acquire`, { ttlMs: 10_000 });
      expect(granted.status).toBe(200);
      expect((await call(keyholder.url, 'POST', `/v1/locks/prom-${i}/release`, { ownerToken: granted.body.ownerToken })).status).toBe(200);
    }
    // A release after the lease is gone: the alarm users most need.
    const granted = await call(keyholder.url, 'POST', '/v1/locks/prom-lost/acquire', { ttlMs: 100 });
    await sleep(300);
    expect((await call(keyholder.url, 'POST', '/v1/locks/prom-lost/release', { ownerToken: granted.body.ownerToken })).status).toBe(409);

    const acquired = 'keyholder_lock_operations_total{job="keyholder",operation="acquire",outcome="acquired"}';
    await waitFor(`${acquired} >= ${acquires + 1}`, async () => Number((await query(acquired))[0]?.value[1]) >= acquires + 1);
    await waitFor('keyholder_store_up == 1', async () => (await query('keyholder_store_up{store="memory"}'))[0]?.value[1] === '1');
    await waitFor('the KeyholderLostLeases alert', async () =>
      (await query('ALERTS{alertname="KeyholderLostLeases",alertstate="firing"}')).length === 1,
    );
  });
});

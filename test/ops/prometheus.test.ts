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

interface DashboardPanel {
  title: string;
  targets?: Array<{ refId: string; expr: string }>;
}
const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana-dashboard.json'), 'utf8')) as { panels: DashboardPanel[] };
/** Grafana's variables, replaced the way Grafana would before the query reaches Prometheus. */
const asPromql = (expr: string) => expr.replaceAll('$__rate_interval', '5m').replaceAll('$job', 'keyholder');
/**
 * Series that exist only once something failed, so a healthy run leaves these queries empty; they must
 * still evaluate. (Store calls that timed out or lost their connection.)
 */
const ONLY_ON_FAILURE = ['result="unavailable"'];

interface RulesAnswer {
  status: string;
  data: { groups: Array<{ rules: Array<{ name: string; query: string; health: string; lastError?: string; lastEvaluation: string }> }> };
}

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

  async function post(path: string, body: unknown): Promise<number> {
    return (await call(keyholder.url, 'POST', path, body, 15_000)).status;
  }

  /** One round of every kind of traffic the dashboard shows: each primitive granted, refused and released, waits, errors. */
  async function trafficRound(round: number): Promise<void> {
    const lock = `/v1/locks/dash-${round}`;
    // Held for 1.5 s, then expires: a waiter is handed the lock; one that waits 100 ms runs out first.
    const first = await call(keyholder.url, 'POST', `${lock}/acquire`, { ttlMs: 1_500 });
    expect(first.status).toBe(200);
    expect(await post(`${lock}/acquire`, { ttlMs: 10_000 })).toBe(409);
    expect(await post(`${lock}/acquire`, { ttlMs: 10_000, waitMs: 100 })).toBe(409);
    const waiting = call(keyholder.url, 'POST', `${lock}/acquire`, { ttlMs: 10_000, waitMs: 10_000 }, 15_000);
    await waitFor('a caller waiting', async () =>
      /^keyholder_waiting_callers 1$/m.test(await (await fetch(`${keyholder.url}/metrics`)).text()),
    );
    expect(await post(`${lock}/acquire`, { ttlMs: 10_000, waitMs: 10_000 })).toBe(429);
    const waiter = await waiting;
    expect(waiter.status).toBe(200);
    expect(await post(`${lock}/release`, { ownerToken: waiter.body.ownerToken })).toBe(200);

    const sem = `/v1/semaphores/dash-${round}`;
    const permit = await call(keyholder.url, 'POST', `${sem}/acquire`, { limit: 1, ttlMs: 10_000 });
    expect(permit.status).toBe(200);
    expect(await post(`${sem}/acquire`, { limit: 1, ttlMs: 10_000 })).toBe(409);
    expect(await post(`${sem}/release`, { ownerToken: permit.body.ownerToken })).toBe(200);

    const rw = `/v1/rwlocks/dash-${round}`;
    const reader = await call(keyholder.url, 'POST', `${rw}/acquire`, { mode: 'read', ttlMs: 10_000 });
    expect(reader.status).toBe(200);
    expect(await post(`${rw}/acquire`, { mode: 'write', ttlMs: 10_000 })).toBe(409);
    expect(await post(`${rw}/release`, { ownerToken: reader.body.ownerToken })).toBe(200);

    const keys = [`dash-set-a-${round}`, `dash-set-b-${round}`];
    const set = await call(keyholder.url, 'POST', '/v1/lock-sets/acquire', { keys, ttlMs: 10_000 });
    expect(set.status).toBe(200);
    expect(await post('/v1/lock-sets/acquire', { keys: [keys[1], `dash-set-c-${round}`], ttlMs: 10_000 })).toBe(409);
    expect(await post('/v1/lock-sets/release', { keys, ownerToken: set.body.ownerToken })).toBe(200);

    expect(await post(`${lock}/acquire`, { ttlMs: -1 })).toBe(400);
    expect((await call(keyholder.url, 'GET', '/v1/no-such-route')).status).toBe(404);
  }

  async function query(promql: string): Promise<QueryResult['data']['result']> {
    const res = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(promql)}`, { signal: AbortSignal.timeout(5_000) });
    const body = (await res.json()) as QueryResult;
    expect(body.status).toBe('success');
    return body.data.result;
  }

  async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
    await vi.waitFor(
      async () => {
        if (!(await check().catch(() => false)))
          throw new Error(`Prometheus: ${what} not seen within ${timeoutMs} ms\n${promLogs.join('')}`);
      },
      { timeout: timeoutMs, interval: 250 },
    );
  }

  beforeAll(async () => {
    requireTool('prometheus', 'prometheus');
    // One waiter per key: a second one is refused (429 too_many_waiters), which a dashboard query counts.
    keyholder = await KeyholderProcess.start({ env: { LOG_LEVEL: 'warn', WAITERS_PER_KEY_MAX: '1' } });

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
    await waitFor(
      'the KeyholderLostLeases alert',
      async () => (await query('ALERTS{alertname="KeyholderLostLeases",alertstate="firing"}')).length === 1,
    );
  });

  it('answers every dashboard query with data after traffic, and evaluates every alert rule', async () => {
    await waitFor('up{job="keyholder"} == 1', async () => (await query('up{job="keyholder"}'))[0]?.value[1] === '1');
    // rate() needs the counters seen before and after a change: a round, a scrape that sees it, another round.
    await trafficRound(1);
    const seen = 'keyholder_acquire_duration_seconds_count{job="keyholder",primitive="lock_set"}';
    await waitFor(`${seen} scraped`, async () => (await query(seen)).length === 1);
    await trafficRound(2);

    const queries = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => ({ panel: p.title, ref: t.refId, promql: asPromql(t.expr) })),
    );
    expect(queries.length).toBeGreaterThanOrEqual(20);
    for (const q of queries) {
      if (ONLY_ON_FAILURE.some((s) => q.promql.includes(s))) {
        await query(q.promql);
        continue;
      }
      await waitFor(`${q.panel} (${q.ref}): ${q.promql} returns a number`, async () =>
        (await query(q.promql)).some((r) => !Number.isNaN(Number(r.value[1]))),
      );
    }

    // Every alert rule has been evaluated without error, and its expression runs as a query.
    await waitFor('every rule evaluated', async () => {
      const res = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as RulesAnswer;
      const rules = res.data.groups.flatMap((g) => g.rules);
      return rules.length > 0 && rules.every((r) => r.health === 'ok' && !r.lastError);
    });
    const res = (await (await fetch(`${promUrl}/api/v1/rules`)).json()) as RulesAnswer;
    for (const rule of res.data.groups.flatMap((g) => g.rules)) await query(rule.query);
  });
});

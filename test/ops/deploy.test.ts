import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { hashApiKey } from '../../src/auth/api-keys.js';
import { loadConfig } from '../../src/config.js';
import { call } from '../helpers/keyholder-process.js';
import { RedisServer, freePort } from '../helpers/redis-server.js';
import { type ProcessOutput, requireTool, runProcess } from '../helpers/tools.js';
import { copyParts, execForm, instructions, parseDockerfile, stageEnv, type Stage } from './dockerfile.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const read = (path: string) => readFileSync(join(ROOT, path), 'utf8');

interface ComposeService {
  profiles?: string[];
  image?: string;
  build?: unknown;
  command?: string[] | string;
  environment?: Record<string, string | number>;
  ports?: string[];
  volumes?: string[];
  depends_on?: Record<string, { condition: string }> | string[];
  healthcheck?: { test: string[] | string };
}

const dockerfile = parseDockerfile(read('Dockerfile'));
const compose = parse(read('docker-compose.yml')) as { services: Record<string, ComposeService> };
const promConfig = parse(read('deploy/prometheus.yml')) as {
  rule_files?: string[];
  scrape_configs: Array<{ job_name: string; metrics_path?: string; static_configs: Array<{ targets: string[] }> }>;
};

const runtime = dockerfile.stages.at(-1) as Stage;
const service = (name: string): ComposeService => {
  const s = compose.services[name];
  if (!s) throw new Error(`docker-compose.yml has no ${name} service`);
  return s;
};
const composeEnv = (): Record<string, string> =>
  Object.fromEntries(Object.entries(service('keyholder').environment ?? {}).map(([k, v]) => [k, String(v)]));
/** What the container sees: the image's ENV, then compose's environment on top. */
const containerEnv = () => ({ ...stageEnv(runtime), ...composeEnv() });

describe('Dockerfile', () => {
  it('builds in one stage and runs on a small Node LTS image (22 or 24) as a non-root user', () => {
    expect(dockerfile.stages.length).toBeGreaterThanOrEqual(2);
    expect(runtime.image).toMatch(/^node:(22|24)-(alpine|slim|bookworm-slim|trixie-slim)$/);
    const user = instructions(runtime, 'USER').at(-1)?.args;
    expect(user).toBeDefined();
    expect(['root', '0']).not.toContain(user);
    expect(stageEnv(runtime).HOST).toBe('0.0.0.0');
    expect(
      instructions(runtime, 'RUN')
        .map((r) => r.args)
        .join('\n'),
    ).toMatch(/npm ci --omit=dev/);
    expect(instructions(dockerfile.stages[0] as Stage, 'RUN').map((r) => r.args)).toContain('npm run build');
  });

  it('fails the build in both stages when npm ci leaves dependencies missing', () => {
    for (const stage of dockerfile.stages) {
      const install = instructions(stage, 'RUN').find((r) => /^npm ci\b/.test(r.args))?.args ?? '';
      expect(install, stage.name).toMatch(/^npm ci [^&]*&& npm ls\b/);
    }
  });

  it('has no BuildKit syntax line (a classic builder, or BuildKit without registry access, builds it)', () => {
    expect(read('Dockerfile')).not.toMatch(/^#\s*syntax=/im);
  });

  it('checks health on /readyz without curl', () => {
    const healthcheck = instructions(runtime, 'HEALTHCHECK').at(-1)?.args ?? '';
    const command = execForm(healthcheck);
    expect(command.join(' ')).toContain('/readyz');
    expect(command[0]).not.toBe('curl');
  });

  it('starts with node directly, so SIGTERM reaches the server', () => {
    expect(execForm(instructions(runtime, 'CMD').at(-1)?.args ?? '')).toEqual(['node', 'dist/server.js']);
  });
});

describe('docker-compose.yml and deploy/prometheus.yml', () => {
  it('runs Redis with an append-only file and no eviction, and checks its health', () => {
    const redis = service('redis');
    const command = Array.isArray(redis.command) ? redis.command.join(' ') : (redis.command ?? '');
    expect(command).toMatch(/--appendonly yes/);
    expect(command).toMatch(/--maxmemory-policy noeviction/);
    expect(redis.healthcheck?.test).toBeDefined();
  });

  it('starts keyholder only once Redis is healthy', () => {
    const keyholder = service('keyholder');
    expect(keyholder.build).toBeDefined();
    expect(keyholder.depends_on).toMatchObject({ redis: { condition: 'service_healthy' } });
  });

  it('sets an environment that the service accepts, using the compose Redis', () => {
    const config = loadConfig(containerEnv());
    expect(config.nodeEnv).toBe('production');
    expect(config.host).toBe('0.0.0.0');
    expect(config.store).toMatchObject({ kind: 'redis', connection: { mode: 'standalone', url: 'redis://redis:6379' } });
    expect(service('keyholder').ports).toContain(`${config.port}:${config.port}`);
  });

  it('has Prometheus scrape keyholder on its port and path, with the alert rules mounted', () => {
    const port = loadConfig(containerEnv()).port;
    const job = promConfig.scrape_configs.find((j) => j.job_name === 'keyholder');
    expect(job?.metrics_path ?? '/metrics').toBe('/metrics');
    expect(job?.static_configs.flatMap((s) => s.targets)).toContain(`keyholder:${port}`);

    const mounts = service('prometheus').volumes ?? [];
    expect(mounts).toContain('./deploy/prometheus.yml:/etc/prometheus/prometheus.yml:ro');
    for (const file of promConfig.rule_files ?? []) {
      expect(mounts).toContain(`./deploy/${file}:/etc/prometheus/${file}:ro`);
    }
  });

  it('publishes Prometheus on loopback only (its UI and API have no authentication)', () => {
    const ports = service('prometheus').ports ?? [];
    expect(ports.length).toBeGreaterThan(0);
    for (const port of ports) expect(port).toMatch(/^127\.0\.0\.1:/);
  });

  it('passes promtool check config and check rules', () => {
    requireTool('promtool', 'prometheus');
    const config = spawnSync('promtool', ['check', 'config', 'prometheus.yml'], { cwd: join(ROOT, 'deploy'), encoding: 'utf8' });
    expect(config.status, config.stdout + config.stderr).toBe(0);
    for (const file of promConfig.rule_files ?? []) {
      const rules = spawnSync('promtool', ['check', 'rules', file], { cwd: join(ROOT, 'deploy'), encoding: 'utf8' });
      expect(rules.status, rules.stdout + rules.stderr).toBe(0);
    }
  });
});

/** The Deploy section's shell block: the key-creating line and the acquire curl, exactly as documented. */
function deployCommands(): { createKey: string; acquire: string } {
  for (const file of ['README.md', 'docs/operations.md']) {
    let text: string;
    try {
      text = read(file);
    } catch {
      continue;
    }
    for (const block of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
      const lines = (block[1] ?? '').split('\n');
      const createKey = lines.find((l) => l.startsWith('KEY=$(npm run -s keys:new'));
      const acquire = lines.find((l) => l.startsWith('curl') && l.includes('/acquire') && l.includes('$KEY'));
      if (createKey && acquire && lines.some((l) => l.startsWith('docker compose up'))) return { createKey, acquire };
    }
  }
  throw new Error('the Deploy section has no sh block that creates a key, starts compose and acquires with the key');
}

/** Runs a shell command without blocking the event loop (the server under test may answer it). */
function runShell(command: string, env: NodeJS.ProcessEnv): Promise<ProcessOutput> {
  return runProcess('sh', ['-c', command], { env, timeoutMs: 30_000 });
}

describe('docker-compose.yml profiles for replicated stores', () => {
  const inProfile = (profile: string) => Object.entries(compose.services).filter(([, s]) => s.profiles?.includes(profile));
  const commandOf = (s: ComposeService) => (Array.isArray(s.command) ? s.command.join(' ') : (s.command ?? ''));
  const envOf = (name: string) => ({
    ...stageEnv(runtime),
    ...Object.fromEntries(Object.entries(service(name).environment ?? {}).map(([k, v]) => [k, String(v)])),
  });

  it('keeps the default services out of the profiles, and the profile services out of the default', () => {
    for (const name of ['redis', 'keyholder', 'prometheus']) expect(service(name).profiles).toBeUndefined();
    for (const [name, s] of Object.entries(compose.services)) {
      if (['redis', 'keyholder', 'prometheus'].includes(name)) continue;
      expect(s.profiles, `${name} belongs to a profile`).toHaveLength(1);
    }
  });

  it('--profile sentinel: a primary, two replicas of it and three sentinels with a quorum of two', () => {
    const services = Object.fromEntries(inProfile('sentinel'));
    const primary = commandOf(services['redis-primary'] as ComposeService);
    expect(primary).toMatch(/--appendonly yes/);
    expect(primary).toMatch(/--maxmemory-policy noeviction/);
    expect(primary).toMatch(/--min-replicas-to-write 1/);
    const replicas = Object.keys(services).filter((n) => n.startsWith('redis-replica-'));
    expect(replicas).toHaveLength(2);
    for (const r of replicas) {
      const command = commandOf(services[r] as ComposeService);
      expect(command).toMatch(/--replicaof redis-primary 6379/);
      // A replica may be promoted: it carries the primary's safety settings too.
      expect(command).toMatch(/--appendonly yes.*--maxmemory-policy noeviction.*--min-replicas-to-write 1/);
    }
    const sentinels = Object.keys(services).filter((n) => n.startsWith('sentinel-'));
    expect(sentinels).toHaveLength(3);
    for (const name of sentinels) {
      expect(commandOf(services[name] as ComposeService)).toMatch(/sentinel monitor keyholder redis-primary 6379 2\\n.*--sentinel$/);
    }
  });

  it('--profile sentinel: keyholder-sentinel finds the primary through all three sentinels and waits for a replica ack', () => {
    const config = loadConfig(envOf('keyholder-sentinel'));
    expect(config.store).toMatchObject({
      kind: 'redis',
      connection: { mode: 'sentinel', name: 'keyholder', sentinels: [1, 2, 3].map((n) => ({ host: `sentinel-${n}`, port: 26379 })) },
      replicaAcks: { minReplicas: 1 },
    });
    expect(service('keyholder-sentinel').profiles).toEqual(['sentinel']);
  });

  it('--profile etcd: three etcd members in one initial cluster, and keyholder-etcd on all three', () => {
    const members = inProfile('etcd').filter(([n]) => n.startsWith('etcd-'));
    expect(members).toHaveLength(3);
    const cluster = 'etcd-1=http://etcd-1:2380,etcd-2=http://etcd-2:2380,etcd-3=http://etcd-3:2380';
    for (const [name, s] of members) {
      const command = commandOf(s);
      expect(command).toContain(`--name=${name}`);
      expect(command).toContain(`--initial-cluster=${cluster}`);
      expect(command).toContain(`--advertise-client-urls=http://${name}:2379`);
      expect(s.volumes?.some((v) => v.endsWith(':/etcd-data'))).toBe(true);
    }
    const config = loadConfig(envOf('keyholder-etcd'));
    expect(config.store).toMatchObject({ kind: 'etcd', endpoints: [1, 2, 3].map((n) => `http://etcd-${n}:2379`) });
  });

  it('--profile cluster: six cluster nodes with the safety settings, joined as 3 masters + 3 replicas, keyholder-cluster on all six', () => {
    const nodes = inProfile('cluster').filter(([n]) => n.startsWith('redis-node-'));
    expect(nodes).toHaveLength(6);
    for (const [name, s] of nodes) {
      const command = commandOf(s);
      expect(command).toMatch(/--appendonly yes --appendfsync always --maxmemory-policy noeviction --min-replicas-to-write 1/);
      expect(command).toMatch(/--cluster-enabled yes/);
      expect(command).toContain(`--cluster-announce-hostname ${name}`);
      expect(s.volumes?.some((v) => v.endsWith(':/data'))).toBe(true);
    }
    const init = service('redis-cluster-init');
    expect(init.volumes).toContain('./deploy/redis-cluster-init.sh:/usr/local/bin/redis-cluster-init.sh:ro');
    expect(commandOf(init)).toBe('sh /usr/local/bin/redis-cluster-init.sh');
    const script = read('deploy/redis-cluster-init.sh');
    expect(script).toMatch(/redis-cli --cluster create .*--cluster-replicas 1 --cluster-yes/);
    // On later starts the nodes are introduced again at their new addresses, never created anew.
    expect(script).toMatch(/cluster meet/);
    expect(Object.keys(init.depends_on ?? {})).toEqual(nodes.map(([n]) => n));
    const config = loadConfig(envOf('keyholder-cluster'));
    expect(config.store).toMatchObject({
      kind: 'redis',
      connection: { mode: 'cluster', nodes: [1, 2, 3, 4, 5, 6].map((n) => ({ host: `redis-node-${n}`, port: 6379 })) },
      replicaAcks: { minReplicas: 1 },
    });
    expect(service('keyholder-cluster').profiles).toEqual(['cluster']);
  });
});

/**
 * Replays the Dockerfile without a Docker engine: the build stage's COPY and RUN steps in one temp
 * dir (its `npm ci` replaced by this checkout's node_modules), the runtime stage's in another (its
 * `npm ci --omit=dev` for real), then the image's exact CMD with the compose environment, pointed at
 * a real redis-server on loopback.
 */
describe('the image start command, replayed outside Docker', () => {
  let redis: RedisServer;
  const dirs: string[] = [];

  beforeAll(async () => {
    requireTool('npm', 'npm');
    redis = await RedisServer.start({ appendOnly: true });
  });

  afterAll(async () => {
    await redis?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  function workdir(stage: Stage): string {
    const dir = instructions(stage, 'WORKDIR').at(-1)?.args;
    if (!dir) throw new Error('each stage sets a WORKDIR');
    return dir;
  }

  function run(command: string, cwd: string, env: NodeJS.ProcessEnv = process.env): void {
    const result = spawnSync('sh', ['-c', command], { cwd, env, encoding: 'utf8', timeout: 240_000 });
    if (result.status !== 0) throw new Error(`\`${command}\` failed (${result.status}):\n${result.stdout}\n${result.stderr}`);
  }

  /** Replays COPY and RUN; `stageDirs` maps earlier stages' names to where they were replayed. */
  function replay(stage: Stage, into: string, stageDirs: Map<string, { dir: string; workdir: string }>): void {
    for (const { keyword, args } of stage.instructions) {
      if (keyword === 'COPY') {
        const { from, sources, dest } = copyParts(args);
        const origin = from === undefined ? undefined : stageDirs.get(from);
        if (from !== undefined && !origin) throw new Error(`COPY --from=${from}: unknown stage`);
        const intoDir = dest.endsWith('/') || dest === '.' || dest === './' || sources.length > 1;
        for (const source of sources) {
          const sourcePath = origin ? join(origin.dir, source.replace(new RegExp(`^${origin.workdir}/?`), '')) : join(ROOT, source);
          const target = intoDir ? join(into, dest, basename(source)) : join(into, dest);
          cpSync(sourcePath, target, { recursive: true });
        }
      } else if (keyword === 'RUN') {
        for (const step of args.split('&&').map((s) => s.trim())) {
          // Leave the machine's npm cache alone.
          if (/^npm cache clean/.test(step)) continue;
          if (/^npm ci\b/.test(step) && !step.includes('--omit=dev')) {
            // The build stage's full install: this checkout's node_modules, from the same lock file.
            symlinkSync(join(ROOT, 'node_modules'), join(into, 'node_modules'), 'dir');
            continue;
          }
          run(step, into, { ...process.env, npm_config_prefer_offline: 'true', npm_config_update_notifier: 'false' });
        }
      }
    }
  }

  let imageDir: string | undefined;
  /** The runtime stage's directory, replayed once: dist/ and `npm ci --omit=dev`, nothing else. */
  function imageLayout(): string {
    if (imageDir !== undefined) return imageDir;
    const stageDirs = new Map<string, { dir: string; workdir: string }>();
    for (const stage of dockerfile.stages) {
      const dir = mkdtempSync(join(tmpdir(), `keyholder-image-${stage.name ?? 'stage'}-`));
      dirs.push(dir);
      mkdirSync(dir, { recursive: true });
      replay(stage, dir, stageDirs);
      if (stage.name) stageDirs.set(stage.name, { dir, workdir: workdir(stage) });
    }
    const runtimeDir = dirs.at(-1) as string;
    imageDir = runtimeDir;
    return runtimeDir;
  }

  it('mints an API key with the compiled command, from the production dependencies alone', () => {
    const appDir = imageLayout();
    // No tsx, no devDependencies, no source: plain node on dist/, as `docker run … node dist/cli/keys-new.js` runs it.
    const result = spawnSync('node', ['dist/cli/keys-new.js', '--id', 'image-ops', '--namespace', 'ops', '--scopes', 'locks,admin'], {
      cwd: appDir,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect(result.status, result.stderr).toBe(0);
    const key = /^ {2}(kh_\S+)$/m.exec(result.stdout)?.[1] ?? '';
    const entry = (parse(result.stdout.slice(result.stdout.indexOf('  - id:'))) as Array<Record<string, unknown>>)[0];
    expect(entry).toEqual({ id: 'image-ops', hash: hashApiKey(key), namespace: 'ops', scopes: ['locks', 'admin'] });
    const refused = spawnSync('node', ['dist/cli/keys-new.js', '--id', 'bad id', '--namespace', 'ops'], {
      cwd: appDir,
      env: { PATH: process.env.PATH ?? '' },
      encoding: 'utf8',
    });
    expect(refused.status).toBe(2);
    expect(refused.stderr).toContain('--id:');
  }, 300_000);

  it('serves /readyz 200 and grants a lock over Redis, then stops cleanly on SIGTERM', async () => {
    const appDir = imageLayout();

    const port = await freePort();
    // The Deploy section's commands as written: create a key into (a copy of) the shipped, empty keys
    // file that compose mounts, start, then the acquire curl with the key.
    const deploy = deployCommands();
    const keysFile = join(appDir, 'deploy-api-keys.yml');
    cpSync(join(ROOT, 'deploy/api-keys.yml'), keysFile);
    const created = spawnSync('sh', ['-c', `${deploy.createKey.replace('deploy/api-keys.yml', keysFile)} && printf %s "$KEY"`], {
      cwd: ROOT,
      encoding: 'utf8',
      // The command builds the project first (tsc): minutes on a starved machine.
      timeout: 240_000,
    });
    expect(created.status, created.stderr).toBe(0);
    const apiKey = created.stdout.trim();
    expect(apiKey).toMatch(/^kh_/);
    const env = {
      PATH: process.env.PATH ?? '',
      ...containerEnv(),
      // The compose network's names become loopback here; everything else is the compose environment.
      REDIS_URL: redis.url,
      // In place of the compose volume (deploy/api-keys.yml, empty until the operator adds keys): a
      // keys file with one key of this test's.
      KEYHOLDER_API_KEYS_FILE: keysFile,
      REDIS_KEY_PREFIX: `kh-image-${port}:`,
      HOST: '127.0.0.1',
      PORT: String(port),
    };
    const [command, ...args] = execForm(instructions(runtime, 'CMD').at(-1)?.args ?? '');
    const child = spawn(command ?? 'node', args, { cwd: appDir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const logs: string[] = [];
    child.stdout.on('data', (b: Buffer) => logs.push(b.toString()));
    child.stderr.on('data', (b: Buffer) => logs.push(b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    try {
      const base = `http://127.0.0.1:${port}`;
      await vi.waitFor(
        async () => {
          const ready =
            child.exitCode === null
              ? await fetch(`${base}/readyz`).then(
                  (r) => r.status,
                  () => 0,
                )
              : -1;
          if (ready !== 200) throw new Error(`no 200 on /readyz:\n${logs.join('')}`);
        },
        { timeout: 20_000, interval: 100 },
      );
      expect((await call(base, 'GET', '/readyz')).body).toEqual({ status: 'ready', store: 'redis' });

      // The Lua scripts made it into the image: a real grant over Redis, asked for with the README's curl.
      requireTool('curl', 'curl');
      const curl = await runShell(deploy.acquire.replace('localhost:3000', `127.0.0.1:${port}`), { ...process.env, KEY: apiKey });
      expect(curl.status, curl.stderr).toBe(0);
      expect(JSON.parse(curl.stdout)).toMatchObject({ key: 'invoice:42', ownerToken: expect.any(String) });
      expect((await fetch(`${base}/metrics`)).status).toBe(200);
      expect((await fetch(`${base}/docs/static/swagger-ui-bundle.js`)).status).toBe(200);

      // The HEALTHCHECK command, run as the container would.
      const [hcCommand, ...hcArgs] = execForm(instructions(runtime, 'HEALTHCHECK').at(-1)?.args ?? '');
      const healthcheck = spawnSync(hcCommand ?? 'node', hcArgs, { cwd: appDir, env, encoding: 'utf8', timeout: 10_000 });
      expect(healthcheck.status, healthcheck.stderr).toBe(0);
    } finally {
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
  }, 300_000);
});

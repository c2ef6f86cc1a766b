/**
 * Builds keyholder's image and runs its deployment for real, as a user would, from a clean state:
 * README's compose quick start as written, the healthcheck, a Redis restart with a lock held, Prometheus
 * scraping keyholder, a new key on SIGHUP, the image alone as the Dockerfile's comments and
 * docs/operations.md run it, and the sentinel, etcd and cluster profiles across `down` + `up`.
 * Needs root and a Docker engine (scripts/image/docker-env.sh installs and starts one from Debian's
 * packages); base images that cannot be pulled get local stand-ins (scripts/image/standins.sh).
 *   npm run test:image                       (KEEP_STANDINS=1: keep stand-ins made by an earlier run)
 * Not part of npm test: it takes many minutes and a lot of CPU and disk.
 */
import { existsSync, mkdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { composeQuickStart, imageCommandsOfDockerfile, imageCommandsOfOperations } from './image/doc-commands.js';
import { logTo, sh, step, totalSeconds, waitFor } from './image/shell.js';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const WORK = process.env.KEYHOLDER_IMAGE_WORKDIR ?? '/var/tmp/keyholder-image';
/** A copy of the checkout, where the docs' commands run; its name is the compose project's. */
const APP = join(WORK, 'keyholder-image-test');
const STANDINS_WORK = join(WORK, '..', 'keyholder-standins');
const PROFILES = '--profile sentinel --profile etcd --profile cluster';
const keepStandins = process.env.KEEP_STANDINS === '1';
/** The containers' start, on a busy machine; a wait ends as soon as its condition holds. */
const START_BUDGET_MS = 300_000;

const inApp = { cwd: APP };

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

async function api(port: number, method: string, path: string, key?: string, body?: unknown): Promise<Answer> {
  // A fresh connection per call: the steps block the event loop in synchronous shell commands, and a
  // pooled keep-alive socket that keyholder closed meanwhile (idle 5 s) would be reused before its
  // close is seen, failing the call with UND_ERR_SOCKET (seen after a 6 s `docker compose run`).
  const headers: Record<string, string> = { connection: 'close' };
  if (key !== undefined) headers.authorization = `Bearer ${key}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const response = await fetch(`http://127.0.0.1:${port}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  let parsed: Record<string, unknown>;
  try {
    parsed = JSON.parse(text) as Record<string, unknown>;
  } catch {
    parsed = { text };
  }
  return { status: response.status, body: parsed };
}

function expectStatus(answer: Answer, status: number, what: string): Answer {
  if (answer.status !== status) throw new Error(`${what}: expected ${status}, got ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer;
}

async function ready(port: number, store: string): Promise<void> {
  await waitFor(
    `keyholder on :${port} ready on ${store}`,
    async () => {
      const answer = await api(port, 'GET', '/readyz');
      if (answer.status !== 200 || answer.body.store !== store) throw new Error(`${answer.status} ${JSON.stringify(answer.body)}`);
    },
    START_BUDGET_MS,
    1000,
  );
}

/** A grant and its release; returns the grant's fencing token. */
async function grantAndRelease(port: number, key: string, lock: string): Promise<number> {
  const granted = expectStatus(await api(port, 'POST', `/v1/locks/${lock}/acquire`, key, { ttlMs: 30_000 }), 200, `acquire ${lock}`);
  expectStatus(await api(port, 'POST', `/v1/locks/${lock}/release`, key, { ownerToken: granted.body.ownerToken }), 200, `release ${lock}`);
  return Number(granted.body.fencingToken);
}

/**
 * The first grant after an `up`. /readyz is ready once the store answers, but a primary whose replicas
 * are still syncing refuses writes (min-replicas-to-write), and keyholder then answers 503
 * store_unavailable, failing closed: seen for a few seconds on the sentinel profile's second up. A
 * client retries that answer after its retryAfterMs, and so does this; any other answer fails at once.
 */
async function firstGrantAndRelease(port: number, key: string, lock: string): Promise<number> {
  const answer = await waitFor(
    `a grant on :${port}`,
    async () => {
      const acquired = await api(port, 'POST', `/v1/locks/${lock}/acquire`, key, { ttlMs: 30_000 });
      if (acquired.status === 503 && acquired.body.code === 'store_unavailable') throw new Error(`503 ${JSON.stringify(acquired.body)}`);
      return acquired;
    },
    START_BUDGET_MS,
    1000,
  );
  const granted = expectStatus(answer, 200, `acquire ${lock}`);
  expectStatus(await api(port, 'POST', `/v1/locks/${lock}/release`, key, { ownerToken: granted.body.ownerToken }), 200, `release ${lock}`);
  return Number(granted.body.fencingToken);
}

function removeWhatItMade(): void {
  if (existsSync(APP)) sh(`docker compose ${PROFILES} down -v --remove-orphans --timeout 5`, { ...inApp, allowFailure: true });
  // Whatever compose made, under either Compose's project name for the copy's folder.
  for (const project of ['keyholder-image-test', 'keyholderimagetest']) {
    const label = `--filter label=com.docker.compose.project=${project}`;
    sh(`docker ps -aq ${label} | xargs -r docker rm -f`);
    sh(`docker volume ls -q ${label} | xargs -r docker volume rm`);
    sh(`docker network ls -q ${label} | xargs -r docker network rm`);
  }
  // What the image-alone commands make (docs/operations.md "The image"), and the images built.
  sh('docker rm -f keyholder my-redis', { allowFailure: true });
  sh('docker network rm keyholder-net', { allowFailure: true });
  sh('docker image rm -f keyholder:latest keyholder:local', { allowFailure: true });
  if (!keepStandins) {
    // Images built on a stand-in carry its label too: the pruning takes them, children first.
    sh('docker image prune -a -f --filter label=org.keyholder.standin=true');
    sh('docker images -a -q --filter label=org.keyholder.standin=true | sort -u | xargs -r docker image rm -f');
    rmSync(STANDINS_WORK, { recursive: true, force: true });
  }
  rmSync(WORK, { recursive: true, force: true });
}

/** The base images the Dockerfile and docker-compose.yml name. */
function baseImages(): string[] {
  const dockerfile = readFileSync(join(ROOT, 'Dockerfile'), 'utf8');
  const node = /^ARG NODE_IMAGE=(\S+)/m.exec(dockerfile)?.[1];
  if (node === undefined) throw new Error('the Dockerfile has no ARG NODE_IMAGE=...');
  const compose = readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8');
  const images = [...compose.matchAll(/^\s+image:\s*(\S+)/gm)].map((m) => m[1] ?? '').filter((i) => i !== 'keyholder:local');
  return [node, ...new Set(images)];
}

/** Runs a README sh block as one shell session, as typed; returns what its curl line printed. */
function runQuickStart(lines: string[], keyFile: string): string {
  const marker = '@@curl-output@@';
  const script = ['set -e'];
  for (const line of lines) {
    if (line.startsWith('curl ')) {
      // Typed by hand, the curl comes seconds after compose returns; here it is retried only while
      // nothing listens on the port yet (curl 7: refused, 52/56: connection closed), as written.
      script.push(`echo '${marker}'`, 'for attempt in $(seq 1 120); do', `  rc=0; ${line} || rc=$?`);
      script.push('  case $rc in 7|52|56) sleep 1 ;; *) break ;; esac', 'done', '[ "$rc" -eq 0 ]');
    } else {
      script.push(line);
    }
  }
  script.push(`printf %s "$KEY" > ${keyFile}`);
  const out = sh(script.join('\n'), inApp).stdout;
  return out.slice(out.lastIndexOf(marker) + marker.length).trim();
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) throw new Error('npm run test:image needs root (it installs and starts Docker, and runs debootstrap)');
  const images = baseImages();
  const nodeMajor = /^node:(\d+)/.exec(images[0] ?? '')?.[1] ?? '';
  let key = '';
  console.log(`keyholder image test (log: ${join(WORK, 'test-image.log')})`);

  await step('Docker engine, compose and debootstrap', () => {
    sh(`bash ${join(ROOT, 'scripts/image/docker-env.sh')}`);
  });
  await step(`clean state: remove what an earlier run made${keepStandins ? ' (keeping stand-ins)' : ''}`, () => {
    removeWhatItMade();
    mkdirSync(APP, { recursive: true });
    logTo(join(WORK, 'test-image.log'));
  });
  await step(`base images (${images.join(', ')})`, () => {
    sh(`STANDINS_WORKDIR=${STANDINS_WORK} bash ${join(ROOT, 'scripts/image/standins.sh')} ${images.join(' ')}`);
  });
  await step('a copy of the checkout to run the docs in', () => {
    // Not node_modules: a checkout whose node_modules is a symlink (a git worktree sharing another's)
    // has it listed among the untracked files, as .gitignore's node_modules/ matches directories only.
    sh(`git ls-files -z --cached --others --exclude-standard -- . ':!node_modules' | tar --null -T - -cf - | tar -xf - -C ${APP}`, {
      cwd: ROOT,
    });
    // Stands for the `npm ci` the quick start asks for once: the same lock file's node_modules.
    symlinkSync(join(ROOT, 'node_modules'), join(APP, 'node_modules'), 'dir');
  });

  await step('README quick start as written: the key, docker compose up, the curl acquire', () => {
    const keyFile = join(WORK, 'key');
    const printed = runQuickStart(composeQuickStart(APP), keyFile);
    const grant = JSON.parse(printed) as Record<string, unknown>;
    if (typeof grant.ownerToken !== 'string' || typeof grant.fencingToken !== 'number') {
      throw new Error(`the quick start's curl printed no grant: ${printed}`);
    }
    key = readFileSync(keyFile, 'utf8');
    const size = Number(sh("docker image inspect -f '{{.Size}}' keyholder:local").stdout.trim());
    console.log(`\n    granted ${String(grant.key)} (fencing ${grant.fencingToken}); image keyholder:local ${(size / 1e6).toFixed(0)} MB`);
  });

  await step(`healthcheck healthy, and the server is PID 1 on the image's Node ${nodeMajor}`, async () => {
    const id = sh('docker compose ps -q keyholder', inApp).stdout.trim();
    await waitFor(
      'the keyholder container healthy',
      () => {
        const health = sh(`docker inspect -f '{{.State.Health.Status}}' ${id}`).stdout.trim();
        if (health !== 'healthy') throw new Error(health);
      },
      START_BUDGET_MS,
      1000,
    );
    const pid1 = sh('docker compose exec -T keyholder cat /proc/1/cmdline', inApp).stdout.replaceAll('\0', ' ').trim();
    const version = sh('docker compose exec -T keyholder node --version', inApp).stdout.trim();
    if (pid1 !== 'node dist/server.js') throw new Error(`PID 1 is ${pid1}`);
    if (!version.startsWith(`v${nodeMajor}.`)) throw new Error(`the image runs Node ${version}, not ${nodeMajor}`);
    console.log(`\n    PID 1: ${pid1} on Node ${version}`);
  });

  await step('a key made later: keys:new --file, then docker compose kill -s HUP keyholder', async () => {
    const made = sh('npm run -s keys:new -- --id team-b --namespace team-b --scopes locks --file deploy/api-keys.yml', inApp);
    const second = made.stdout.trim();
    expectStatus(await api(3000, 'POST', '/v1/locks/b/acquire', second, { ttlMs: 1000 }), 401, 'the new key before SIGHUP');
    sh('docker compose kill -s HUP keyholder', inApp);
    await waitFor(
      'the new key accepted',
      async () => {
        expectStatus(await api(3000, 'POST', '/v1/locks/b/acquire', second, { ttlMs: 1000 }), 200, 'the new key after SIGHUP');
      },
      30_000,
    );
    // The image's own key command, as docs/operations.md gives it.
    const printed = sh('docker compose run --rm keyholder node dist/cli/keys-new.js --id team-c --namespace team-c --scopes locks', inApp);
    if (!/^ {2}kh_\S+$/m.test(printed.stdout)) throw new Error(`no key printed:\n${printed.stdout}`);
  });

  await step('Redis restart with a lock held: the lease and its fencing order survive (AOF)', async () => {
    const held = expectStatus(await api(3000, 'POST', '/v1/locks/aof/acquire', key, { ttlMs: 600_000 }), 200, 'acquire before the restart');
    sh('docker compose restart redis', inApp);
    await ready(3000, 'redis');
    const other = await api(3000, 'POST', '/v1/locks/aof/acquire', key, { ttlMs: 30_000 });
    if (other.status !== 409 || other.body.code !== 'lock_held')
      throw new Error(`the held lock was lost: ${other.status} ${JSON.stringify(other.body)}`);
    const renewed = expectStatus(
      await api(3000, 'POST', '/v1/locks/aof/renew', key, { ownerToken: held.body.ownerToken, ttlMs: 30_000 }),
      200,
      'renew after the restart',
    );
    if (renewed.body.fencingToken !== held.body.fencingToken) throw new Error('the renewal changed the fencing token');
    expectStatus(await api(3000, 'POST', '/v1/locks/aof/release', key, { ownerToken: held.body.ownerToken }), 200, 'release');
    const next = await grantAndRelease(3000, key, 'aof');
    if (!(next > Number(held.body.fencingToken))) throw new Error(`fencing went backwards: ${String(held.body.fencingToken)} then ${next}`);
    console.log(`\n    fencing ${String(held.body.fencingToken)} held across the restart, then ${next}`);
  });

  await step('Prometheus scrapes keyholder and loads the alert rules', async () => {
    const query = async (q: string) => {
      const response = await fetch(`http://127.0.0.1:9090/api/v1/query?query=${encodeURIComponent(q)}`);
      const body = (await response.json()) as { data?: { result?: Array<{ value: [number, string] }> } };
      return body.data?.result ?? [];
    };
    await waitFor(
      'up{job="keyholder"} == 1',
      async () => {
        if ((await query('up{job="keyholder"}'))[0]?.value[1] !== '1') throw new Error('not scraped yet');
      },
      START_BUDGET_MS,
      2000,
    );
    await waitFor(
      'keyholder_lock_operations_total in Prometheus',
      async () => {
        if ((await query('keyholder_lock_operations_total{operation="acquire"}')).length === 0) throw new Error('no series yet');
      },
      START_BUDGET_MS,
      2000,
    );
    const rules = (await (await fetch('http://127.0.0.1:9090/api/v1/rules')).json()) as { data?: { groups?: unknown[] } };
    if ((rules.data?.groups ?? []).length === 0) throw new Error('no alert rules loaded');
  });

  await step('docker compose down', () => {
    sh('docker compose down', inApp);
  });

  await step("the image alone: the Dockerfile's comments = docs/operations.md, run as written", async () => {
    const commands = imageCommandsOfOperations(APP);
    const inDockerfile = imageCommandsOfDockerfile(APP);
    if (JSON.stringify(commands) !== JSON.stringify(inDockerfile)) {
      throw new Error(`the Dockerfile's comments and docs/operations.md differ:\n${inDockerfile.join('\n')}\n---\n${commands.join('\n')}`);
    }
    for (const command of commands) {
      const out = sh(command, inApp);
      if (command.includes('keys-new.js') && !/^ {2}kh_\S+$/m.test(out.stdout)) throw new Error(`no key printed:\n${out.stdout}`);
    }
    await ready(3000, 'redis');
    await grantAndRelease(3000, key, 'alone');
    sh('docker rm -f keyholder my-redis && docker network rm keyholder-net');
  });

  // As docker-compose.yml's comments start them; the state of each is in its volumes, across down + up.
  const profiles = [
    { name: 'sentinel', port: 3001, store: 'redis', downs: 1 },
    { name: 'etcd', port: 3002, store: 'etcd', downs: 1 },
    { name: 'cluster', port: 3003, store: 'redis', downs: 2 },
  ];
  for (const { name, port, store, downs } of profiles) {
    let fencing = 0;
    for (let round = 0; round <= downs; round++) {
      await step(`--profile ${name}: up${round > 0 ? ` after down (${round})` : ''}, ready, a grant`, async () => {
        sh(`docker compose --profile ${name} up -d --build`, inApp);
        await ready(port, store);
        const next = await firstGrantAndRelease(port, key, `profile-${name}`);
        if (!(next > fencing)) throw new Error(`fencing went backwards: ${fencing} then ${next}`);
        fencing = next;
      });
      if (round < downs) await step(`--profile ${name}: down`, () => void sh(`docker compose --profile ${name} down`, inApp));
    }
    await step(`--profile ${name}: down -v`, () => void sh(`docker compose --profile ${name} down -v`, inApp));
  }

  console.log(`passed: every step, ${totalSeconds().toFixed(0)} s in all`);
}

main().catch((error: unknown) => {
  console.error(error instanceof Error ? error.message : error);
  // fetch's own message is only "fetch failed": the cause says what the socket did.
  if (error instanceof Error && error.cause !== undefined) console.error('cause:', error.cause);
  console.error(`full log: ${join(WORK, 'test-image.log')}`);
  process.exit(1);
});

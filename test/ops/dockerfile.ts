/** Just enough of a Dockerfile parser to check keyholder's own Dockerfile and replay its steps. */

export interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

export interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
}

export interface Dockerfile {
  readonly stages: Stage[];
}

export function parseDockerfile(text: string): Dockerfile {
  const logical: string[] = [];
  let pending = '';
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (pending === '' && (line === '' || line.startsWith('#'))) continue;
    if (line.startsWith('#')) continue;
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trim()} `;
      continue;
    }
    logical.push(pending + line);
    pending = '';
  }

  const argDefaults = new Map<string, string>();
  const stages: Stage[] = [];
  for (const line of logical) {
    const match = /^(\S+)\s*(.*)$/.exec(line);
    if (!match) continue;
    const keyword = (match[1] ?? '').toUpperCase();
    const args = (match[2] ?? '').trim();
    if (keyword === 'ARG' && stages.length === 0) {
      const [name, value] = args.split('=');
      if (name && value !== undefined) argDefaults.set(name, value);
      continue;
    }
    if (keyword === 'FROM') {
      const [image = '', as, name] = args.split(/\s+/);
      const resolved = image.replace(/\$\{(\w+)\}|\$(\w+)/g, (_m, a?: string, b?: string) => argDefaults.get(a ?? b ?? '') ?? '');
      stages.push({ image: resolved, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
      continue;
    }
    const stage = stages.at(-1);
    if (!stage) throw new Error(`Dockerfile: ${keyword} before FROM`);
    stage.instructions.push({ keyword, args });
  }
  return { stages };
}

export function instructions(stage: Stage, keyword: string): Instruction[] {
  return stage.instructions.filter((i) => i.keyword === keyword);
}

/** The exec form (JSON array) of CMD or HEALTHCHECK ... CMD. */
export function execForm(args: string): string[] {
  const json = args.slice(args.indexOf('['));
  const parsed = JSON.parse(json) as unknown;
  if (!Array.isArray(parsed) || !parsed.every((p) => typeof p === 'string')) throw new Error(`not an exec form: ${args}`);
  return parsed;
}

/** ENV KEY=VALUE [KEY=VALUE...] of a stage, in order (unquoted values only, as keyholder's Dockerfile uses). */
export function stageEnv(stage: Stage): Record<string, string> {
  const env: Record<string, string> = {};
  for (const { args } of instructions(stage, 'ENV')) {
    for (const pair of args.split(/\s+/)) {
      const eq = pair.indexOf('=');
      if (eq <= 0) throw new Error(`ENV ${args}: only KEY=VALUE pairs are supported here`);
      env[pair.slice(0, eq)] = pair.slice(eq + 1);
    }
  }
  return env;
}

/** COPY [--from=x] [--chown=..] src... dest, split into its parts. */
export function copyParts(args: string): { from: string | undefined; sources: string[]; dest: string } {
  const words = args.split(/\s+/);
  const flags = words.filter((w) => w.startsWith('--'));
  const paths = words.filter((w) => !w.startsWith('--'));
  const from = flags.find((f) => f.startsWith('--from='))?.slice('--from='.length);
  const dest = paths.pop();
  if (dest === undefined || paths.length === 0) throw new Error(`COPY ${args}: needs a source and a destination`);
  return { from, sources: paths, dest };
}

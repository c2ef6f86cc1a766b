/** The deployment commands that the docs and the Dockerfile's comments tell a user to type, as written. */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Joins lines ending in a backslash with the next, as a shell does. */
function joinContinued(lines: string[]): string[] {
  const commands: string[] = [];
  let pending = '';
  for (const line of lines) {
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1).trimEnd()} `;
      continue;
    }
    commands.push((pending + line.trim()).trim());
    pending = '';
  }
  return commands.filter((c) => c !== '' && !c.startsWith('#'));
}

function shBlocks(markdown: string): string[][] {
  return [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => (m[1] ?? '').split('\n'));
}

/** README's compose quick start: the sh block that starts compose. */
export function composeQuickStart(root: string): string[] {
  const block = shBlocks(readFileSync(join(root, 'README.md'), 'utf8')).find((lines) =>
    lines.some((l) => l.startsWith('docker compose up')),
  );
  if (!block) throw new Error('README.md has no sh block that runs docker compose up');
  return joinContinued(block);
}

/** docs/operations.md "The image": the sh block that builds and runs the image alone. */
export function imageCommandsOfOperations(root: string): string[] {
  const text = readFileSync(join(root, 'docs/operations.md'), 'utf8');
  const section = text.slice(text.indexOf('## The image'));
  const block = shBlocks(section)[0];
  if (!block) throw new Error('docs/operations.md "The image" has no sh block');
  return joinContinued(block);
}

/** The commands in the Dockerfile's comments: the lines `#   docker …` and their continuations. */
export function imageCommandsOfDockerfile(root: string): string[] {
  const lines = readFileSync(join(root, 'Dockerfile'), 'utf8').split('\n');
  const picked: string[] = [];
  let continuing = false;
  for (const line of lines) {
    if (!line.startsWith('#')) break;
    const body = line.replace(/^#\s*/, '');
    if (continuing || body.startsWith('docker ')) {
      picked.push(body);
      continuing = body.endsWith('\\');
    }
  }
  return joinContinued(picked);
}

/** Formats rows as a Markdown table (what the examples print and their READMEs hold). */
export function markdownTable(header: readonly string[], rows: ReadonlyArray<ReadonlyArray<string | number>>): string {
  const line = (cells: ReadonlyArray<string | number>) => `| ${cells.map(String).join(' | ')} |`;
  return [line(header), line(header.map(() => '---')), ...rows.map(line)].join('\n');
}

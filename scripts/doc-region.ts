/** `doc` (the file `docName`) with the text between the `start` and `end` markers replaced by `text`. */
export function withRegion(doc: string, docName: string, start: string, end: string, text: string): string {
  const from = doc.indexOf(start);
  const to = doc.indexOf(end);
  if (from < 0 || to < from) throw new Error(`${docName} lacks the ${start} … ${end} markers`);
  return `${doc.slice(0, from + start.length)}\n${text}\n${doc.slice(to)}`;
}

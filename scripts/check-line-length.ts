/**
 * Fails when a line in src/ is longer than 120 characters. The formatter keeps code within that
 * width but leaves comments and string literals as written; this holds them to it too. Counts
 * characters (code points), not bytes, so a comment with a "≤" is not penalised. Run by `npm run lint`.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const MAX_LINE_LENGTH = 120;

/** Every line over the limit in the .ts files under `dir`, as `file:line: length`. */
export function longLines(dir: string, root: string = dir): string[] {
  const found: string[] = [];
  const files = readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .sort();
  for (const name of files) {
    const path = join(dir, name);
    readFileSync(path, 'utf8')
      .split('\n')
      .forEach((line, index) => {
        const length = [...line].length;
        if (length > MAX_LINE_LENGTH) found.push(`${relative(root, path)}:${index + 1}: ${length} characters`);
      });
  }
  return found;
}

if (import.meta.main) {
  const root = join(dirname(fileURLToPath(import.meta.url)), '..');
  const found = longLines(join(root, 'src'), root);
  for (const line of found) console.error(line);
  if (found.length > 0) {
    console.error(`${found.length} line(s) in src/ over ${MAX_LINE_LENGTH} characters`);
    process.exit(1);
  }
}

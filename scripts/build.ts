/**
 * Bundles the plugin's entry into dist/warren: one executable plain-JavaScript file (CommonJS,
 * with a shebang) that is what goes into the CNI bin directory. The plugin's cold start is on the
 * path of every pod start, and loading one file without type stripping is most of what it costs.
 * Run by `npm run build`, and before test, start and bench.
 */
import { buildSync } from 'esbuild';
import { chmodSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PLUGIN_BUNDLE = join(REPO_ROOT, 'dist', 'warren');

export function buildPlugin(): void {
  buildSync({
    entryPoints: [join(REPO_ROOT, 'src', 'plugin', 'plugin-main.ts')],
    outfile: PLUGIN_BUNDLE,
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    minify: true,
    legalComments: 'none',
    // The Node that builds it runs it: an absolute interpreter path saves the exec of
    // /usr/bin/env on every pod start (about 1.5 ms). Rebuild after moving Node.
    banner: { js: `#!${process.execPath}` },
    logLevel: 'warning',
  });
  chmodSync(PLUGIN_BUNDLE, 0o755);
  // dist/ is CommonJS whatever the repository's package.json says.
  writeFileSync(join(REPO_ROOT, 'dist', 'package.json'), '{ "type": "commonjs" }\n');
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildPlugin();
  console.log(`built ${PLUGIN_BUNDLE}`);
}

/**
 * Builds what goes into the CNI bin directory: the plugin's entry bundled into dist/warren, one
 * executable plain-JavaScript file (CommonJS, with a shebang), and the native forwarder
 * (src/plugin/forwarder, C) compiled into dist/warren-forwarder, a static executable. The
 * plugin's cold start is on the path of every pod start, and loading one file without type
 * stripping is most of what it costs; the forwarder takes even that off the path while the agent
 * answers. And the command line with the agent bundled into dist/cli/ (buildCli), which
 * bin/warren runs while it is newer than every source it was made of. Run by `npm run build`, and
 * before test, start and bench.
 */
import { build, buildSync } from 'esbuild';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const PLUGIN_BUNDLE = join(REPO_ROOT, 'dist', 'warren');
export const FORWARDER_SOURCE_DIR = join(REPO_ROOT, 'src', 'plugin', 'forwarder');
export const FORWARDER_BINARY = join(REPO_ROOT, 'dist', 'warren-forwarder');
/** The forwarder's translation units; find-socket.c is also what the fuzz harness links. */
export const FORWARDER_SOURCES = ['forwarder.c', 'agent-exchange.c', 'find-socket.c'].map((name) =>
  join(FORWARDER_SOURCE_DIR, name),
);
/** C11 and libc only, every warning an error: the flags of every build of the forwarder. */
const C_FLAGS = ['-std=c11', '-Wall', '-Wextra', '-Werror', '-D_GNU_SOURCE'];

export function buildPlugin(): void {
  const result = buildSync({
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
    write: false,
  });
  for (const file of result.outputFiles) writeWhole(file.path, file.contents, 0o755);
  // dist/ is CommonJS whatever the repository's package.json says.
  writeWhole(join(REPO_ROOT, 'dist', 'package.json'), Buffer.from('{ "type": "commonjs" }\n'), 0o644);
  buildForwarder();
}

/**
 * Puts `bytes` at `path` whole, or leaves the file alone when it already holds them. Tests build
 * while other tests run the plugin and start agents from dist/ (two files at a time): a file
 * rewritten in place is empty or half-written for a moment, and an agent started then failed on
 * "Invalid package config dist/package.json". A reader sees the old file or the new one, never a
 * part; and a build that changes nothing writes nothing.
 */
export function writeWhole(path: string, bytes: Uint8Array, mode: number): void {
  if (existsSync(path) && Buffer.from(bytes).equals(readFileSync(path))) {
    if ((statSync(path).mode & 0o777) !== mode) chmodSync(path, mode);
    return;
  }
  mkdirSync(dirname(path), { recursive: true });
  const temp = `${path}.tmp-${process.pid}`;
  try {
    writeFileSync(temp, bytes, { mode });
    chmodSync(temp, mode);
    renameSync(temp, path);
  } finally {
    rmSync(temp, { force: true });
  }
}

/**
 * The forwarder as installed: static (the node may have no libc to match), stripped, against musl
 * (Debian's gcc through musl-gcc). A static glibc executable is ~700 KB and measured 0.61–0.65 ms
 * from spawn to exit here doing nothing, a static musl one ~50 KB and 0.15–0.19 ms (2,650 against
 * 6,000 starts/s with 20 in flight): the start is on every pod's path. Skipped when the binary is
 * newer than its sources and this script, so a test run does not pay for it again.
 */
export function buildForwarder(outPath = FORWARDER_BINARY): void {
  if (outPath === FORWARDER_BINARY && isNewerThanInputs(outPath)) return;
  compileC('musl-gcc', [...C_FLAGS, '-O2', '-static', '-s', ...FORWARDER_SOURCES], outPath);
}

/**
 * The forwarder as buildForwarder makes it, by another compiler: `compiler` with `prefix` before the
 * common flags (a cross gcc and its musl's specs file, for another architecture's image:
 * scripts/image-cross.ts). Always compiled: the image builder writes it to a temp dir.
 */
export function buildForwarderWith(compiler: string, prefix: readonly string[], outPath: string): void {
  compileC(compiler, [...prefix, ...C_FLAGS, '-O2', '-static', '-s', ...FORWARDER_SOURCES], outPath);
}

/**
 * LeakSanitizer's defaults for every sanitized build: only globals and thread-local storage are
 * roots, so a block not freed by exit is reported wherever its pointer lingers (the file says why).
 */
export const LEAK_CHECK_DEFAULTS_SOURCE = join(REPO_ROOT, 'test', 'plugin', 'leak-check-defaults.c');

/**
 * C sources built into one program under AddressSanitizer and UndefinedBehaviorSanitizer (against
 * glibc, dynamically linked: the sanitizers' runtimes are shared glibc libraries): the forwarder for
 * tests that run it over a corpus, or a test's driver with the forwarder's part it drives. Any
 * finding aborts the process, and any block not freed by exit is reported on stderr
 * (LEAK_CHECK_DEFAULTS_SOURCE, linked in). Built on demand, never by `npm run build`.
 */
export function buildSanitized(sources: readonly string[], outPath: string): void {
  const sanitizers = ['-fsanitize=address,undefined', '-fno-sanitize-recover=all', '-fno-omit-frame-pointer'];
  compileC('gcc', [...C_FLAGS, '-O1', '-g', ...sanitizers, ...sources, LEAK_CHECK_DEFAULTS_SOURCE], outPath);
}

/** The forwarder under the sanitizers (buildSanitized). */
export function buildForwarderSanitized(outPath: string): void {
  buildSanitized(FORWARDER_SOURCES, outPath);
}

/** Compiles to a temp name beside `outPath`, then renames: a reader never sees half a binary. */
function compileC(compiler: string, args: readonly string[], outPath: string): void {
  const temp = `${outPath}.tmp-${process.pid}`;
  mkdirSync(dirname(outPath), { recursive: true });
  try {
    execFileSync(compiler, [...args, '-o', temp], { stdio: ['ignore', 'inherit', 'inherit'] });
  } catch (error) {
    rmSync(temp, { force: true });
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error(
        `${compiler} is not installed: the native forwarder (src/plugin/forwarder) needs gcc, libc6-dev and musl-tools; run scripts/setup.sh`,
      );
    }
    throw new Error(`compiling the native forwarder into ${outPath} failed (${compiler} ${args.join(' ')})`, {
      cause: error,
    });
  }
  renameSync(temp, outPath);
}

function isNewerThanInputs(outPath: string): boolean {
  if (!existsSync(outPath)) return false;
  const built = statSync(outPath).mtimeMs;
  const inputs = [
    fileURLToPath(import.meta.url),
    ...readdirSync(FORWARDER_SOURCE_DIR)
      .filter((name) => name.endsWith('.c') || name.endsWith('.h'))
      .map((name) => join(FORWARDER_SOURCE_DIR, name)),
  ];
  return inputs.every((input) => statSync(input).mtimeMs < built);
}

export const CLI_BUNDLE_DIR = join(REPO_ROOT, 'dist', 'cli');
/** The CLI bundle's entry; bin/warren names the same files. */
export const CLI_BUNDLE = join(CLI_BUNDLE_DIR, 'main.mjs');
/** The sources the CLI bundle was made of, one path (relative to the repository) a line. */
export const CLI_BUNDLE_INPUTS = join(CLI_BUNDLE_DIR, 'inputs.txt');

/**
 * The command line and the agent, bundled into dist/cli/: main.mjs and chunks, ES modules split
 * where the sources import dynamically, so a command loads only what it runs and the agent only
 * the client libraries its options use (agent.ts, release-wiring.ts). npm packages stay outside
 * (imported from node_modules as from the sources: protobufjs does not survive bundling, and
 * CommonJS packages bundled into ES modules fail on their dynamic requires). What it saves is the
 * type stripping, resolution and loading of some 150 files at every start (an agent started in
 * 0.27 s of CPU from the bundle against 0.79 s from the sources, both after the lazy imports;
 * BENCHMARKS.md). @kubernetes/client-node, which was bundled here in part to keep its 870 models
 * out of the agent, is no longer imported by the agent at all (sources/kubernetes/kubeconfig.ts
 * says why; test/agent/without-kubernetes-client.test.ts holds it to that).
 *
 * The sources read files beside themselves (package.json for the version, the .proto files)
 * through `import.meta.url`: in the bundle each such URL is made relative to the source file it
 * was written in, so the bundle reads the same files wherever the tree is (src/ stays beside
 * dist/, in the image too). inputs.txt lists the sources, for bin/warren's freshness check.
 */
export async function buildCli(): Promise<void> {
  rmSync(CLI_BUNDLE_DIR, { recursive: true, force: true });
  const result = await build({
    entryPoints: [join(REPO_ROOT, 'src', 'cli', 'main.ts')],
    outdir: CLI_BUNDLE_DIR,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    outExtension: { '.js': '.mjs' },
    metafile: true,
    legalComments: 'none',
    logLevel: 'warning',
    packages: 'external',
    plugins: [
      {
        name: 'source-relative-import-meta-url',
        setup(plugin) {
          plugin.onLoad({ filter: /\.ts$/ }, (args) => {
            const text = readFileSync(args.path, 'utf8');
            if (!text.includes('import.meta.url')) return undefined;
            const fromBundle = JSON.stringify(relative(CLI_BUNDLE_DIR, args.path));
            return {
              contents: text.replaceAll('import.meta.url', `new URL(${fromBundle}, import.meta.url).href`),
              loader: 'ts',
            };
          });
        },
      },
    ],
  });
  const inputs = Object.keys(result.metafile.inputs).filter((input) => !input.includes('node_modules/'));
  writeFileSync(
    CLI_BUNDLE_INPUTS,
    `${inputs.map((input) => relative(REPO_ROOT, join(REPO_ROOT, input))).join('\n')}\n`,
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  buildPlugin();
  await buildCli();
  console.log(`built ${PLUGIN_BUNDLE}, ${FORWARDER_BINARY} and ${CLI_BUNDLE}`);
}

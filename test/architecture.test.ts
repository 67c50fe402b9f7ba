/**
 * The architecture, checked from the code: every file under src/ imports only its own layer and
 * the layers before it (docs/layout.md), so data flows one way and a lower layer never
 * learns of a higher one; and the plugin's bundle is made of the files it is meant to be made of,
 * so the cold start on every pod start cannot grow by an accidental import.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { describe, it } from 'node:test';
import { buildSync } from 'esbuild';
import { REPO } from './helpers/processes.ts';

/** The layers in order; a layer may import itself and any layer before it. */
export const LAYERS = ['core', 'ipam', 'store', 'allocator', 'cni', 'api', 'sources', 'agent'] as const;
/** Entry points sit on top, and each may use only what it names: the plugin talks to the agent and nothing else. */
export const ENTRY_POINTS: Record<string, readonly string[]> = {
  plugin: ['core', 'ipam', 'cni', 'api', 'plugin'],
  cli: [...LAYERS, 'cli', 'cli/adapters'],
};
/**
 * Parts of an entry point held to less than the entry point may use. Runtime adapters are the
 * CLI's code (`warren podman-events` runs podman's) but run beside the agent, not in it: they speak
 * the plugin wire (api) and nothing of the agent's.
 */
export const CONFINED: Record<string, readonly string[]> = {
  'cli/adapters': ['core', 'api', 'cli/adapters'],
};

/**
 * The agent's parts: each folder of src/agent and the other folders it may import. The files at
 * the top of src/agent only wire (AGENT_WIRING); a part never imports them, so the parts form a
 * tree under the wiring and a part can be read, and tested, without the agent around it.
 */
export const AGENT_PARTS: Record<string, readonly string[]> = {
  settings: [],
  dashboard: [],
  // A part may read its own settings from the options (settings is a leaf): the node's config
  // manager and the cluster's upkeep are configured there, as release, kubernetes and server are.
  node: ['settings'],
  metrics: ['settings'],
  cluster: ['metrics', 'settings'],
  release: ['settings', 'metrics'],
  registry: ['settings', 'metrics', 'release'],
  // The ADD planners that read pods and namespaces (pools, addresses, holdings) are server's AddPlanners.
  kubernetes: ['settings', 'metrics', 'release', 'server'],
  server: ['settings', 'metrics', 'release'],
};
/** The files directly in src/agent: the composition of the parts, and nothing else. */
export const AGENT_WIRING: readonly string[] = [
  'agent.ts',
  'base-wiring.ts',
  'held-parts.ts',
  'kubernetes-parts.ts',
  'kubernetes-planners.ts',
  'kubernetes-wiring.ts',
  'release-wiring.ts',
  'serving-wiring.ts',
  'sides-wiring.ts',
];

/**
 * The store's backends: each folder of src/store and what it may import besides itself and the
 * layers before `store`. The root holds the contract (store.ts, membership.ts, and the cluster's
 * records and holdings a shared store offers as `Store.cluster`: cluster.ts, cluster-holdings.ts;
 * a node file's succession, which its file and its publications both carry: succession.ts) and the
 * ForwardingStore, and imports none of its folders; `tiered/` is the two-tier store with the
 * ClusterTier contract; the tiers build on `tiered/` and the root and never on each other; `sqlite/`
 * knows the root's contract only.
 */
export const STORE_PARTS: Record<string, readonly string[]> = {
  sqlite: [''],
  tiered: [''],
  'etcd-tier': ['', 'tiered'],
  kubernetes: ['', 'tiered'],
};
/** The files directly in src/store: the contracts (the store's and its ledger's, membership's, the cluster's) and the forwarding wrapper. */
export const STORE_ROOT: readonly string[] = [
  'cluster-holdings.ts',
  'cluster.ts',
  'forwarding-store.ts',
  'ledger.ts',
  'membership.ts',
  'store.ts',
  'succession.ts',
];

/** A file longer than this is read in parts anyway: it should be parts (counted after `npm run format`). */
export const MAX_FILE_LINES = 400;

const SRC = join(REPO, 'src');
const AGENT = join(SRC, 'agent');
const STORE = join(SRC, 'store');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** Relative module specifiers a file imports, statically or dynamically (type-only ones too). */
export function importsOf(text: string): string[] {
  const specifiers = new Set<string>();
  const patterns = [/\bfrom\s+'([^']+)'/g, /\bimport\s*\(\s*'([^']+)'\s*\)/g, /^\s*import\s+'([^']+)'/gm];
  for (const pattern of patterns) for (const match of text.matchAll(pattern)) specifiers.add(match[1] as string);
  return [...specifiers].filter((s) => s.startsWith('.'));
}

/** The layer or entry point of a src file (its top folder, or a confined part of one); undefined for a file directly in src/. */
function unitOf(path: string): string | undefined {
  const parts = relative(SRC, path).split(sep);
  if (parts.length < 2) return undefined;
  const part = parts.slice(0, 2).join('/');
  return parts.length > 2 && CONFINED[part] !== undefined ? part : parts[0];
}

/** What `unit` may import, or undefined when the unit is unknown (a folder the layers do not name). */
export function allowedFor(unit: string): readonly string[] | undefined {
  const entry = CONFINED[unit] ?? ENTRY_POINTS[unit];
  if (entry !== undefined) return entry;
  const index = (LAYERS as readonly string[]).indexOf(unit);
  return index < 0 ? undefined : LAYERS.slice(0, index + 1);
}

/** The part of src/agent a path is in: its folder there, '' for a wiring file, undefined outside src/agent. */
function agentPartOf(path: string): string | undefined {
  if (!path.startsWith(AGENT + sep)) return undefined;
  const parts = relative(AGENT, path).split(sep);
  return parts.length === 1 ? '' : parts[0];
}

/** Imports between the agent's parts that AGENT_PARTS does not allow, as "from -> to" lines. */
function agentPartViolations(path: string, target: string): string[] {
  const from = agentPartOf(path);
  const to = agentPartOf(target);
  if (from === undefined || to === undefined || from === '' || from === to) return [];
  const allowed = AGENT_PARTS[from];
  const where = `${relative(REPO, path)} -> ${relative(REPO, target)}`;
  if (allowed === undefined) return [`${where} (src/agent/${from} is not a part named in AGENT_PARTS)`];
  if (to === '') return [`${where} (agent/${from} may not import the agent's wiring)`];
  return allowed.includes(to)
    ? []
    : [`${where} (agent/${from} may import only ${allowed.length === 0 ? 'itself' : allowed.join(', ')})`];
}

/** The backend of src/store a path is in: its folder there, '' for a root file, undefined outside src/store. */
function storePartOf(path: string): string | undefined {
  if (!path.startsWith(STORE + sep)) return undefined;
  const parts = relative(STORE, path).split(sep);
  return parts.length === 1 ? '' : parts[0];
}

/** Imports between the store's backends that STORE_PARTS does not allow, as "from -> to" lines. */
function storePartViolations(path: string, target: string): string[] {
  const from = storePartOf(path);
  const to = storePartOf(target);
  if (from === undefined || to === undefined || from === to) return [];
  const where = `${relative(REPO, path)} -> ${relative(REPO, target)}`;
  if (from === '') return [`${where} (the store's contract may not import its backends)`];
  const allowed = STORE_PARTS[from];
  if (allowed === undefined) return [`${where} (src/store/${from} is not a backend named in STORE_PARTS)`];
  const names = allowed.map((p) => (p === '' ? 'the root' : p));
  return allowed.includes(to) ? [] : [`${where} (store/${from} may import only ${names.join(', ')})`];
}

/**
 * The import circles among `files` (type-only imports included: a circle of types is still two
 * files that cannot be read apart), each as its files in order; none of two files' own.
 */
export function importCircles(files: ReadonlyArray<{ path: string; text: string }>): string[][] {
  const edges = new Map<string, string[]>();
  for (const { path, text } of files)
    edges.set(
      path,
      importsOf(text).map((specifier) => resolve(dirname(path), specifier)),
    );
  // Tarjan's strongly connected components: a component of more than one file is a circle.
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const circles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v) as number);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!edges.has(w)) continue;
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v) as number, low.get(w) as number));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v) as number, index.get(w) as number));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    for (let w = stack.pop(); w !== undefined; w = w === v ? undefined : stack.pop()) {
      onStack.delete(w);
      component.push(relative(REPO, w));
    }
    if (component.length > 1) circles.push(component.sort());
  };
  for (const v of edges.keys()) if (!index.has(v)) visit(v);
  return circles;
}

/** Every import of `files` that goes against the layer order, as "from -> to" lines. */
export function violations(files: ReadonlyArray<{ path: string; text: string }>): string[] {
  const found: string[] = [];
  for (const { path, text } of files) {
    const unit = unitOf(path);
    if (unit === undefined) {
      found.push(`${relative(REPO, path)}: a file directly in src/ belongs to no layer`);
      continue;
    }
    const allowed = allowedFor(unit);
    if (allowed === undefined) {
      found.push(
        `${relative(REPO, path)}: src/${unit} is not a layer (${LAYERS.join(' → ')}, then ${Object.keys(ENTRY_POINTS).join(', ')})`,
      );
      continue;
    }
    for (const specifier of importsOf(text)) {
      const target = resolve(dirname(path), specifier);
      if (!target.startsWith(SRC + sep)) continue;
      const to = unitOf(target);
      if (to !== undefined && !allowed.includes(to))
        found.push(`${relative(REPO, path)} -> ${relative(REPO, target)} (${unit} may not import ${to})`);
      found.push(...agentPartViolations(path, target));
      found.push(...storePartViolations(path, target));
    }
  }
  return found;
}

/**
 * Every file the plugin bundle may be made of. The plugin runs on every pod start: a file that
 * joins it (a store, the agent, an npm package) is start-up time paid by every container, so a new
 * input is a decision to write down here, not an accident.
 */
export const PLUGIN_INPUTS: readonly string[] = [
  'src/plugin/plugin-main.ts',
  'src/plugin/plugin.ts',
  'src/plugin/journal-writer.ts',
  'src/api/cni-call.ts',
  'src/api/cni-stdout.ts',
  // The wire's one definition: the plugin's request is written by it, not by a copy of it.
  'src/api/cni-wire.ts',
  'src/api/errors.ts',
  'src/api/limits.ts',
  'src/api/socket.ts',
  'src/cni/args.ts',
  'src/cni/config-limits.ts',
  'src/cni/config-values.ts',
  // What a DEL reads of a config that does not validate (the plugin journals such a DEL by it).
  'src/cni/del-target.ts',
  'src/cni/errors.ts',
  'src/cni/ipam-config.ts',
  'src/cni/ipam-range.ts',
  'src/cni/journal-dir.ts',
  'src/cni/journal-entry.ts',
  'src/cni/netconf.ts',
  'src/cni/pool-names.ts',
  'src/cni/routes-and-dns.ts',
  'src/cni/spec.ts',
  'src/cni/whereabouts-keys.ts',
  'src/core/atomic-file.ts',
  'src/core/clock.ts',
  'src/core/defined.ts',
  'src/core/errors.ts',
  // The journal directory is made by it (a DEL's journal_dir under /proc must end, not spin).
  'src/core/make-directory.ts',
  'src/core/moment.ts',
  'src/core/unix-http.ts',
  'src/core/validate.ts',
  'src/ipam/address.ts',
  'src/ipam/allocation.ts',
  'src/ipam/pool-key.ts',
  'src/ipam/range.ts',
  // The store key's codec (pure, small): a range pool key is one with no part after its `#`.
  'src/ipam/store-key.ts',
];

/** The files esbuild puts into the plugin bundle, as scripts/build.ts builds it. */
function pluginBundleInputs(): string[] {
  const result = buildSync({
    entryPoints: [join(REPO, 'src', 'plugin', 'plugin-main.ts')],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node24',
    write: false,
    metafile: true,
    absWorkingDir: REPO,
    outfile: join(REPO, 'dist', 'architecture-check.js'),
    logLevel: 'silent',
  });
  return Object.keys(result.metafile.inputs).sort();
}

describe('architecture', () => {
  it('the plugin bundle holds only the files listed for it, and no npm package', () => {
    const inputs = pluginBundleInputs();
    assert.ok(inputs.includes('src/plugin/plugin-main.ts'), `unexpected bundle inputs: ${inputs.join(', ')}`);
    assert.deepEqual(
      inputs.filter((input) => !PLUGIN_INPUTS.includes(input)),
      [],
      'new inputs of the plugin bundle: add them to PLUGIN_INPUTS only if every pod start should pay for them',
    );
  });

  it('every src file imports only its own layer and the layers before it', () => {
    const files = sourceFiles(SRC).map((path) => ({ path, text: readFileSync(path, 'utf8') }));
    assert.ok(files.length > 20);
    assert.deepEqual(violations(files), []);
  });

  it('has no import circle among the files of src/, type-only imports included', () => {
    const files = sourceFiles(SRC).map((path) => ({ path, text: readFileSync(path, 'utf8') }));
    assert.deepEqual(importCircles(files), []);
  });

  it('catches an import circle (a planted one is reported)', () => {
    const planted = [
      { path: join(SRC, 'ipam', 'a.ts'), text: "import type { B } from './b.ts';" },
      { path: join(SRC, 'ipam', 'b.ts'), text: "import { a } from './a.ts';" },
      { path: join(SRC, 'ipam', 'c.ts'), text: "import { a } from './a.ts';" },
    ];
    assert.deepEqual(importCircles(planted), [['src/ipam/a.ts', 'src/ipam/b.ts']]);
  });

  it('`ls src` reads as the layers, then the entry points, and nothing else', () => {
    const entries = readdirSync(SRC, { withFileTypes: true });
    assert.deepEqual(
      entries.filter((e) => !e.isDirectory()).map((e) => e.name),
      [],
      'no file directly in src/',
    );
    assert.deepEqual(entries.map((e) => e.name).sort(), [...LAYERS, ...Object.keys(ENTRY_POINTS)].sort());
  });

  it('keeps every file in src/ to 400 lines, formatted: a longer one is two parts waiting to be told apart', () => {
    const long = sourceFiles(SRC)
      .map((path) => ({ path: relative(REPO, path), lines: readFileSync(path, 'utf8').split('\n').length - 1 }))
      .filter((f) => f.lines > MAX_FILE_LINES);
    assert.deepEqual(long, [], `split these along a seam of their own (at most ${MAX_FILE_LINES} lines each)`);
  });

  it('src/agent holds its wiring files and its parts, each part importing only the parts AGENT_PARTS names for it', () => {
    const entries = readdirSync(AGENT, { withFileTypes: true });
    assert.deepEqual(
      entries
        .filter((e) => !e.isDirectory())
        .map((e) => e.name)
        .sort(),
      [...AGENT_WIRING].sort(),
      'a file directly in src/agent only wires; put a part in its folder',
    );
    assert.deepEqual(
      entries
        .filter((e) => e.isDirectory())
        .map((e) => e.name)
        .sort(),
      Object.keys(AGENT_PARTS).sort(),
    );
  });

  it("catches an import across the agent's parts that AGENT_PARTS does not allow (planted ones are reported)", () => {
    const planted = [
      {
        path: join(AGENT, 'release', 'pipeline.ts'),
        text: "import { Registry } from '../registry/registry.ts';\nimport { x } from '../release-wiring.ts';\nimport { y } from '../metrics/telemetry.ts';",
      },
      { path: join(AGENT, 'settings', 'options.ts'), text: "import { z } from '../metrics/telemetry.ts';" },
    ];
    assert.deepEqual(violations(planted), [
      'src/agent/release/pipeline.ts -> src/agent/registry/registry.ts (agent/release may import only settings, metrics)',
      "src/agent/release/pipeline.ts -> src/agent/release-wiring.ts (agent/release may not import the agent's wiring)",
      'src/agent/settings/options.ts -> src/agent/metrics/telemetry.ts (agent/settings may import only itself)',
    ]);
  });

  it('`ls src/store` reads as the backends: the contract at the root, then sqlite, tiered and the two tiers', () => {
    const entries = readdirSync(STORE, { withFileTypes: true });
    const names = (dirs: boolean) =>
      entries
        .filter((e) => e.isDirectory() === dirs)
        .map((e) => e.name)
        .sort();
    assert.deepEqual(names(false), [...STORE_ROOT].sort(), "a backend's file belongs in its folder");
    assert.deepEqual(names(true), Object.keys(STORE_PARTS).sort());
  });

  it("catches an import across the store's backends that STORE_PARTS does not allow (planted ones are reported)", () => {
    const planted = [
      { path: join(STORE, 'kubernetes', 'tier.ts'), text: "import { x } from '../etcd-tier/continuity.ts';" },
      { path: join(STORE, 'sqlite', 'store.ts'), text: "import { y } from '../tiered/claims.ts';" },
      { path: join(STORE, 'store.ts'), text: "import type { z } from './sqlite/rows.ts';" },
      { path: join(STORE, 'cluster.ts'), text: "import type { v } from './tiered/cluster-tier.ts';" },
      { path: join(STORE, 'etcd-tier', 'tier.ts'), text: "import { w } from '../tiered/claims.ts';" },
    ];
    assert.deepEqual(violations(planted), [
      'src/store/kubernetes/tier.ts -> src/store/etcd-tier/continuity.ts (store/kubernetes may import only the root, tiered)',
      'src/store/sqlite/store.ts -> src/store/tiered/claims.ts (store/sqlite may import only the root)',
      "src/store/store.ts -> src/store/sqlite/rows.ts (the store's contract may not import its backends)",
      "src/store/cluster.ts -> src/store/tiered/cluster-tier.ts (the store's contract may not import its backends)",
    ]);
  });

  it('keeps the runtime adapters to the plugin wire: an adapter importing the agent, or the rest of the CLI, is reported', () => {
    const adapter = {
      path: join(SRC, 'cli', 'adapters', 'podman', 'adapter.ts'),
      text: "import { x } from '../../../agent/agent.ts';\nimport { y } from '../../main.ts';\nimport { z } from '../plugin-server.ts';\nimport { w } from '../../../api/plugins/wire.ts';",
    };
    assert.deepEqual(violations([adapter]), [
      'src/cli/adapters/podman/adapter.ts -> src/agent/agent.ts (cli/adapters may not import agent)',
      'src/cli/adapters/podman/adapter.ts -> src/cli/main.ts (cli/adapters may not import cli)',
    ]);
    const command = {
      path: join(SRC, 'cli', 'podman-events-command.ts'),
      text: "import { runPodmanAdapter } from './adapters/podman/adapter.ts';",
    };
    assert.deepEqual(violations([command]), []);
  });

  it('catches an upward import (a planted one is reported)', () => {
    const planted = {
      path: join(SRC, 'core', 'clock.ts'),
      text: "import { Agent } from '../agent/agent.ts';\nimport type { Store } from '../store/store.ts';",
    };
    assert.deepEqual(violations([planted]), [
      'src/core/clock.ts -> src/agent/agent.ts (core may not import agent)',
      'src/core/clock.ts -> src/store/store.ts (core may not import store)',
    ]);
    const plugin = { path: join(SRC, 'plugin', 'plugin.ts'), text: "const { x } = await import('../agent/agent.ts');" };
    assert.deepEqual(violations([plugin]), [
      'src/plugin/plugin.ts -> src/agent/agent.ts (plugin may not import agent)',
    ]);
  });
});

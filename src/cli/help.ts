/**
 * What each command of `warren` is for and which flags it takes: one entry per command, from which
 * both `warren --help` (the summaries) and `warren <command> --help` (one command's usage, summary
 * and flags) are printed, so the two never disagree. `agent`, `doctor` and `podman-events` print
 * their own flags' help (their flags are settings tables); they are listed here for the summary.
 */
import { SETTINGS } from '../agent/settings/table.ts';
import { settingsHelp } from './format.ts';

export interface CommandHelp {
  readonly name: string;
  /** What follows `warren <name>` on the usage line. */
  readonly synopsis: string;
  /** The summary, as `warren --help` shows it (wrapped lines, no indent). */
  readonly summary: readonly string[];
  /** Flags of this command beyond the common ones: [flag, what it does]. */
  readonly flags?: ReadonlyArray<readonly [string, string]>;
  /** Takes the common --socket and --json flags (it asks a running agent). */
  readonly common?: boolean;
  /** Prints its own help (`warren <name> --help` runs the command). */
  readonly ownHelp?: boolean;
}

const FILTERS: ReadonlyArray<readonly [string, string]> = [
  ['--pool P', 'only this pool'],
  ['--network N', 'only this CNI network'],
  ['--container ID', 'only this container'],
  ['--ifname I', 'only this interface'],
  ['--namespace NS', 'only pods of this namespace'],
  ['--pod NAME', 'only this pod'],
  ['--pod-uid UID', 'only this pod UID'],
  ['--node N', 'only allocations made by this node'],
  ['--address A', 'only this address'],
];

export const COMMANDS: readonly CommandHelp[] = [
  {
    name: 'agent',
    synopsis: '[flags]',
    summary: ['run the node agent (flags below, each also an environment variable)'],
    ownHelp: true,
  },
  { name: 'status', synopsis: '[--json]', summary: ["show the agent's state"], common: true },
  {
    name: 'pools',
    synopsis: '[--by-node] [--json]',
    summary: [
      'show each pool: capacity, allocated, resting, and for a range shared by nodes the',
      "range across the cluster (used, free, lent); --by-node: each node's share of it",
    ],
    flags: [['--by-node', "each node's share of every range shared by nodes: blocks, allocated, resting, borrowed"]],
    common: true,
  },
  {
    name: 'allocations',
    synopsis: '[filters] [--cluster] [--json]',
    summary: [
      'list allocations (filters: --pool --network --container --ifname',
      "--namespace --pod --pod-uid --node --address); --cluster: every node's, as",
      'published (--store kubernetes or etcd); read from the agent a page at a time',
    ],
    flags: [
      ...FILTERS,
      ['--cluster', "every node's allocations, as the cluster store publishes them (kubernetes, etcd)"],
    ],
    common: true,
  },
  {
    name: 'release',
    synopsis: '--address A [--pool P] | --container ID [--prefix] [--network N] [--ifname I] [--force]',
    summary: [
      'release --address A [--pool P], or --container ID [--network N] [--ifname I]',
      '(--container takes the whole container ID; with --prefix, a unique prefix of',
      'one, as tables show); what a container still uses (its network namespace exists)',
      'is refused unless --force; an address nothing holds is an error',
    ],
    flags: [
      ['--address A', 'the address to release'],
      ['--pool P', 'the pool of the address, when two pools hold it'],
      ['--container ID', "release this container's addresses"],
      ['--prefix', '--container is a unique prefix of a container ID'],
      ['--network N', 'only in this CNI network'],
      ['--ifname I', 'only this interface'],
      ['--force', 'release even what a running container still uses'],
    ],
    common: true,
  },
  {
    name: 'audit',
    synopsis: '[--fix] [--json]',
    summary: [
      'judge every allocation against what the node can observe; --fix releases',
      'what is provably stale and nothing else; exit 0 all healthy, 3 something stale',
      'or suspect is left, 1 a release failed',
    ],
    flags: [['--fix', 'release what is provably stale (nothing else)']],
    common: true,
  },
  {
    name: 'journal',
    synopsis: '[--journal-dir DIR] [--json]',
    summary: [
      'pending and set-aside missed-delete intents, and the last reconcile; with the',
      'agent down, read from the journal directory itself (read-only)',
    ],
    flags: [['--journal-dir DIR', "the agent's journal (env WARREN_JOURNAL_DIR; used when the agent is down)"]],
    common: true,
  },
  {
    name: 'plugins',
    synopsis: '[--json]',
    summary: [
      'sockets in the plugins directory: registered, refused and retrying plugins',
      '(runtime adapters), with what each reported and released',
    ],
    common: true,
  },
  {
    name: 'podman-events',
    synopsis: '[flags]',
    summary: [
      "run the podman adapter: follow podman's container events and serve them",
      'to the agent through a socket in its plugins directory (--help for flags)',
    ],
    ownHelp: true,
  },
  {
    name: 'nodes',
    synopsis: '[--json]',
    summary: ['nodes sharing the store (kubernetes, etcd): alive or not, blocks, allocations, lent'],
    common: true,
  },
  {
    name: 'reservations',
    synopsis: '[--json]',
    summary: [
      'cluster-wide reservations (WarrenReservation): what each holds back, the',
      'ranges it covers, and where reserved addresses are still in use',
    ],
    common: true,
  },
  {
    name: 'node',
    synopsis: 'forget NAME [--json]',
    summary: ['node forget N  free the blocks and allocations of node N, gone for good (refused while alive)'],
    common: true,
  },
  {
    name: 'store',
    synopsis: 'accept [--json]',
    summary: [
      'store accept   after the agent stopped allocating because its etcd lost its data (or another',
      "agent took this node's name): use the store as it is now (docs/recovery.md,",
      '"When etcd lost its data")',
    ],
    common: true,
  },
  {
    name: 'migrate',
    synopsis: 'whereabouts|to-whereabouts [--dry-run] [--kubeconfig F] [--namespace NS] [--json]',
    summary: [
      'migrate whereabouts [--dry-run] [--kubeconfig F] [--namespace NS]: record the',
      'addresses whereabouts holds for running pods in the kubernetes store, so the',
      'NetworkAttachmentDefinitions switch to warren with no pod restarted (README,',
      '"Migrate from whereabouts"); a table per range, exit 1 on any conflict;',
      'the way back, migrate to-whereabouts [--network N | --nad NS/NAME]..., writes',
      "the addresses warren holds for containers into whereabouts' IPPools and",
      'OverlappingRangeIPReservations, so the definitions switch back to whereabouts',
    ],
    flags: [
      ['--dry-run', 'say what would be recorded, write nothing'],
      ['--kubeconfig F', 'the kubeconfig (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)'],
      ['--namespace NS', "Warren's namespace (its Leases)"],
      ['--network N, --nad NS/NAME', 'to-whereabouts: only these networks (default: every warren one)'],
      ['--whereabouts-namespace NS', "to-whereabouts: whereabouts' (default: its objects', else kube-system)"],
      ['--json', 'machine-readable output'],
    ],
  },
  {
    name: 'install',
    synopsis: '--cni-bin-dir DIR [--link] [--from DIST] [--json]',
    summary: [
      'install --cni-bin-dir DIR [--link] [--from DIST]: the native forwarder as',
      'DIR/warren, and beside it DIR/warren.d/ (this Node and the TypeScript plugin),',
      'each file atomically, the forwarder last; --link symlinks this Node instead of',
      'copying it (development only: a node of the cluster has no Node.js); --from',
      "names the build output (default: this repository's dist/, npm run build)",
    ],
    flags: [
      ['--cni-bin-dir DIR', 'where the runtime looks for CNI plugins'],
      ['--link', 'symlink this Node instead of copying it (development only)'],
      ['--from DIST', 'the build output to install from (default: dist/)'],
      ['--json', 'machine-readable output'],
    ],
  },
  {
    name: 'uninstall',
    synopsis: '[--cni-bin-dir DIR] [--json]',
    summary: [
      'uninstall [--cni-bin-dir DIR]: hand the node back to its primary IPAM (the agent',
      "refuses ADD, writes host-local's reservations for every address it holds and",
      "removes Warren's config), then remove the plugin from DIR; the agent removes",
      'its database and journal when it stops. With --manage-cni-config off the plugin',
      'stays (exit 3) while pods still hold addresses through it',
    ],
    flags: [['--cni-bin-dir DIR', 'where the plugin was installed']],
    common: true,
  },
  {
    name: 'doctor',
    synopsis: '[flags]',
    summary: [
      'check the node end to end (plugin installed where the runtime looks, configs',
      'naming warren against the agent, socket, journal dir, netns dirs, containerd,',
      'store, clock) and say how to fix each finding; exit 1 on any error',
      '(--help for flags)',
    ],
    ownHelp: true,
  },
  { name: 'version', synopsis: '', summary: ['print the version'] },
];

const COMMON_FLAGS: ReadonlyArray<readonly [string, string]> = [
  ['--socket PATH', 'agent socket (env WARREN_SOCKET)'],
  ['--json', 'machine-readable output'],
];

const flagLines = (flags: ReadonlyArray<readonly [string, string]>): string => {
  const width = Math.max(...flags.map(([flag]) => flag.length));
  return flags.map(([flag, text]) => `  ${flag.padEnd(width)}  ${text}`).join('\n');
};

/** `warren --help`: every command's summary, the common flags and the agent's. */
export function usage(): string {
  const commands = COMMANDS.map(({ name, summary }) => {
    // A summary that spells its own verb (node forget, store accept) starts at the name's column.
    const first = summary[0] ?? '';
    const lead = first.startsWith(`${name} `) && /\s{2}/.test(first) ? `  ${first}` : `  ${name.padEnd(14)} ${first}`;
    return [lead, ...summary.slice(1).map((l) => `${' '.repeat(17)}${l}`)].join('\n');
  }).join('\n');
  return `usage: warren <command> [flags]

commands:
${commands}

common flags:
${flagLines(COMMON_FLAGS)}

agent flags:
${settingsHelp(Object.values(SETTINGS))}
`;
}

/** `warren <name> --help`, or undefined for a command with no entry or one that prints its own. */
export function commandHelp(name: string): string | undefined {
  const command = COMMANDS.find((c) => c.name === name);
  if (command === undefined || command.ownHelp === true) return undefined;
  const flags = [...(command.flags ?? []), ...(command.common === true ? COMMON_FLAGS : [])];
  const seen = new Set<string>();
  const unique = flags.filter(([flag]) => !seen.has(flag) && seen.add(flag) !== undefined);
  const text = wrap(command.summary.map((l) => l.trim()).join(' '), 78);
  return `usage: warren ${name}${command.synopsis === '' ? '' : ` ${command.synopsis}`}\n\n${text}\n${
    unique.length === 0 ? '' : `\nflags:\n${flagLines(unique)}\n`
  }`;
}

/** Words of `text` in lines of at most `width` characters (a longer word has a line of its own). */
function wrap(text: string, width: number): string {
  const lines: string[] = [];
  let line = '';
  for (const word of text.split(/\s+/)) {
    if (line !== '' && line.length + 1 + word.length > width) {
      lines.push(line);
      line = word;
    } else line = line === '' ? word : `${line} ${word}`;
  }
  if (line !== '') lines.push(line);
  return lines.join('\n');
}

/** Whether the arguments ask for help (`--help` or `-h` before any `--`). */
export function asksForHelp(argv: readonly string[]): boolean {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).some((a) => a === '--help' || a === '-h');
}

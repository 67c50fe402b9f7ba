/**
 * The node's files against the running agent: what the runtime finds (its CNI dirs, the plugin in
 * them) and what the configs that name Warren tell the plugin (socket, journal dir, store).
 *
 * A config and the agent must agree on three things, or addresses leak or pods fail:
 * - the socket: the plugin calls `ipam.socket`, else DEFAULT_SOCKET (the runtime's WARREN_SOCKET
 *   aside, which no file shows); another path is another agent, or none;
 * - the journal dir: the plugin records a DEL it cannot deliver in `ipam.journal_dir`, else
 *   DEFAULT_JOURNAL_DIR; the agent reads its own --journal-dir only, so a DEL written elsewhere is
 *   never read and its address never released;
 * - the store: a config that names one is refused on every ADD by an agent on the other; and a
 *   config whose ranges other nodes may use must come from a store the nodes share (store-scope.ts).
 * Pure: paths are compared through the observation's `canonical`.
 */
import { resolve } from 'node:path';
import type { DoctorFacts } from '../../api/doctor.ts';
import { DEFAULT_SOCKET } from '../../api/socket.ts';
import { DEFAULT_JOURNAL_DIR } from '../../cni/journal-dir.ts';
import { DEFAULT_CNI_BIN_DIR } from './containerd-config.ts';
import type { ConfDirScan, WarrenConfig } from './conf-dir.ts';
import type { ContainerdConfigReading } from './containerd-config.ts';
import { type Finding, error, ok, warning } from './finding.ts';
import { ignoredBesidesStore, storeScopeFindings, warrenPoolFindings } from './store-scope.ts';
import type { DirSource, NodeObservation } from './observation.ts';

type Canonical = (path: string) => string;

function sourceOf(from: DirSource, flag: string, reading: ContainerdConfigReading): string {
  switch (from) {
    case 'flag':
      return `given with ${flag}`;
    case 'agent':
      return "the agent's --cni-conf-dir";
    case 'containerd-config':
      return `from containerd's config ${reading.path}`;
    case 'default':
      return `the default: containerd's config ${reading.path} ${
        reading.kind === 'absent'
          ? 'does not exist'
          : reading.kind === 'unreadable'
            ? 'cannot be read'
            : 'does not set it'
      }`;
    default:
      return ((never: never) => never)(from);
  }
}

function containerdConfigFinding(reading: ContainerdConfigReading): Finding {
  switch (reading.kind) {
    case 'read': {
      const s = reading.settings;
      const imports = reading.files.length > 1 ? `, with ${reading.files.slice(1).join(', ')}` : '';
      return ok(
        'containerd-config-read',
        `containerd's config ${reading.path} read`,
        `CNI bin dirs ${s.binDirs.join(', ')}; conf dir ${s.confDir}${imports}`,
      );
    }
    case 'absent':
      return ok(
        'containerd-config-absent',
        `no containerd config at ${reading.path}`,
        "containerd's defaults are assumed; if this node's runtime looks elsewhere, say where with " +
          '--cni-bin-dir and --cni-conf-dir (or --containerd-config)',
      );
    case 'unreadable':
      return warning(
        'containerd-config-unreadable',
        `containerd's config ${reading.path} cannot be used`,
        `${reading.reason}; where the runtime looks for plugins and configs is not known from it`,
        `fix ${reading.path} (containerd reads it at its start too), or say where the runtime looks with ` +
          `--cni-bin-dir DIR and --cni-conf-dir DIR`,
      );
    default:
      return ((never: never) => never)(reading);
  }
}

/** The plugin as the runtime finds it: in the first bin dir holding a file named `warren`. */
function pluginFinding(node: NodeObservation): Finding {
  const installs = node.binDirs.installs;
  const dirs = installs.map((i) => i.binDir);
  const source = `bin dirs ${dirs.join(', ')}, ${sourceOf(node.binDirs.from, '--cni-bin-dir', node.containerdConfig)}`;
  const index = installs.findIndex((i) => i.forwarder.kind !== 'missing');
  const found = installs[index];
  if (found === undefined) {
    const reasons = installs.map((i) => (i.forwarder.kind === 'missing' ? i.forwarder.reason : '')).join('; ');
    return error(
      'plugin-missing',
      dirs.length === 1 ? `warren is not installed in ${dirs[0]}` : `warren is installed in none of ${dirs.join(', ')}`,
      `${reasons}; the runtime runs the plugin a config's ipam.type names from its bin dirs, so every pod of ` +
        `a network using Warren fails (${source})`,
      `warren install --cni-bin-dir ${dirs[0] ?? DEFAULT_CNI_BIN_DIR}`,
    );
  }
  const fix = `warren install --cni-bin-dir ${found.binDir}`;
  if (found.forwarder.kind === 'unusable') {
    return error(
      'plugin-not-executable',
      `warren in ${found.binDir} cannot be run`,
      `${found.forwarder.reason}; the runtime finds it first and fails with it (${source})`,
      fix,
    );
  }
  const fallback = [found.node, found.bundle].flatMap((f) => (f.kind === 'ok' ? [] : [f.reason]));
  if (fallback.length > 0) {
    return error(
      'plugin-fallback-missing',
      `warren in ${found.binDir} has no fallback beside it`,
      `${fallback.join('; ')}; the forwarder hands a call it cannot relay (no agent, a bad config) to ` +
        `warren.d/, which journals the DEL or names the problem; without it that call fails and a DEL is lost`,
      fix,
    );
  }
  const earlier = index > 0 ? `, after ${dirs.slice(0, index).join(', ')} which lack it` : '';
  return ok(
    'plugin-installed',
    `warren is installed in ${found.binDir}`,
    `the forwarder and its fallback (warren.d/) are in place${earlier} (${source})`,
  );
}

/** Containerd's CNI dirs, the plugin in them, and the agent's managed config's dir against containerd's. */
export function runtimeDirFindings(node: NodeObservation, facts: DoctorFacts | undefined): Finding[] {
  const canonical: Canonical = node.canonical ?? ((p) => resolve(p));
  const reading = node.containerdConfig;
  const found = [containerdConfigFinding(reading), pluginFinding(node)];
  // Said only of a directory that could be listed: one missing or unreadable is reported by the
  // config findings, and a ✓ before them would say the opposite.
  if (node.confDir.scan.listing.kind === 'listed') {
    found.push(
      ok(
        'cni-conf-dir',
        `network configs read from ${node.confDir.scan.dir}`,
        sourceOf(node.confDir.from, '--cni-conf-dir', reading),
      ),
    );
  }
  if (
    facts?.manageCniConfig === true &&
    reading.kind === 'read' &&
    canonical(facts.cniConfDir) !== canonical(reading.settings.confDir)
  ) {
    found.push(
      warning(
        'cni-conf-dir-mismatch',
        `the agent writes Warren's config into ${facts.cniConfDir}, containerd reads configs from ` +
          `${reading.settings.confDir}`,
        `the runtime never sees the config the agent keeps (containerd's config ${reading.path})`,
        `start the agent with --cni-conf-dir ${reading.settings.confDir}`,
      ),
    );
  }
  return found;
}

function whereOf(config: WarrenConfig): string {
  return config.plugin === undefined ? config.file : `${config.file} (plugins[${config.plugin}])`;
}

function oneConfig(config: WarrenConfig, facts: DoctorFacts | undefined, canonical: Canonical): Finding[] {
  const where = whereOf(config);
  const r = config.reading;
  if (r.kind === 'refused') {
    return [
      error(
        'config-invalid',
        `${where} names warren, and the agent refuses it`,
        r.message,
        `edit ${config.file} as the message says; every ADD of this network fails until then`,
      ),
    ];
  }
  const socket = r.socket ?? DEFAULT_SOCKET;
  const journal = r.journalDir ?? DEFAULT_JOURNAL_DIR;
  const says =
    `network ${r.network}: socket ${socket}${r.socket === undefined ? ' (the default)' : ''}, journal ` +
    `dir ${journal}${r.journalDir === undefined ? ' (the default)' : ''}, store ${r.store ?? 'any'}`;
  const found: Finding[] = [];
  if (facts === undefined) {
    found.push(
      ok(
        'config-parses',
        `${where} names warren and parses`,
        `${says}; not compared with the agent, which did not answer`,
      ),
    );
  } else {
    if (canonical(socket) !== canonical(facts.socket)) {
      found.push(
        error(
          'config-socket-mismatch',
          `${where} sends the plugin to ${socket}, the agent listens on ${facts.socket}`,
          `${
            r.socket === undefined
              ? `the config names no ipam.socket, so the plugin calls ${
                  DEFAULT_SOCKET
                } (or WARREN_SOCKET in the runtime's environment); `
              : ''
          }the ` +
            `plugin would call another agent, or none, and journal every DEL of network ${r.network} where ` +
            `this agent may never read it`,
          `set "socket": "${facts.socket}" in the ipam section of ${config.file}, or start the agent with ` +
            `--socket ${socket}`,
        ),
      );
    }
    if (canonical(journal) !== canonical(facts.journalDir)) {
      found.push(
        error(
          'journal-dir-mismatch',
          `${where} journals missed DELs in ${journal}, the agent reads ${facts.journalDir}`,
          `${
            r.journalDir === undefined
              ? `the config names no ipam.journal_dir, so the plugin writes to ${
                  DEFAULT_JOURNAL_DIR
                } (or WARREN_JOURNAL_DIR in the runtime's environment); `
              : ''
          }a ` + `DEL the agent missed is never read, and its address is never released`,
          `set "journal_dir": "${facts.journalDir}" in the ipam section of ${config.file}, or start the ` +
            `agent with --journal-dir ${journal}`,
        ),
      );
    }
    if (r.store !== undefined && r.store !== facts.store.kind) {
      found.push(
        error(
          'config-store-mismatch',
          `${where} asks for the ${r.store} store, the agent runs on ${facts.store.kind}`,
          `the agent refuses every ADD of network ${r.network}: addresses of one network must come from one store`,
          `set "store": "${facts.store.kind}" in the ipam section of ${config.file}, or start the agent with ` +
            `--store ${r.store}`,
        ),
      );
    }
    if (found.length === 0) found.push(ok('config-agrees', `${where} names warren and agrees with the agent`, says));
  }
  found.push(...storeScopeFindings(where, config.file, r, facts));
  found.push(...warrenPoolFindings(where, r, facts));
  // Whereabouts' store keys are never "ignored": the store serves them or a finding above says why not.
  const ignored = ignoredBesidesStore(r);
  if (ignored.length > 0) {
    found.push(
      ok(
        'whereabouts-keys-ignored',
        `${where}: ${ignored.length} whereabouts key${ignored.length === 1 ? '' : 's'} accepted ` + `and ignored`,
        ignored.map((k) => `${k.path} (${k.reason})`).join('; '),
      ),
    );
  }
  return found;
}

/** The configs of the conf dir that name Warren, each against the agent (when it answered). */
export function configFindings(
  scan: ConfDirScan,
  facts: DoctorFacts | undefined,
  canonical: Canonical = (p) => resolve(p),
): Finding[] {
  const found: Finding[] = [];
  const noConfigFix =
    `start the agent with --manage-cni-config on to write one, or put ipam {"type": "warren", ` +
    `...} in the network's config in ${scan.dir}; with Multus the config is in a ` +
    `NetworkAttachmentDefinition instead, and this can be ignored`;
  switch (scan.listing.kind) {
    case 'listed':
      break;
    case 'missing':
      return [
        warning(
          'no-warren-config',
          `no config names warren: ${scan.dir} does not exist`,
          'the runtime finds no network config here',
          `${noConfigFix}; pass --cni-conf-dir if the runtime reads another directory`,
        ),
      ];
    case 'unreadable':
      return [
        warning(
          'conf-dir-unreadable',
          `${scan.dir} cannot be listed`,
          scan.listing.reason,
          'run `warren doctor` as root, or pass --cni-conf-dir DIR',
        ),
      ];
    default:
      return ((never: never) => never)(scan.listing);
  }
  for (const m of scan.malformed) {
    const title = `${m.file} ${m.reason}`;
    const fix = `fix or remove ${m.file}: the runtime cannot load it either`;
    found.push(
      m.mentionsWarren
        ? error(
            'config-malformed',
            title,
            'it mentions warren, so it may be the config meant for Warren: no pod gets an address from it',
            fix,
          )
        : warning('config-malformed', title, 'whether it names warren cannot be told', fix),
    );
  }
  for (const config of scan.configs) found.push(...oneConfig(config, facts, canonical));
  if (scan.configs.length === 0) {
    const others =
      scan.others.length === 0 ? 'no network config at all' : `only configs that do not: ${scan.others.join(', ')}`;
    found.push(
      warning('no-warren-config', `no config in ${scan.dir} names warren`, `${scan.dir} holds ${others}`, noConfigFix),
    );
  }
  return found;
}

/**
 * The running agent's own setup, judged from what it reports (DoctorFacts): its journal and plugins dirs, the
 * namespace directories it can observe and the allocations recorded under them, containerd, its
 * CNI config manager, its store's health and durability (and etcd's history: etcd-history.ts), its
 * clock against etcd, its metrics endpoint.
 *
 * What makes an error rather than a warning: an address that can leak or a pod that cannot start.
 * An unobservable namespace directory is an error only when allocations are recorded under it
 * (their namespaces' going away is not seen); with none, it is a warning about the future.
 * Pure.
 */
import type { DoctorFacts } from '../../api/doctor.ts';
import type { ContainerdConfigReading } from './containerd-config.ts';
import { historyFindings } from './etcd-history.ts';
import { reservationFindings } from './reservation-checks.ts';
import { type Finding, error, ok, warning } from './finding.ts';
import type { JournalDirCheck } from './observation.ts';

/** Skew beyond the clock's resolution worth a word: timestamps across nodes stop lining up. */
export const SKEW_WARNING_MS = 2_000;
/** Skew beyond which leases go wrong: the agent's default node lease (--node-lease) is 10 s. */
export const SKEW_ERROR_MS = 10_000;

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function journalFinding(journal: JournalDirCheck): Finding {
  if (journal.problem === undefined)
    return ok(
      'journal-dir-usable',
      `the journal dir ${journal.dir} is usable`,
      'a real directory, owned by this user, writable by no one else',
    );
  return error(
    'journal-dir-unusable',
    `the journal dir ${journal.dir} is refused`,
    `${journal.problem}; the plugin cannot journal a DEL the agent missed there, and the agent reads nothing from it`,
    `make ${journal.dir} a directory owned by the agent's user with mode 0700 (e.g. chown root ` +
      `${journal.dir} && chmod 0700 ${journal.dir}), or start the agent with --journal-dir naming one`,
  );
}

function pluginsDirFinding(plugins: JournalDirCheck): Finding {
  if (plugins.problem === undefined)
    return ok(
      'plugins-dir-trusted',
      `the plugins dir ${plugins.dir} is trusted`,
      'a real directory, owned by this user, writable by no one else',
    );
  return error(
    'plugins-dir-untrusted',
    `the plugins dir ${plugins.dir} is not trusted`,
    `${plugins.problem}; no runtime adapter registers while it is so (a socket there is taken for an adapter ` +
      `whose word releases addresses)`,
    `make ${plugins.dir} a directory owned by the agent's user and writable by no one else (e.g. chown root ` +
      `${plugins.dir} && chmod 0700 ${plugins.dir}), after checking the sockets in it; or start the agent with ` +
      `--plugins-dir naming one`,
  );
}

function netnsFindings(facts: DoctorFacts): Finding[] {
  const found: Finding[] = [];
  const recordedUnder = (dir: string) => facts.recordedNetns.find((r) => r.dir === dir);
  for (const d of facts.netns) {
    const recorded = recordedUnder(d.dir);
    const count = recorded?.allocations ?? 0;
    const example = recorded?.example === undefined ? '' : ` (e.g. ${recorded.example})`;
    if (d.observable) {
      found.push(
        ok(
          'netns-dir-observable',
          `network namespaces in ${d.dir} are observable`,
          `${plural(count, 'allocation')} recorded under it${example}`,
        ),
      );
      continue;
    }
    const detail =
      `${d.reason ?? 'not observable'}; ` +
      `${
        count === 0
          ? 'no allocation is recorded under it yet, but'
          : `${plural(count, 'allocation')} recorded under it${example}, and`
      } ` +
      `the namespace sweep cannot see a namespace there go, so an address whose DEL is lost stays ` +
      `allocated`;
    const fix =
      `mount the host's ${d.dir} into the agent's container (a hostPath volume with mountPropagation: ` +
      `HostToContainer), or run the agent on the host; if no namespace lives there, leave it out of ` +
      `--netns-dirs`;
    found.push(
      count > 0
        ? error('netns-dir-unobservable', `${d.dir} is not observable`, detail, fix)
        : warning('netns-dir-unobservable', `${d.dir} is not observable`, detail, fix),
    );
  }
  if (facts.netns.length === 0)
    found.push(
      ok(
        'netns-sweep-off',
        'no network namespace directory is judged',
        '--netns-dirs is empty: no address is released because its namespace is gone',
      ),
    );
  for (const r of facts.recordedNetns) {
    if (r.dir !== undefined || r.allocations === 0) continue;
    if (r.unrecorded === true) {
      found.push(
        ok(
          'netns-unrecorded',
          `${plural(r.allocations, 'allocation')} recorded no network namespace`,
          "they are released by DEL, the journal, GC or the runtimes' events, never by the namespace sweep",
        ),
      );
      continue;
    }
    const example = r.example === undefined ? '' : ` (e.g. ${r.example})`;
    found.push(
      warning(
        'netns-outside-observed-dirs',
        `${plural(r.allocations, 'allocation')} recorded namespaces outside every observed directory${example}`,
        `${
          facts.netns.length === 0
            ? 'no directory is observed'
            : `observed: ${facts.netns.map((d) => d.dir).join(', ')}`
        }; ` + `the namespace sweep cannot release them when their namespace goes`,
        `add the directory their namespaces live in to ` +
          `--netns-dirs${
            r.example === undefined ? '' : ` (${r.example.slice(0, r.example.lastIndexOf('/')) || '/'})`
          }, ` +
          `mounted from the host`,
      ),
    );
  }
  return found;
}

function containerdFindings(facts: DoctorFacts, reading: ContainerdConfigReading): Finding[] {
  const c = facts.containerd;
  if (c === undefined)
    return [
      ok(
        'containerd-source-off',
        'the containerd source is off',
        "the agent does not follow containerd's events (--containerd off)",
      ),
    ];
  if (c.state === 'subscribed')
    return [
      ok(
        'containerd-subscribed',
        `containerd followed on ${c.socket}`,
        "subscribed to its events: a deleted container's addresses are released even without a DEL",
      ),
    ];
  const configured =
    reading.kind === 'read' && reading.settings.grpcAddress !== c.socket
      ? `; containerd's config ${reading.path} says it listens on ${reading.settings.grpcAddress}`
      : '';
  const detail =
    `state ` +
    `${c.state}${c.lastError === undefined ? '' : `, last error: ${c.lastError}`}${configured}; ` +
    `until it is followed, only DELs, the journal and the namespace sweep release addresses`;
  const fix =
    `start containerd, or point the agent at its socket with --containerd-socket PATH (in a container: ` +
    `mount the host's ${c.socket.slice(0, c.socket.lastIndexOf('/')) || '/'}); --containerd off if ` +
    `this node does not run containerd`;
  if (c.state === 'stopped')
    return [
      error(
        'containerd-stopped',
        `the containerd source has stopped (${c.socket})`,
        detail,
        'restart the agent; if it stops again, see its log',
      ),
    ];
  return [warning('containerd-unreachable', `containerd is not followed on ${c.socket}`, detail, fix)];
}

/** Where the store keeps what, for the store's finding. */
function storeWhere(s: DoctorFacts['store']): string {
  switch (s.kind) {
    case 'etcd':
      return (
        "this node's addresses in SQLite, on this node; block owners and published allocations in etcd " +
        `(endpoints ${(s.etcdEndpoints ?? []).join(', ')})`
      );
    case 'kubernetes':
      return (
        "this node's addresses in SQLite, on this node; block owners and published allocations in the Kubernetes " +
        `API, Leases in namespace ${s.kubeNamespace ?? '?'}`
      );
    case 'sqlite':
      return 'SQLite, on this node';
    default:
      return ((never: never) => never)(s.kind);
  }
}

function storeFindings(facts: DoctorFacts): Finding[] {
  const s = facts.store;
  const found: Finding[] = [];
  if (s.healthy) {
    found.push(ok('store-healthy', `the store is healthy: ${s.description}`, storeWhere(s)));
  } else {
    found.push(
      error(
        'store-unhealthy',
        `the store is unhealthy: ${s.description}`,
        `${s.error ?? 'no reason given'}; ADDs fail (CNI error 11) until it recovers`,
        s.kind === 'etcd'
          ? `check that ${(s.etcdEndpoints ?? []).join(', ') || 'the etcd endpoints'} answer from this node ` +
              `(etcdctl endpoint health) with the agent's certificates`
          : s.kind === 'kubernetes'
            ? "check that the API server answers from this node with the agent's credentials (its service " +
              'account, or --kubeconfig) and that deploy/ (CRDs, RBAC) is applied; ADDs with room in own blocks ' +
              'still succeed'
            : "check the database file's disk (space, read-only mount) and permissions, then restart the agent; " +
              '`warren status` shows the error',
      ),
    );
  }
  if (s.clusterProblem !== undefined) {
    found.push(
      error(
        'store-not-allocating',
        'this node does not allocate on its cluster store',
        `${s.clusterProblem}; ADDs fail (CNI error 11) and STATUS answers 50`,
        'see docs/recovery.md, "When etcd lost its data" (or "When the API server lost its data" on the kubernetes ' +
          'store): if the store lost its data, restore it from a backup or accept it as it is (`warren store ' +
          'accept` on each node that stopped) after checking; while the cluster is in recovery, accept on (or ' +
          "`warren node forget`) each node it waits for; if another agent holds this node's name, stop one of " +
          'them or give it another --node-name',
      ),
    );
  }
  if (s.legacy !== undefined) {
    const nodes = Object.entries(s.legacy.blocks).map(([node, n]) => `${node} (${n})`);
    found.push(
      warning(
        'etcd-legacy-data',
        'etcd holds data of the old one-tier layout (units/, owners/)',
        `old blocks of node${nodes.length === 1 ? '' : 's'} ${nodes.join(', ') || 'none'}, ` +
          `${s.legacy.ranges} old range documents: each node moves its own old blocks into its SQLite file ` +
          'at its next start',
        'start the agents of those nodes (the new version); a node that never comes back: delete its Node ' +
          '(node forget frees its blocks and removes its old documents) — see docs/etcd.md, "Upgrading from the ' +
          'one-tier etcd store"',
      ),
    );
  }
  if (s.synchronous === 'NORMAL') {
    found.push(
      warning(
        'store-durability-normal',
        'the store commits with synchronous=NORMAL',
        'a committed allocation survives a crash of the agent, but not a power loss: after one, an address ' +
          'handed out may be handed out again',
        'start the agent with --sync FULL (the default)',
      ),
    );
  } else if (s.synchronous === 'FULL') {
    found.push(
      ok('store-durable', 'the store commits with synchronous=FULL', 'a committed allocation survives a power loss'),
    );
  }
  return found;
}

function clockFindings(facts: DoctorFacts): Finding[] {
  const c = facts.clockSkew;
  if (c === undefined) return [];
  const fix = "synchronise this node's clock (chrony, or systemd-timesyncd: timedatectl set-ntp true)";
  if ('error' in c) {
    return [
      warning(
        'clock-skew-unmeasured',
        `the clock could not be compared with etcd${c.endpoint === undefined ? '' : ` at ${c.endpoint}`}`,
        c.error,
        'check that the etcd endpoints answer from this node; then run `warren doctor` again',
      ),
    ];
  }
  const beyond = Math.abs(c.skewMs) - c.resolutionMs;
  const detail =
    `this node is ${Math.abs(c.skewMs)} ms ${c.skewMs >= 0 ? 'ahead of' : 'behind'} ${c.endpoint} ` +
    `(measured to ${c.resolutionMs} ms)`;
  if (beyond > SKEW_ERROR_MS)
    return [
      error(
        'clock-skew-beyond-lease',
        "this node's clock is off by more than a node lease",
        `${detail}; node liveness and address cool-downs are timed by it`,
        fix,
      ),
    ];
  if (beyond > SKEW_WARNING_MS)
    return [
      warning('clock-skew', "this node's clock is off", `${detail}; times recorded by nodes do not line up`, fix),
    ];
  return [ok('clock-in-step', "this node's clock agrees with etcd", detail)];
}

function metricsFindings(facts: DoctorFacts): Finding[] {
  const m = facts.metrics;
  if (m === undefined) return [ok('metrics-off', 'metrics and the dashboard are off', '--metrics-address is empty')];
  if (m.error !== undefined) {
    return [
      warning(
        'metrics-unavailable',
        `metrics cannot be served on ${m.address}`,
        m.error,
        'free the port, or choose another with --metrics-address HOST:PORT (empty turns metrics off)',
      ),
    ];
  }
  return [ok('metrics-served', `metrics on http://${m.address}/metrics`, `the dashboard on http://${m.address}/`)];
}

/** A config manager that failed: the node keeps the last config, which no longer follows the primary. */
function cniConfigFindings(facts: DoctorFacts): Finding[] {
  const c = facts.cniConfig;
  if (c?.state !== 'failed') return [];
  return [
    error(
      'cni-config-failed',
      `the agent's CNI config manager failed (${c.output})`,
      `${c.problem ?? 'no reason given'}; the last config written stays, and no change of the primary reaches it`,
      'fix what the problem names (the primary config, the conf dir); the agent tries again on every change ' +
        'there — if it fails again, see its log',
    ),
  ];
}

/** Every finding about the agent's own setup, in the order of the module header. */
export function agentFindings(
  facts: DoctorFacts,
  journal: JournalDirCheck | undefined,
  reading: ContainerdConfigReading,
  plugins?: JournalDirCheck,
): Finding[] {
  return [
    ...(journal === undefined ? [] : [journalFinding(journal)]),
    ...(plugins === undefined ? [] : [pluginsDirFinding(plugins)]),
    ...netnsFindings(facts),
    ...containerdFindings(facts, reading),
    ...cniConfigFindings(facts),
    ...storeFindings(facts),
    ...historyFindings(facts),
    ...clockFindings(facts),
    ...metricsFindings(facts),
    ...reservationFindings(facts),
  ];
}

/**
 * The running agent's own setup, judged from what it reports (DoctorFacts): its journal and plugins dirs, the
 * namespace directories it can observe and the allocations recorded under them, containerd, its
 * CNI config manager, its store's health and durability and its clock against etcd (store-checks.ts), etcd's
 * history (etcd-history.ts), its metrics endpoint.
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
import { kubeApiFindings } from './kube-api-checks.ts';
import { etcdApiFindings } from './etcd-api-checks.ts';
import { clockFindings, storeFindings } from './store-checks.ts';
import { type Finding, error, ok, warning } from './finding.ts';
import type { JournalDirCheck } from './observation.ts';

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
    ...kubeApiFindings(facts),
    ...etcdApiFindings(facts),
  ];
}
